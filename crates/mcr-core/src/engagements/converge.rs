//! The converge step and what feeds it: [`Engagements::want`], [`Engagements::add`],
//! [`Engagements::remove`], engagements by hand, the outcome of an attempt, and the driver
//! (retries that are due, changes of ownership, the periodic resync).
//!
//! Every change ends in [`converge`] over the entries it touched, under the table's lock. It
//! reads what is wanted, who owns the name and what runs, and acts: a member another replica
//! owns is stopped (its attempt cancelled, its instance's token cancelled and handed to
//! [`Engagements::release_unowned`]); a member owned here whose running instance is not the
//! wanted one gets an attempt, unless one is under way for it or its last failure's backoff
//! has not passed. Nothing else decides, so a removal, a change of ownership or a new source
//! that comes in any phase, a transition included, is never lost.

use std::sync::{Arc, Weak};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, warn};

use super::{Attempt, Engagements, Entry, Failure, Here, Running, Source, State, Table};
use crate::backoff::Backoff;
use crate::coordinator::Ownership;
use crate::{Aware, Cluster, ClusterName, Error, ErrorChain};

impl Engagements {
    /// Wants `source` under `name` (with this handle's prefix) for the run of `parent`: the
    /// table brings it up as soon as this replica owns the name, and keeps it up (retried with
    /// the handle's backoff after a failure) until [`remove`](Engagements::remove)d or
    /// `parent` is cancelled. Never blocks and never fails for the member's sake: where it
    /// stands is [`member_state`](Engagements::member_state) and
    /// [`member_states`](Engagements::member_states).
    ///
    /// Wanting the source the member runs (the same instance or connection hash, the same
    /// [`Connect::key`](super::Connect::key)) changes nothing, except that a member whose last
    /// attempt failed for good (a policy denial, a source that said so) is tried once more;
    /// another one brings up a new
    /// instance that replaces the running one once it has synced, or renews the running one's
    /// credentials in place when only they changed (a [`Source::Kubeconfig`] with the same
    /// server, CA and settings).
    ///
    /// Refuses the names no member may have ([`Error::InvalidName`]: empty, or the host's), and
    /// a name engaged by hand ([`Error::AlreadyEngaged`]).
    ///
    /// ```no_run
    /// # fn f(e: mcr_core::Engagements, client: kube::Client) -> Result<(), mcr_core::Error> {
    /// use mcr_core::{Cluster, Source};
    /// let run = tokio_util::sync::CancellationToken::new();
    /// e.want(&run, &"member-1".into(), Source::Cluster(Cluster::new("member-1", client)))?;
    /// # Ok(()) }
    /// ```
    pub fn want(
        &self,
        parent: &CancellationToken,
        name: &ClusterName,
        source: Source,
    ) -> Result<(), Error> {
        if let Some(reason) = name.member_name_error() {
            return Err(Error::InvalidName {
                cluster: name.clone(),
                reason,
            });
        }
        let full = self.full(name);
        let key = source.key();
        let mut state = self.table.state.lock();
        match state.entries.get_mut(&full) {
            Some(e) if e.live() && e.by_hand => return Err(Error::AlreadyEngaged(name.clone())),
            Some(e) if e.live() && self.owns(&e.view) => {
                if e.key != key {
                    e.source = source;
                    e.key = key;
                } else {
                    // The same key: the newest settings (a policy) are kept, but a cluster
                    // instance only if none is: the entry's is one never engaged.
                    if !matches!(source, Source::Cluster(_)) {
                        e.source = source;
                    }
                    if let Some(f) = e.here.as_mut().and_then(|h| h.failure.as_mut())
                        && f.retry_at.is_none()
                    {
                        // Wanted again after a failure that waits for a new source: what the
                        // source reads (a file, a Secret) or its policy may have changed.
                        f.retry_at = Some(Instant::now());
                    }
                }
                e.view = self.view.clone();
            }
            other => {
                if let Some(old) = other {
                    // A run that ended, or another handle's: its instance goes.
                    stop(old);
                }
                state.entries.insert(
                    full.clone(),
                    Box::new(Entry {
                        view: self.view.clone(),
                        parent: parent.clone(),
                        source,
                        key,
                        elsewhere: None,
                        here: None,
                        by_hand: false,
                    }),
                );
            }
        }
        converge(&self.table, &mut state, &full, Instant::now());
        drive(&self.table, &mut state);
        Ok(())
    }

