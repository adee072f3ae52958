//! Bringing members up and down: [`Engagements::add`], [`Engagements::add_or_replace`] and
//! [`Engagements::remove`]; recording an engagement and telling the subscribers. A member whose
//! token is cancelled is forgotten.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{AddOutcome, Engagements, Instance, State, Table};
use crate::{Cluster, ClusterName, Error, ErrorChain, FieldIndex};

impl Engagements {
    /// Adds and engages `cluster` under [`cluster.name()`](Cluster::name) (with this handle's
    /// prefix).
    ///
    /// Refuses a name already present ([`Error::AlreadyEngaged`]) and the names no member may
    /// have ([`Error::InvalidName`]: empty, or the host's). A cluster another replica owns is
    /// parked (see [`coordinator`](crate::coordinator)). Then, in three phases:
    ///
    /// 1. **open the informers**: starts the cache with a child token of `parent`, engages it
    ///    with every subscriber (an error there becomes [`Error::Engage`]; the manager's
    ///    controllers open their informers as they engage), and applies every registered field
    ///    index;
    /// 2. **wait for sync** of every informer opened ([`Error::SyncTimeout`] after the
    ///    handle's [sync timeout](Engagements::with_sync_timeout));
    /// 3. **activate**: [`get`](Engagements::get) and [`names`](Engagements::names) show the
    ///    member.
    ///
    /// On any failure the child token is cancelled (which disengages the member wherever it
    /// was engaged) and the member forgotten.
    ///
    /// ```no_run
    /// # async fn f(c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// let engagements = mcr_core::Engagements::new();
    /// let token = tokio_util::sync::CancellationToken::new();
    /// engagements.add(&token, c).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, parent: &CancellationToken, cluster: Cluster) -> Result<(), Error> {
        self.bring_in(parent, cluster, None).await
    }

    /// [`add`](Engagements::add), or with `replacing` (the active instance of the same name),
    /// the replacement that keeps `replacing` serving until `cluster` has synced.
    async fn bring_in(
        &self,
        parent: &CancellationToken,
        cluster: Cluster,
        replacing: Option<Cluster>,
    ) -> Result<(), Error> {
        let local = cluster.name().clone();
        if let Some(reason) = local.member_name_error() {
            return Err(Error::InvalidName {
                cluster: local,
                reason,
            });
        }
        let name = self.full(&local);
        let token = parent.child_token();
        let (indexes, subscribers) = {
            let mut state = self.table.state.lock();
            if replacing.is_none() && live(&state, &name).is_some() {
                return Err(Error::AlreadyEngaged(local));
            }
            // A replacement supersedes whatever else was still coming up under the name.
            let starting = self.instance(&mut state, &cluster, &token);
            if let Some(superseded) = state.starting.insert(name.clone(), starting) {
                superseded.token.cancel();
            }
            // Ownership is checked with the member starting, so a release that follows a
            // change of ownership finds it.
            if let Some(outcome) = self.gate(&mut state, parent, &name, &cluster) {
                return outcome;
            }
            (state.indexes.clone(), state.subscribers.clone())
        };
        // Dropped before the outcome is known (the provider's run ended mid-sync): nothing of
        // this attempt stays behind, so a later run brings the member up again.
        let guard = StartingGuard {
            engagements: self,
            name: &name,
            cluster: &cluster,
            token: &token,
        };
        let span = tracing::info_span!("add_cluster", cluster = %name, id = %cluster.id());
        let up = Up {
            name: &name,
            token: &token,
            cluster: &cluster,
            indexes: &indexes,
            subscribers: &subscribers,
            sync_timeout: self.view.sync_timeout,
        };
        let result = up.run(replacing.as_ref(), self).instrument(span).await;
        guard.disarm();
        let result = result.and_then(|()| self.activate(&name, &token, &cluster));
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
                // Stopped because ownership moved while it came up: a new instance is parked.
                if matches!(err, Error::Stopped(_))
                    && self.table.state.lock().parked.contains_key(&name)
                {
                    return Ok(());
                }
                match &replacing {
                    // Another replica came to own it while it came up: no failure (the
                    // refusing handle's caller brings it in again once this replica owns it).
                    _ if matches!(err, Error::NotOwned { .. }) => {}
                    Some(_) => tracing::warn!(cluster = %name, error = %ErrorChain(&err),
                        "new instance could not be engaged; the running one keeps serving"),
                    None => tracing::warn!(cluster = %name, error = %ErrorChain(&err),
                        "cluster could not be engaged"),
                }
                Err(err)
            }
        }
    }

    /// A new instance record for this handle.
    fn instance(
        &self,
        state: &mut State,
        cluster: &Cluster,
        token: &CancellationToken,
    ) -> Instance {
        state.next_generation += 1;
        Instance {
            cluster: cluster.clone(),
            token: token.clone(),
            generation: state.next_generation,
            origin: self.origin(),
        }
    }

    /// Phase 3, activation: from starting to active, under the state lock so a concurrent
    /// `remove` finds the member in one place or the other. Returns the token of the instance
    /// it replaced, for the caller to cancel.
    fn activate(
        &self,
        name: &ClusterName,
        token: &CancellationToken,
        cluster: &Cluster,
    ) -> Result<Option<CancellationToken>, Error> {
        let mut state = self.table.state.lock();
        match state.starting.get(name) {
            Some(i) if i.cluster.same_instance(cluster) && !token.is_cancelled() => {
                // Ownership may have moved while it came up: asked again under the lock, so an
                // instance is either found by a release or never active.
                self.refuse_at_activation(&mut state, name, cluster)?;
                let Some(instance) = state.starting.remove(name) else {
                    return Err(Error::Stopped(name.clone()));
                };
                let generation = instance.generation;
                let replaced = state
                    .active
                    .insert(name.clone(), instance)
                    .map(|old| old.token);
                drop(state);
                self.table.activated.notify_waiters();
                self.forget_when_cancelled(name, token, generation);
                Ok(replaced.filter(|old| !old.is_cancelled()))
            }
            // Removed, or superseded, while it was being brought up.
            _ => Err(Error::Stopped(name.clone())),
        }
    }

    /// Records an engagement made by hand as active (see [`Aware`](crate::Aware) for
    /// `Engagements`): `Ok(false)` when this instance is active already. A cluster another
    /// replica owns is refused with [`Error::NotOwned`].
    pub(super) fn record(
        &self,
        token: &CancellationToken,
        name: &ClusterName,
        cluster: &Cluster,
        origin: Option<Arc<str>>,
    ) -> Result<bool, Error> {
        if let Some(reason) = name.member_name_error() {
            return Err(Error::InvalidName {
                cluster: name.clone(),
                reason,
            });
        }
        let mut state = self.table.state.lock();
        let same = state
            .active
            .get(name)
            .is_some_and(|i| i.cluster.same_instance(cluster) && !i.token.is_cancelled());
        if same {
            return Ok(false);
        }
        // Recorded before ownership is asked, so a release that follows a change finds it.
        let mut instance = self.instance(&mut state, cluster, token);
        instance.origin = origin;
        let generation = instance.generation;
        let replaced = state.active.insert(name.clone(), instance);
        if let Err(refused) = self.refuse_elsewhere(name, name) {
            match replaced {
                Some(old) => state.active.insert(name.clone(), old),
                None => state.active.remove(name),
            };
            return Err(refused);
        }
        drop(state);
        self.table.activated.notify_waiters();
        self.forget_when_cancelled(name, token, generation);
        Ok(true)
    }

    /// Removes the active instance `generation` of `name` when `token` fires (a later instance
    /// of the same name stays).
    fn forget_when_cancelled(
        &self,
        name: &ClusterName,
        token: &CancellationToken,
        generation: u64,
    ) {
        let weak = Arc::downgrade(&self.table);
        let (name, token) = (name.clone(), token.clone());
        let forget = async move {
            token.cancelled().await;
            if let Some(table) = weak.upgrade() {
                remove_generation(&table, &name, generation);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(forget);
            }
            // Outside a runtime nothing can wait for the token: reads skip cancelled entries,
            // and the next instance of the name replaces this one.
            Err(_) => drop(forget),
        }
    }

    /// Engages `cluster` with every subscriber; a refusal is logged, not fatal.
    pub(super) fn notify(&self, token: &CancellationToken, name: &ClusterName, cluster: &Cluster) {
        let subscribers = self.table.state.lock().subscribers.clone();
        for subscriber in subscribers {
            if let Err(err) = subscriber.engage(token.clone(), name.clone(), cluster.clone()) {
                tracing::warn!(cluster = %name, error = %ErrorChain(&err),
                    "a subscriber refused the cluster");
            }
        }
    }

    /// Forgets a member that failed to come up (if it is still the starting one).
    fn forget(&self, name: &ClusterName, cluster: &Cluster) {
        let mut state = self.table.state.lock();
        if state
            .starting
            .get(name)
            .is_some_and(|i| i.cluster.same_instance(cluster))
        {
            state.starting.remove(name);
        }
    }

    /// Adds `cluster`, replacing a running member of the same name unless both have the same
    /// [connection hash](Cluster::connection_hash) (then [`AddOutcome::Unchanged`]).
    ///
    /// A replacement keeps the running instance serving until the new one is ready: the new
    /// instance's cache opens every informer the running one has (and the registered indexes),
    /// and only once they have all listed is it engaged (a subscriber engaged with the new
    /// instance replaces the old one), activated, and the old instance's token cancelled. So
    /// the name is never missing from [`get`](Engagements::get), changes made meanwhile are
    /// seen by the old instance's watches until the new ones have listed them, and a new
    /// instance that cannot sync (new credentials that do not work) costs nothing: the error
    /// is returned and the running instance stays.
    ///
    /// ```no_run
    /// # async fn f(e: mcr_core::Engagements, c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// use mcr_core::AddOutcome;
    /// let token = tokio_util::sync::CancellationToken::new();
    /// match e.add_or_replace(&token, c).await? {
    ///     AddOutcome::Unchanged => {}
    ///     AddOutcome::Added | AddOutcome::Replaced => println!("connected"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn add_or_replace(
        &self,
        parent: &CancellationToken,
        cluster: Cluster,
    ) -> Result<AddOutcome, Error> {
        let local = cluster.name().clone();
        let name = self.full(&local);
        let (existing, serving) = {
            let state = self.table.state.lock();
            let serving = state
                .active
                .get(&name)
                .filter(|i| !i.token.is_cancelled())
                .map(|i| i.cluster.clone());
            (live(&state, &name).map(|(c, _)| c), serving)
        };
        let Some(old) = existing else {
            self.add(parent, cluster).await?;
            return Ok(AddOutcome::Added);
        };
        let same = old.same_instance(&cluster)
            || matches!((old.connection_hash(), cluster.connection_hash()), (Some(a), Some(b)) if a == b);
        if same {
            return Ok(AddOutcome::Unchanged);
        }
        tracing::info!(cluster = %name, "connection changed, replacing cluster");
        match serving {
            Some(serving) => self.bring_in(parent, cluster, Some(serving)).await?,
            None => {
                self.remove(&local);
                self.add(parent, cluster).await?;
            }
        }
        Ok(AddOutcome::Replaced)
    }

    /// Removes the member: cancels its token (its caches stop, subscribers disengage it), a
    /// replacement coming up next to it included, and forgets it if parked. Returns false if
    /// this handle has no member of that name.
    ///
    /// ```no_run
    /// # fn f(e: mcr_core::Engagements) {
    /// let removed = e.remove(&"member-1".into());
    /// # }
    /// ```
    pub fn remove(&self, name: &ClusterName) -> bool {
        let name = self.full(name);
        let (tokens, parked) = {
            let mut state = self.table.state.lock();
            let parked = self.unpark(&mut state, &name);
            let state = &mut *state;
            let mut tokens = Vec::new();
            for map in [&mut state.starting, &mut state.active] {
                if map.get(&name).is_some_and(|i| self.owns(i.origin.as_ref())) {
                    tokens.extend(map.remove(&name).map(|i| i.token));
                }
            }
            (tokens, parked)
        };
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

/// The member of that name whose token has not fired, starting or active, with its token.
/// A starting entry whose token fired (its run ended while it came up) is on its way out and
/// does not count.
fn live(state: &State, name: &ClusterName) -> Option<(Cluster, CancellationToken)> {
    state
        .starting
        .get(name)
        .filter(|i| !i.token.is_cancelled())
        .or_else(|| state.active.get(name).filter(|i| !i.token.is_cancelled()))
        .map(|i| (i.cluster.clone(), i.token.clone()))
}

fn remove_generation(table: &Table, name: &ClusterName, generation: u64) {
    let mut state = table.state.lock();
    if state
        .active
        .get(name)
        .is_some_and(|i| i.generation == generation)
    {
        state.active.remove(name);
    }
}

/// One bring-up: phases 1 and 2 of [`Engagements::add`].
struct Up<'a> {
    name: &'a ClusterName,
    token: &'a CancellationToken,
    cluster: &'a Cluster,
    indexes: &'a [FieldIndex],
    subscribers: &'a [Arc<dyn crate::Aware>],
    sync_timeout: std::time::Duration,
}

