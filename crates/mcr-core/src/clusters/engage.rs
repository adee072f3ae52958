//! Bringing members up and down: [`Clusters::add`], [`Clusters::add_or_replace`] and
//! [`Clusters::remove`]. A member whose token is cancelled is forgotten by the registry that
//! keeps the active ones.

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{AddOutcome, Clusters, Pending, apply_index};
use crate::{Aware, Cluster, ClusterName, Error, FieldIndex, cache::lock};

impl Clusters {
    /// Adds and engages `cluster` under [`cluster.name()`](Cluster::name).
    ///
    /// Refuses a name already present ([`Error::AlreadyEngaged`]) and the names no member may
    /// have ([`Error::InvalidName`]: empty, or the host's). Then, in three phases:
    ///
    /// 1. **open the informers**: starts the cache with a child token of `parent`, calls
    ///    [`Aware::engage`] (an error there becomes [`Error::Engage`]), where the manager's
    ///    controllers open their informers, and applies every registered field index;
    /// 2. **wait for sync** of every informer opened ([`Error::SyncTimeout`] after
    ///    [`ClustersOptions::sync_timeout`](crate::ClustersOptions::sync_timeout));
    /// 3. **activate**: [`get`](Clusters::get) and [`names`](Clusters::names) show the cluster.
    ///
    /// On any failure the child token is cancelled (which disengages the cluster wherever it
    /// was engaged) and the cluster forgotten.
    ///
    /// ```no_run
    /// # async fn f(c: mcr_core::Cluster, aware: &dyn mcr_core::Aware) -> Result<(), mcr_core::Error> {
    /// let clusters = mcr_core::Clusters::new();
    /// let token = tokio_util::sync::CancellationToken::new();
    /// clusters.add(&token, c, aware).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add(
        &self,
        parent: &CancellationToken,
        cluster: Cluster,
        aware: &dyn Aware,
    ) -> Result<(), Error> {
        let name = cluster.name().clone();
        if let Some(reason) = name.member_name_error() {
            return Err(Error::InvalidName {
                cluster: name,
                reason,
            });
        }
        let token = parent.child_token();
        let indexes = {
            let mut state = lock(&self.inner.state);
            // A cluster whose token fired is on its way out: it does not count.
            if self
                .present(&state, &name)
                .is_some_and(|(_, t)| !t.is_cancelled())
            {
                return Err(Error::AlreadyEngaged(name));
            }
            let pending = Pending {
                cluster: cluster.clone(),
                token: token.clone(),
            };
            state.pending.insert(name.clone(), pending);
            state.indexes.clone()
        };
        let span = tracing::info_span!("add_cluster", cluster = %name, id = %cluster.id());
        let result = self
            .bring_up(&token, &cluster, &indexes, aware)
            .instrument(span)
            .await;
        match result {
            Ok(()) => {
                // Phase 3, activation: from pending to the registry, under the state lock so a
                // concurrent `remove` finds it in one place or the other.
                let activated = {
                    let mut state = lock(&self.inner.state);
                    match state.pending.get(&name) {
                        Some(p) if p.cluster.same_instance(&cluster) => {
                            state.pending.remove(&name);
                            Some(self.inner.active.record(
                                token.clone(),
                                name.clone(),
                                cluster.clone(),
                            ))
                        }
                        _ => None,
                    }
                };
                match activated {
                    Some(Ok(_)) => {
                        tracing::info!(cluster = %name, "cluster engaged");
                        Ok(())
                    }
                    Some(Err(err)) => {
                        token.cancel();
                        Err(err)
                    }
                    None => {
                        // Removed while we were bringing it up.
                        token.cancel();
                        Err(Error::Stopped(name))
                    }
                }
            }
            Err(err) => {
                token.cancel();
                self.forget(&name, &cluster);
                tracing::warn!(cluster = %name, error = %err, "cluster could not be engaged");
                Err(err)
            }
        }
    }

    async fn bring_up(
        &self,
        token: &CancellationToken,
        cluster: &Cluster,
        indexes: &[FieldIndex],
        aware: &dyn Aware,
    ) -> Result<(), Error> {
        let name = cluster.name();
        // Phase 1, open the informers: start the cache, engage (the manager's controllers open
        // their informers as they engage), apply the indexes.
        cluster.cache().start(token.clone());
        aware
            .engage(token.clone(), name.clone(), cluster.clone())
            .map_err(|err| Error::Engage {
                cluster: name.clone(),
                source: Box::new(err),
            })?;
        // After the engagement, so the indexes' informers carry the engaged name.
        for index in indexes {
            apply_index(cluster, index)?;
        }
        // Phase 2, wait until every informer opened so far has listed. Phase 3, activation
        // (`get` and `names` show the cluster), is the caller's.
        tokio::select! {
            biased;
            () = token.cancelled() => Err(Error::Stopped(name.clone())),
            synced = cluster.cache().wait_for_sync(self.inner.opts.sync_timeout) => synced,
        }
    }

    /// Forgets a cluster that failed to come up (if it is still the pending one).
    fn forget(&self, name: &ClusterName, cluster: &Cluster) {
        let mut state = lock(&self.inner.state);
        if state
            .pending
            .get(name)
            .is_some_and(|p| p.cluster.same_instance(cluster))
        {
            state.pending.remove(name);
        }
    }

    /// Adds `cluster`, replacing a running cluster of the same name unless both have the same
    /// [connection hash](Cluster::connection_hash) (then [`AddOutcome::Unchanged`]).
    ///
    /// ```no_run
    /// # async fn f(clusters: mcr_core::Clusters, c: mcr_core::Cluster, aware: &dyn mcr_core::Aware) -> Result<(), mcr_core::Error> {
    /// use mcr_core::AddOutcome;
    /// let token = tokio_util::sync::CancellationToken::new();
    /// match clusters.add_or_replace(&token, c, aware).await? {
    ///     AddOutcome::Unchanged => {}
    ///     AddOutcome::Added | AddOutcome::Replaced => println!("connected"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn add_or_replace(
        &self,
        parent: &CancellationToken,
        cluster: Cluster,
        aware: &dyn Aware,
    ) -> Result<AddOutcome, Error> {
        let name = cluster.name().clone();
        let existing = {
            let state = lock(&self.inner.state);
            self.present(&state, &name).map(|(cluster, _)| cluster)
        };
        let outcome = match existing {
            None => AddOutcome::Added,
            Some(old) => {
                let same = old.same_instance(&cluster)
                    || matches!((old.connection_hash(), cluster.connection_hash()), (Some(a), Some(b)) if a == b);
                if same {
                    return Ok(AddOutcome::Unchanged);
                }
                tracing::info!(cluster = %name, "connection changed, replacing cluster");
                self.remove(&name);
                AddOutcome::Replaced
            }
        };
        self.add(parent, cluster, aware).await?;
        Ok(outcome)
    }

    /// Removes the cluster: cancels its token (its caches stop, the manager disengages it).
    /// Returns false if no cluster of that name is present.
    ///
    /// ```no_run
    /// # fn f(clusters: mcr_core::Clusters) {
    /// let removed = clusters.remove(&"member-1".into());
    /// # }
    /// ```
    pub fn remove(&self, name: &ClusterName) -> bool {
        let token = {
            let mut state = lock(&self.inner.state);
            match state.pending.remove(name) {
                Some(p) => Some(p.token),
                None => self.inner.active.take(name),
            }
        };
        match token {
            Some(token) => {
                token.cancel();
                tracing::info!(cluster = %name, "cluster removed");
                true
            }
            None => false,
        }
    }
}