    /// Wants `cluster` under [`cluster.name()`](Cluster::name) (with this handle's prefix) and
    /// waits for the outcome of its first attempt: `Ok` once it is active (or parked, when
    /// another replica owns it); on a failure the member is removed again and the error
    /// returned (a member [wanted](Engagements::want) instead would be retried).
    ///
    /// Refuses a name already present ([`Error::AlreadyEngaged`]) and the names no member may
    /// have ([`Error::InvalidName`]: empty, or the host's).
    ///
    /// ```no_run
    /// # async fn f(c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// let engagements = mcr_core::Engagements::new();
    /// let token = tokio_util::sync::CancellationToken::new();
    /// engagements.add(&token, c).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, parent: &CancellationToken, cluster: Cluster) -> Result<(), Error> {
        let local = cluster.name().clone();
        let full = self.full(&local);
        let (tx, rx) = tokio::sync::oneshot::channel();
        {
            let state = self.table.state.lock();
            if state
                .entries
                .get(&full)
                .is_some_and(|e| e.live() && (e.serving().is_some() || e.attempt().is_some()))
            {
                return Err(Error::AlreadyEngaged(local));
            }
        }
        self.want(parent, &local, Source::Cluster(cluster))?;
        {
            let mut state = self.table.state.lock();
            let Some(e) = state.entries.get_mut(&full) else {
                return Err(Error::Stopped(local));
            };
            if e.serving().is_some() || e.elsewhere.is_some() {
                return Ok(());
            }
            e.here().waiter = Some(tx);
        }
        // Dropped before the outcome (the caller gave up): nothing of it stays behind.
        let guard = RemoveOnDrop(self, &local);
        let outcome = rx
            .await
            .unwrap_or_else(|_| Err(Error::Stopped(local.clone())));
        std::mem::forget(guard);
        if outcome.is_err() {
            self.remove(&local);
        }
        outcome
    }

    /// Removes the member, in whatever phase: cancels its token (its caches stop, subscribers
    /// disengage it) and any attempt under way, and forgets it. Returns false if this handle
    /// has no member of that name.
    ///
    /// ```no_run
    /// # fn f(e: mcr_core::Engagements) {
    /// let removed = e.remove(&"member-1".into());
    /// # }
    /// ```
    pub fn remove(&self, name: &ClusterName) -> bool {
        let full = self.full(name);
        let removed = {
            let mut state = self.table.state.lock();
            match state.entries.get(&full) {
                Some(e) if self.owns(&e.view) => state.entries.remove(&full),
                _ => None,
            }
        };
        let Some(mut entry) = removed else {
            return false;
        };
        let was_live = entry.live();
        stop(&mut entry);
        if let Some(waiter) = entry.here.as_mut().and_then(|h| h.waiter.take()) {
            let _ = waiter.send(Err(Error::Stopped(name.clone())));
        }
        self.table.changed.notify_waiters();
        if was_live {
            info!(cluster = %full, "cluster removed");
        }
        was_live
    }

    /// Records an engagement made by hand as active (see [`Aware`](crate::Aware) for
    /// `Engagements`): false when this instance is active already.
    pub(super) fn record(
        &self,
        token: &CancellationToken,
        full: &ClusterName,
        cluster: &Cluster,
    ) -> bool {
        let mut state = self.table.state.lock();
        if let Some(e) = state.entries.get(full)
            && e.serving()
                .is_some_and(|r| r.cluster.same_instance(cluster))
        {
            return false;
        }
        let entry = Entry {
            view: self.view.clone(),
            parent: token.clone(),
            source: Source::Cluster(cluster.clone()),
            key: Source::Cluster(cluster.clone()).key(),
            elsewhere: None,
            here: Some(Box::new(Here {
                active: Some(Running {
                    cluster: cluster.clone(),
                    token: token.clone(),
                    key: Source::Cluster(cluster.clone()).key(),
                }),
                ..Here::default()
            })),
            by_hand: true,
        };
        if let Some(mut old) = state.entries.insert(full.clone(), Box::new(entry)) {
            // Replaced by hand: its engager owns the old token; an instance the table brought
            // up goes.
            if !old.by_hand {
                stop(&mut old);
            }
        }
        drop(state);
        self.table.changed.notify_waiters();
        true
    }

    /// Engages `cluster` with every subscriber; a refusal is logged, not fatal.
    pub(super) fn notify(&self, token: &CancellationToken, name: &ClusterName, cluster: &Cluster) {
        let subscribers = self.table.state.lock().subscribers.clone();
        for subscriber in subscribers {
            if let Err(err) = subscriber.engage(token.clone(), name.clone(), cluster.clone()) {
                warn!(cluster = %name, error = %ErrorChain(&err),
                    "a subscriber refused the cluster");
            }
        }
    }
}