impl Up<'_> {
    async fn run(&self, replacing: Option<&Cluster>, table: &Engagements) -> Result<(), Error> {
        // Phase 1, open the informers: start the cache, engage (the manager's controllers open
        // their informers as they engage), apply the indexes. Phase 2: wait until every
        // informer opened so far has listed. Phase 3, activation, is the caller's.
        // One of the table's turns to sync, waited for before the sync timeout starts.
        let _turn = tokio::select! {
            biased;
            () = self.token.cancelled() => return Err(Error::Stopped(self.name.clone())),
            turn = table.table.syncing.acquire() => {
                turn.map_err(|_closed| Error::Stopped(self.name.clone()))?
            }
        };
        let cache = self.cluster.cache();
        cache.start(self.token.clone());
        let Some(old) = replacing else {
            self.engage()?;
            // After the engagement, so the indexes' informers carry the engaged name.
            self.index()?;
            return self.synced().await;
        };
        // A replacement lists everything the running instance watches before anyone is told
        // about it; until then the running instance keeps serving, so the name never goes
        // missing and no change goes unseen.
        cache.open_informers_of(old.cache());
        self.index()?;
        self.synced().await?;
        self.engage()?;
        // Informers the engagement opened beyond the running instance's (usually none).
        if let Err(err) = self.synced().await {
            // The engagement replaced the running instance wherever it was engaged: hand the
            // name back to it.
            if let Some(old_token) = table
                .table
                .state
                .lock()
                .active
                .get(self.name)
                .map(|i| i.token.clone())
            {
                for s in self.subscribers {
                    let _ = s.engage(old_token.clone(), self.name.clone(), old.clone());
                }
            }
            return Err(err);
        }
        Ok(())
    }

    fn index(&self) -> Result<(), Error> {
        for index in self.indexes {
            // The cache's errors name the cluster already.
            self.cluster.cache().index_field(index)?;
        }
        Ok(())
    }

    /// Tells every subscriber; an error there becomes [`Error::Engage`].
    fn engage(&self) -> Result<(), Error> {
        // Known by the engaged name in the cache's logs and errors, and its informers'.
        self.cluster.cache().engaged_as(self.name);
        for subscriber in self.subscribers {
            subscriber
                .engage(self.token.clone(), self.name.clone(), self.cluster.clone())
                .map_err(|err| Error::Engage {
                    cluster: self.name.clone(),
                    source: Box::new(err),
                })?;
        }
        Ok(())
    }

    /// Waits, bounded by the sync timeout, until every informer opened so far has listed.
    async fn synced(&self) -> Result<(), Error> {
        tokio::select! {
            biased;
            () = self.token.cancelled() => Err(Error::Stopped(self.name.clone())),
            synced = self.cluster.cache().wait_for_sync(self.sync_timeout) => synced,
        }
    }
}

/// Undoes a bring-up whose future was dropped before it ended: cancels its token (its caches
/// stop, it is disengaged wherever it was engaged) and forgets the starting entry.
struct StartingGuard<'a> {
    engagements: &'a Engagements,
    name: &'a ClusterName,
    cluster: &'a Cluster,
    token: &'a CancellationToken,
}

impl StartingGuard<'_> {
    /// The bring-up ended: its outcome is handled by the caller.
    fn disarm(self) {
        // Only references inside: forgetting it leaks nothing.
        std::mem::forget(self);
    }
}

impl Drop for StartingGuard<'_> {
    fn drop(&mut self) {
        self.token.cancel();
        self.engagements.forget(self.name, self.cluster);
    }
}
