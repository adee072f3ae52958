//! Bringing members up and down: [`Clusters::add`], [`Clusters::add_or_replace`] and
//! [`Clusters::remove`]. A member whose token is cancelled is forgotten by the registry that
//! keeps the active ones.

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{AddOutcome, Clusters, Pending, apply_index};
use crate::{Aware, Cluster, ClusterName, Error, FieldIndex};

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
        self.bring_in(parent, cluster, None, aware).await
    }

    /// [`add`](Clusters::add), or with `replacing` (the running instance of the same name),
    /// the replacement that keeps `replacing` serving until `cluster` has synced.
    async fn bring_in(
        &self,
        parent: &CancellationToken,
        cluster: Cluster,
        replacing: Option<Cluster>,
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
            let mut state = self.inner.state.lock();
            if replacing.is_none() && self.live(&state, &name).is_some() {
                return Err(Error::AlreadyEngaged(name));
            }
            // A replacement supersedes whatever else was still coming up under the name.
            let pending = Pending {
                cluster: cluster.clone(),
                token: token.clone(),
            };
            if let Some(superseded) = state.pending.insert(name.clone(), pending) {
                superseded.token.cancel();
            }
            // Ownership is checked with the cluster pending, so a release finds it.
            if let Some(outcome) = self.gate(&mut state, parent, &cluster, aware) {
                return outcome;
            }
            state.indexes.clone()
        };
        // Dropped before the outcome is known (the provider's run ended mid-sync): nothing of
        // this attempt stays behind, so a later run brings the member up again.
        let guard = PendingGuard {
            clusters: self,
            cluster: &cluster,
            token: &token,
        };
        let span = tracing::info_span!("add_cluster", cluster = %name, id = %cluster.id());
        let result = self
            .bring_up(&token, &cluster, replacing.as_ref(), &indexes, aware)
            .instrument(span)
            .await;
        guard.disarm();
        let result = result.and_then(|()| self.activate(&token, &cluster));
        match result {
            Ok(None) => {
                tracing::info!(cluster = %name, "cluster engaged");
                Ok(())
            }
            Ok(Some(old)) => {
                old.cancel();
                tracing::info!(cluster = %name, "cluster replaced by a new instance");
                Ok(())
            }
            Err(err) => {
                token.cancel();
                self.forget(&name, &cluster);
                if self.refused(parent, &cluster, &err, aware) {
                    return Ok(());
                }
                match &replacing {
                    Some(_) => tracing::warn!(cluster = %name, error = %err,
                        "new instance could not be engaged; the running one keeps serving"),
                    None => tracing::warn!(cluster = %name, error = %err,
                        "cluster could not be engaged"),
                }
                Err(err)
            }
        }
    }

    /// Phase 3, activation: from pending to the registry, under the state lock so a concurrent
    /// `remove` finds the cluster in one place or the other. Returns the token of the instance
    /// it replaced, for the caller to cancel.
    fn activate(
        &self,
        token: &CancellationToken,
        cluster: &Cluster,
    ) -> Result<Option<CancellationToken>, Error> {
        let name = cluster.name();
        let mut state = self.inner.state.lock();
        match state.pending.get(name) {
            Some(p) if p.cluster.same_instance(cluster) => {
                state.pending.remove(name);
                let replaced = self.inner.active.token(name);
                self.inner
                    .active
                    .record(token.clone(), name.clone(), cluster.clone())?;
                Ok(replaced)
            }
            // Removed, or superseded, while it was being brought up.
            _ => Err(Error::Stopped(name.clone())),
        }
    }

    async fn bring_up(
        &self,
        token: &CancellationToken,
        cluster: &Cluster,
        replacing: Option<&Cluster>,
        indexes: &[FieldIndex],
        aware: &dyn Aware,
    ) -> Result<(), Error> {
        // Phase 1, open the informers: start the cache, engage (the manager's controllers open
        // their informers as they engage), apply the indexes. Phase 2: wait until every
        // informer opened so far has listed. Phase 3, activation, is the caller's.
        cluster.cache().start(token.clone());
        let Some(old) = replacing else {
            engage(token, cluster, aware)?;
            // After the engagement, so the indexes' informers carry the engaged name.
            for index in indexes {
                apply_index(cluster, index)?;
            }
            return self.synced(token, cluster).await;
        };
        // A replacement lists everything the running instance watches before anyone is told
        // about it; until then the running instance keeps serving, so the name never goes
        // missing and no change goes unseen.
        cluster.cache().open_informers_of(old.cache());
        for index in indexes {
            apply_index(cluster, index)?;
        }
        self.synced(token, cluster).await?;
        engage(token, cluster, aware)?;
        // Informers the engagement opened beyond the running instance's (usually none).
        if let Err(err) = self.synced(token, cluster).await {
            // The engagement replaced the running instance wherever it was engaged: hand the
            // name back to it.
            if let Some(old_token) = self.inner.active.token(old.name()) {
                let _ = aware.engage(old_token, old.name().clone(), old.clone());
            }
            return Err(err);
        }
        Ok(())
    }

    /// Waits, bounded by the sync timeout, until every informer opened so far has listed.
    async fn synced(&self, token: &CancellationToken, cluster: &Cluster) -> Result<(), Error> {
        tokio::select! {
            biased;
            () = token.cancelled() => Err(Error::Stopped(cluster.name().clone())),
            synced = cluster.cache().wait_for_sync(self.inner.opts.sync_timeout) => synced,
        }
    }

    /// Forgets a cluster that failed to come up (if it is still the pending one).
    fn forget(&self, name: &ClusterName, cluster: &Cluster) {
        let mut state = self.inner.state.lock();
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
    /// A replacement keeps the running instance serving until the new one is ready: the new
    /// instance's cache opens every informer the running one has (and the registered indexes),
    /// and only once they have all listed is it engaged ([`Aware::engage`] with the new
    /// instance replaces the old one wherever it was engaged), activated, and the old
    /// instance's token cancelled. So the name is never missing from [`get`](Clusters::get),
    /// changes made meanwhile are seen by the old instance's watches until the new ones have
    /// listed them, and a new instance that cannot sync (new credentials that do not work)
    /// costs nothing: the error is returned and the running instance stays.
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
            let state = self.inner.state.lock();
            self.live(&state, &name).map(|(cluster, _)| cluster)
        };
        let Some(old) = existing else {
            self.add(parent, cluster, aware).await?;
            return Ok(AddOutcome::Added);
        };
        let same = old.same_instance(&cluster)
            || matches!((old.connection_hash(), cluster.connection_hash()), (Some(a), Some(b)) if a == b);
        if same {
            return Ok(AddOutcome::Unchanged);
        }
        tracing::info!(cluster = %name, "connection changed, replacing cluster");
        // The instance that serves now: the active one (a pending one is superseded).
        let serving = self.inner.active.get(&name).ok();
        match serving {
            Some(serving) => self.bring_in(parent, cluster, Some(serving), aware).await?,
            None => {
                self.remove(&name);
                self.add(parent, cluster, aware).await?;
            }
        }
        Ok(AddOutcome::Replaced)
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
        // A replacement may be coming up next to the running instance: both go.
        let (pending, active, parked) = {
            let mut state = self.inner.state.lock();
            let parked = self.unpark(&mut state, name);
            (
                state.pending.remove(name),
                self.inner.active.take(name),
                parked,
            )
        };
        let tokens: Vec<CancellationToken> =
            pending.map(|p| p.token).into_iter().chain(active).collect();
        for token in &tokens {
            token.cancel();
        }
        let removed = !tokens.is_empty() || parked;
        if removed {
            tracing::info!(cluster = %name, "cluster removed");
        }
        removed
    }
}

/// Engages `cluster` with `aware` under its token; an error there becomes [`Error::Engage`].
fn engage(token: &CancellationToken, cluster: &Cluster, aware: &dyn Aware) -> Result<(), Error> {
    let name = cluster.name();
    aware
        .engage(token.clone(), name.clone(), cluster.clone())
        .map_err(|err| Error::Engage {
            cluster: name.clone(),
            source: Box::new(err),
        })
}

/// Undoes a bring-up whose future was dropped before it ended: cancels its token (its caches
/// stop, it is disengaged wherever it was engaged) and forgets the pending entry.
struct PendingGuard<'a> {
    clusters: &'a Clusters,
    cluster: &'a Cluster,
    token: &'a CancellationToken,
}

impl PendingGuard<'_> {
    /// The bring-up ended: its outcome is handled by the caller.
    fn disarm(self) {
        // Only references inside: forgetting it leaks nothing.
        std::mem::forget(self);
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.token.cancel();
        self.clusters.forget(self.cluster.name(), self.cluster);
    }
}