/// Removes the member of an [`Engagements::add`] whose caller gave up waiting.
struct RemoveOnDrop<'a>(&'a Engagements, &'a ClusterName);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        self.0.remove(self.1);
    }
}

/// Stops what runs of an entry: its attempt and its instance (whose token an engager by hand
/// owns: left alone).
fn stop(entry: &mut Entry) {
    let by_hand = entry.by_hand;
    let Some(here) = entry.here.as_mut() else {
        return;
    };
    if let Some(attempt) = here.attempt.take() {
        attempt.token.cancel();
    }
    if let Some(running) = here.active.take()
        && !by_hand
    {
        running.token.cancel();
    }
}

/// The converge step of one entry (see the [module documentation](self)).
pub(super) fn converge(table: &Arc<Table>, state: &mut State, name: &ClusterName, now: Instant) {
    let owner = match table.coordinator.get() {
        Some(c) => c.owner(name),
        None => Ownership::Owned,
    };
    let State {
        entries,
        stopped,
        next_id,
        ..
    } = state;
    let Some(e) = entries.get_mut(name) else {
        return;
    };
    if !e.live() || e.by_hand {
        if !e.live() {
            stop(e);
            entries.remove(name);
        }
        return;
    }
    if let Ownership::Elsewhere { owner } = owner {
        let mut moved = false;
        if let Some(here) = e.here.take() {
            let Here {
                active,
                attempt,
                waiter,
                ..
            } = *here;
            if let Some(attempt) = attempt {
                attempt.token.cancel();
                stopped.extend(attempt.started.map(|c| (name.clone(), c.released())));
                moved = true;
            }
            if let Some(running) = active {
                running.token.cancel();
                stopped.push((name.clone(), running.cluster.released()));
                moved = true;
            }
            if let Some(waiter) = waiter {
                let _ = waiter.send(Ok(()));
            }
        }
        if moved {
            info!(cluster = %name, owner = owner.as_deref().unwrap_or("unknown"),
                "ownership moved to another replica: cluster stopped");
        } else if e.elsewhere.is_none() {
            info!(cluster = %name, owner = owner.as_deref().unwrap_or("unknown"),
                "cluster owned by another replica: not engaged here");
        }
        e.elsewhere = Some(owner);
        table.changed.notify_waiters();
        return;
    }
    e.elsewhere = None;
    let key = e.key;
    let serving = e.serving().map(|r| (r.key, r.cluster.clone()));
    let here = e.here();
    if let Some(attempt) = &here.attempt {
        if attempt.key == key {
            return;
        }
        // Superseded by a newer source.
        if let Some(attempt) = here.attempt.take() {
            attempt.token.cancel();
        }
    }
    if serving.as_ref().is_some_and(|(k, _)| *k == key) {
        here.failure = None;
        e.tidy();
        return;
    }
    if let Some(f) = &here.failure
        && f.key == key
        && f.retry_at.is_none_or(|at| at > now)
    {
        return;
    }
    *next_id += 1;
    let token = e.parent.child_token();
    let source = match &mut e.source {
        // The instance wanted is engaged at most once: the entry keeps a fresh one for later.
        Source::Cluster(c) => Source::Cluster(std::mem::replace(c, c.fresh())),
        other => other.clone(),
    };
    e.here().attempt = Some(Box::new(Attempt {
        id: *next_id,
        token: token.clone(),
        key,
        started: None,
        engaged: false,
    }));
    let attempt = super::attempt::Attempt {
        handle: Engagements {
            table: table.clone(),
            view: e.view.clone(),
        },
        name: name.clone(),
        id: *next_id,
        token,
        source,
        running: serving.map(|(_, c)| c),
    };
    let span = tracing::info_span!("member", cluster = %name);
    tokio::spawn(attempt.run().instrument(span));
}

/// Attempt `id` of `name`, if it is still the entry's current one.
fn current<'a>(state: &'a mut State, name: &ClusterName, id: u64) -> Option<&'a mut Attempt> {
    state
        .entries
        .get_mut(name)
        .and_then(|e| e.here.as_mut()?.attempt.as_deref_mut())
        .filter(|a| a.id == id && !a.token.is_cancelled())
}

/// What an attempt ended with.
pub(super) enum Outcome {
    /// A new instance synced: activate it (its subscribers were engaged with `token`).
    Started(Cluster, CancellationToken),
    /// The running instance's credentials were renewed in place.
    Renewed,
}

impl Engagements {
    /// Records that attempt `id` of `name` started `cluster` (its subscribers may hold it
    /// from here on); false when the attempt is no longer current (it stops).
    pub(super) fn started(&self, name: &ClusterName, id: u64, cluster: &Cluster) -> bool {
        let mut state = self.table.state.lock();
        match current(&mut state, name, id) {
            Some(a) => {
                a.started = Some(cluster.clone());
                true
            }
            None => false,
        }
    }

    /// The subscribers attempt `id` of `name` engages its instance with, read under the lock
    /// that [`subscribe`](Engagements::subscribe) adds one under, so that each is engaged once:
    /// by the attempt, or by `subscribe`. `None` when the attempt is no longer current.
    pub(super) fn engaging(&self, name: &ClusterName, id: u64) -> Option<Vec<Arc<dyn Aware>>> {
        let mut state = self.table.state.lock();
        let subscribers = state.subscribers.clone();
        let a = current(&mut state, name, id)?;
        a.engaged = true;
        Some(subscribers)
    }

    /// Takes in the outcome of attempt `id` of `name`, then converges the entry.
    pub(super) fn finish(&self, name: &ClusterName, id: u64, outcome: Result<Outcome, Error>) {
        let table = &self.table;
        let mut state = table.state.lock();
        let current = state
            .entries
            .get(name)
            .and_then(|e| e.attempt())
            .is_some_and(|a| a.id == id);
        if !current {
            // Removed, superseded or stopped meanwhile: whatever it started was cancelled
            // with its token.
            if let Ok(Outcome::Started(_, token)) = outcome {
                token.cancel();
            }
            return;
        }
        // Asked under the lock: an instance is either found by a release or never active.
        let owned = table
            .coordinator
            .get()
            .is_none_or(|c| c.owner(name).is_owned());
        let now = Instant::now();
        let State {
            entries, stopped, ..
        } = &mut *state;
        let Some(e) = entries.get_mut(name) else {
            return;
        };
        let opts = e.view.opts.clone();
        let here = e.here();
        let Some(attempt) = here.attempt.take() else {
            return;
        };
        match outcome {
            Ok(Outcome::Started(cluster, token)) if owned => {
                let replaced = here.active.replace(Running {
                    cluster,
                    token,
                    key: attempt.key,
                });
                here.failure = None;
                match replaced {
                    Some(old) if !old.token.is_cancelled() => {
                        old.token.cancel();
                        info!(cluster = %name, "cluster replaced by a new instance");
                    }
                    _ => info!(cluster = %name, "cluster engaged"),
                }
                if let Some(waiter) = here.waiter.take() {
                    let _ = waiter.send(Ok(()));
                }
            }
            Ok(Outcome::Started(cluster, token)) => {
                // Another replica came to own it while it came up.
                token.cancel();
                stopped.push((name.clone(), cluster.released()));
            }
            Ok(Outcome::Renewed) => {
                if let Some(r) = &mut here.active {
                    r.key = attempt.key;
                }
                here.failure = None;
                info!(cluster = %name, "only the credentials changed: renewed in place");
            }
            // Ownership moved while it came up: no failure, the converge step decides.
            Err(_) if !owned => {}
            Err(err) => {
                let count = here
                    .failure
                    .as_ref()
                    .filter(|f| f.key == attempt.key)
                    .map_or(1, |f| f.count + 1);
                let retry_in = retryable(&err).then(|| {
                    Backoff::new(opts.backoff_initial, opts.backoff_max).delay_after(count)
                });
                let reason = ErrorChain(&err).to_string();
                match (&here.active, retry_in) {
                    (Some(_), _) => warn!(cluster = %name, error = %reason, ?retry_in,
                        "new instance could not be engaged; the running one keeps serving"),
                    (None, _) => warn!(cluster = %name, error = %reason, ?retry_in,
                        "cluster could not be engaged"),
                }
                here.failure = Some(Box::new(Failure {
                    key: attempt.key,
                    reason,
                    retry_at: retry_in.map(|d| now + d),
                    count,
                }));
                if let Some(waiter) = here.waiter.take() {
                    let _ = waiter.send(Err(err));
                }
                table.wake.notify_one();
            }
        }
        converge(table, &mut state, name, now);
        drop(state);
        table.changed.notify_waiters();
    }
}

/// Whether trying again without a new source can help (a policy denial or a name no member
/// may have cannot).
fn retryable(err: &Error) -> bool {
    match err {
        Error::InvalidName { .. } => false,
        Error::Member(err) => err.is_retryable(),
        _ => true,
    }
}

/// Starts the table's driver if it does not run: one task per table that converges the
/// entries whose retry is due, every entry after a change of ownership, and every entry on
/// the periodic resync. It ends when the table is dropped.
pub(super) fn drive(table: &Arc<Table>, state: &mut State) {
    if state.driving {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    state.driving = true;
    runtime.spawn(driver(Arc::downgrade(table)).instrument(tracing::info_span!("engagements")));
}

async fn driver(weak: Weak<Table>) {
    let mut changes = None;
    let mut resync_at = Instant::now();
    loop {
        let Some(table) = weak.upgrade() else { return };
        if changes.is_none() {
            changes = table.coordinator.get().map(|c| c.changes());
            if changes.is_some() {
                // A coordinator set on a table with members: every one is asked now.
                resync_at = Instant::now();
            }
        }
        let now = Instant::now();
        let resync = *table.resync.lock();
        let all = now >= resync_at;
        if all {
            resync_at = now + resync;
        }
        let next = {
            let mut state = table.state.lock();
            let names: Vec<ClusterName> = state
                .entries
                .iter()
                .filter(|(_, e)| all || due(e, now))
                .map(|(n, _)| n.clone())
                .collect();
            for name in &names {
                converge(&table, &mut state, name, now);
            }
            state.stopped.retain(|(_, r)| !r.is_released());
            // Retries still to come: one that was due and that converge let be (the member
            // is owned elsewhere, say) waits for the next change or resync, not a busy loop.
            state
                .entries
                .values()
                .filter_map(|e| e.failure().and_then(|f| f.retry_at))
                .filter(|at| *at > now)
                .min()
        };
        if all {
            table.changed.notify_waiters();
        }
        let wake = next.map_or(resync_at, |at| at.min(resync_at));
        let wake_up = table.wake.clone();
        drop(table);
        let woken = wake_up.notified();
        let ownership = async {
            match &mut changes {
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            biased;
            () = ownership => resync_at = Instant::now(),
            () = woken => {}
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// Whether an entry's retry is due.
fn due(e: &Entry, now: Instant) -> bool {
    e.failure()
        .and_then(|f| f.retry_at)
        .is_some_and(|at| at <= now)
        || !e.live()
}
