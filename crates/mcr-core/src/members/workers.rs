//! [`Workers`]: one task per member name, the latest desired state wins, failures back off.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use parking_lot::{Mutex, MutexGuard};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, error, info};

use super::{Connection, Ensured, Error, Members};
use crate::backoff::Backoff;
use crate::coordinator::Ownership;
use crate::{BoxFuture, ClusterName, Engagements};

/// What a provider does for one member name: turn its latest desired state (what the provider
/// read from its source of truth) into an engaged cluster, usually through
/// [`Member::ensure`], and record the outcome.
///
/// See the [module documentation](super) for a complete provider.
pub trait Converge: Send + Sync + 'static {
    /// What the provider wants under one name (e.g. the owning Secret and its kubeconfig).
    /// A new value that differs from the last one resets the member's backoff.
    type Desired: Clone + PartialEq + Send + Sync + 'static;
    /// Why an attempt failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// One attempt for [`member.desired()`](Member::desired). `Ok` waits for the next desired
    /// state; an error is retried with the member's backoff when
    /// [`is_retryable`](Converge::is_retryable), else waits for the next desired state. The
    /// future is dropped when the provider stops.
    fn converge<'a>(
        &'a self,
        member: &'a Member<Self::Desired>,
    ) -> BoxFuture<'a, Result<(), Self::Error>>;

    /// Whether retrying `error` without a new desired state can help (policy denials cannot).
    fn is_retryable(&self, error: &Self::Error) -> bool;

    /// Records a failed attempt; `retry_in` is when it is retried (`None`: not before the
    /// desired state changes).
    fn failed(
        &self,
        member: &Member<Self::Desired>,
        error: &Self::Error,
        retry_in: Option<Duration>,
    );

    /// Called once the member was removed because nothing is desired under `name` any more.
    fn removed(&self, name: &ClusterName) {
        let _ = name;
    }
}

struct Shared<R: Converge> {
    converge: R,
    members: Members,
    token: CancellationToken,
    /// The members' handle, asked who owns a member.
    engagements: Engagements,
    tasks: TaskTracker,
    slots: Mutex<Slots<R::Desired>>,
}

/// What the workers know of each name.
struct Slots<D> {
    names: HashMap<ClusterName, Slot<D>>,
    /// Whether the task that starts parked names once this replica owns them runs.
    watching: bool,
}

/// One name's desired state.
enum Slot<D> {
    /// A worker runs for the name and takes its latest desired state from here.
    Running(watch::Sender<Option<D>>),
    /// Another replica owns the name: no task, only what is desired, until the name comes
    /// home (see [`watch_ownership`]). A fleet of names owned elsewhere costs one map entry
    /// each.
    Parked(D),
}

impl<R: Converge> Shared<R> {
    fn slots(&self) -> MutexGuard<'_, Slots<R::Desired>> {
        self.slots.lock()
    }
}

/// The per-name workers of one provider run.
///
/// [`ensure`](Workers::ensure) publishes what should run under a name (the latest value wins;
/// a worker busy with an older one picks it up next), [`remove`](Workers::remove) says nothing
/// should. Each name this replica owns has its own task and its own capped exponential
/// [`Backoff`] ([`MembersOptions::backoff_initial`](super::MembersOptions::backoff_initial) up
/// to `backoff_max`), so a slow, hung or failing member only delays itself. A name another
/// replica owns has no task: the workers keep its desired state and start its worker once
/// this replica owns it.
/// [`shutdown`](Workers::shutdown) stops every worker without waiting for attempts in flight.
/// Every failed attempt is recorded for [`Members::member_statuses`] with its retry delay.
pub struct Workers<R: Converge> {
    shared: Arc<Shared<R>>,
}

impl<R: Converge> Workers<R> {
    /// Workers for `members`, stopped when `token` is cancelled (or by
    /// [`shutdown`](Workers::shutdown)); members are engaged through
    /// [`Members::engagements`].
    pub fn new(members: &Members, token: &CancellationToken, converge: R) -> Self {
        Workers {
            shared: Arc::new(Shared {
                converge,
                members: members.clone(),
                token: token.child_token(),
                engagements: members.engagements(),
                tasks: TaskTracker::new(),
                slots: Mutex::new(Slots {
                    names: HashMap::new(),
                    watching: false,
                }),
            }),
        }
    }

    /// The [`Converge`] the workers run.
    pub fn converger(&self) -> &R {
        &self.shared.converge
    }

    /// `desired` should run under `name`: hands it to the name's worker, starting one if
    /// needed. Never blocks.
    pub fn ensure(&self, name: &ClusterName, desired: R::Desired) {
        let shared = &self.shared;
        let mut slots = shared.slots();
        match slots.names.get_mut(name) {
            Some(Slot::Running(tx)) => {
                tx.send_replace(Some(desired));
            }
            Some(Slot::Parked(parked)) => *parked = desired,
            None => match owner_of(shared, name) {
                Ownership::Elsewhere { owner } => {
                    slots.names.insert(name.clone(), Slot::Parked(desired));
                    shared.members.report_elsewhere(name, owner);
                    watch_parked(shared, &mut slots);
                }
                Ownership::Owned => {
                    let slot = start(shared, name, desired);
                    slots.names.insert(name.clone(), slot);
                }
            },
        }
    }

    /// Nothing should run under `name` any more: its worker removes the member and ends (a
    /// name owned elsewhere, which has no worker, is forgotten at once).
    pub fn remove(&self, name: &ClusterName) {
        let mut slots = self.shared.slots();
        match slots.names.get(name) {
            Some(Slot::Running(tx)) => {
                tx.send_replace(None);
            }
            Some(Slot::Parked(_)) => {
                slots.names.remove(name);
                drop(slots);
                // Nothing runs (its worker stopped it when it parked): the record goes.
                self.shared.members.remove(name);
                self.shared.converge.removed(name);
            }
            None => {}
        }
    }

    /// Stops every worker (attempts in flight are dropped) and waits for them to end; the
    /// members they engaged stay until removed (a [`RunGuard`](super::RunGuard) removes them).
    pub async fn shutdown(self) {
        self.shared.token.cancel();
        self.shared.tasks.close();
        self.shared.tasks.wait().await;
    }
}

/// One member name as its worker sees it during an attempt.
pub struct Member<D> {
    name: ClusterName,
    desired: D,
    latest: watch::Receiver<Option<D>>,
    members: Members,
    token: CancellationToken,
}

impl<D> Member<D> {
    /// The member's name.
    pub fn name(&self) -> &ClusterName {
        &self.name
    }

    /// The desired state this attempt is for.
    pub fn desired(&self) -> &D {
        &self.desired
    }

    /// Whether the latest published desired state satisfies `check` (false when the name is
    /// being removed). A provider checks it under its status lock before recording a status,
    /// so it never overwrites what the newer state's owner recorded.
    pub fn latest_is(&self, check: impl FnOnce(&D) -> bool) -> bool {
        self.latest.borrow().as_ref().is_some_and(check)
    }

    /// Whether [`ensure`](Self::ensure) would have work to do for `connection`: no member of
    /// this name runs with it ([`Members::unchanged`] is `None`). A provider reports the member
    /// as pending then.
    pub fn changes(&self, connection: &Connection) -> bool {
        self.members.unchanged(&self.name, connection).is_none()
    }

    /// [`Members::ensure`] with this provider run's token and manager.
    pub async fn ensure(&self, connection: &Connection) -> Result<Ensured, Error> {
        self.members
            .ensure(&self.token, &self.name, connection)
            .await
    }
}

/// The worker loop of one name: returns once nothing is desired under it any more (after
/// removing the member) or when the workers stop.
async fn run<R: Converge>(
    shared: Arc<Shared<R>>,
    name: ClusterName,
    mut rx: watch::Receiver<Option<R::Desired>>,
) {
    let opts = shared.members.options();
    let mut backoff = Backoff::new(opts.backoff_initial, opts.backoff_max);
    let mut last: Option<R::Desired> = None;
    loop {
        if shared.token.is_cancelled() {
            return;
        }
        let Some(desired) = rx.borrow_and_update().clone() else {
            if shared.members.remove(&name) {
                info!("nothing desired under the name any more: member removed");
            }
            shared.converge.removed(&name);
            let mut slots = shared.slots();
            if rx.borrow().is_none() {
                slots.names.remove(&name);
                return;
            }
            continue;
        };
        // A member another replica owns keeps only its name and desired state: stopped if it
        // ran, and its worker ends; it is started again once this replica owns it (see
        // `crate::coordinator`).
        if let Ownership::Elsewhere { owner } = owner_of(&shared, &name) {
            if shared.members.remove(&name) {
                info!(
                    owner = owner.as_deref().unwrap_or("unknown"),
                    "ownership moved to another replica: member stopped"
                );
            }
            if park(&shared, &name, &rx) {
                return;
            }
            continue;
        }
        // Boxed: a worker spends most of its life waiting (parked while another replica owns
        // the member, or idle once it runs), and the attempt's state is several times the size
        // of that wait; boxed, a fleet of parked workers does not pay for it.
        let next = Box::pin(attempt(
            &shared,
            &name,
            &mut rx,
            desired,
            &mut backoff,
            &mut last,
        ));
        if next.await.is_break() {
            return;
        }
    }
}

/// One attempt for `desired`, then the wait for what comes next (a new desired state, a
/// change of ownership, or the retry delay). `Break` when the workers stop.
async fn attempt<R: Converge>(
    shared: &Arc<Shared<R>>,
    name: &ClusterName,
    rx: &mut watch::Receiver<Option<R::Desired>>,
    desired: R::Desired,
    backoff: &mut Backoff,
    last: &mut Option<R::Desired>,
) -> ControlFlow<()> {
    if last.as_ref() != Some(&desired) {
        backoff.reset();
        *last = Some(desired.clone());
    }
    let member = Member {
        name: name.clone(),
        desired,
        latest: rx.clone(),
        members: shared.members.clone(),
        token: shared.token.clone(),
    };
    let ownership_at_start = ownership_version(&shared.engagements);
    // Shutdown never waits for an attempt in flight (a credential plugin is killed). A
    // panic in the provider's attempt costs this member one retry, not its worker.
    let attempt = AssertUnwindSafe(shared.converge.converge(&member)).catch_unwind();
    let outcome = tokio::select! {
        () = shared.token.cancelled() => return ControlFlow::Break(()),
        // Ownership moved away mid-attempt: the attempt is dropped (whatever it brought
        // up is cancelled) and the member released at the top of the loop.
        () = lost(&shared.engagements, name) => return ControlFlow::Continue(()),
        outcome = attempt => outcome,
    };
    let retry = match outcome {
        Err(panic) => {
            let err = Panicked(crate::panic_message(panic.as_ref()));
            let retry_in = backoff.next_delay();
            error!(error = %err, retry_in = ?retry_in, "bringing the member up panicked; retrying");
            shared.members.report_failure(name, &err, Some(retry_in));
            Some(retry_in)
        }
        Ok(Ok(())) => {
            backoff.reset();
            shared.members.report_done(name);
            None
        }
        // Ownership moved during the attempt (the engagement table may have refused the member
        // as owned elsewhere, even if it is back by now): no failure; at the top of the loop the
        // member is released, or tried again at once under the new ownership.
        Ok(Err(_))
            if !owner_of(shared, name).is_owned()
                || ownership_version(&shared.engagements) != ownership_at_start =>
        {
            return ControlFlow::Continue(());
        }
        Ok(Err(err)) => {
            let retry_in = shared
                .converge
                .is_retryable(&err)
                .then(|| backoff.next_delay());
            shared.members.report_failure(name, &err, retry_in);
            shared.converge.failed(&member, &err, retry_in);
            retry_in
        }
    };
    let delay = async {
        match retry {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = shared.token.cancelled() => return ControlFlow::Break(()),
        changed = rx.changed() => if changed.is_err() { return ControlFlow::Break(()) },
        () = lost(&shared.engagements, name) => {}
        () = delay => {}
    }
    ControlFlow::Continue(())
}

/// Starts the worker of `name` with `desired`: the slot to keep for it.
fn start<R: Converge>(
    shared: &Arc<Shared<R>>,
    name: &ClusterName,
    desired: R::Desired,
) -> Slot<R::Desired> {
    let (tx, rx) = watch::channel(Some(desired));
    let span = tracing::info_span!("member", cluster = %name);
    let worker = run(shared.clone(), name.clone(), rx).instrument(span);
    shared.tasks.spawn(worker);
    Slot::Running(tx)
}

/// Parks the running worker of `name` if another replica still owns it and something is
/// still desired under it: its slot keeps the latest desired state and the worker ends (true).
/// Decided under the slots' lock, which [`watch_ownership`] takes to start parked names, so
/// a name that comes home meanwhile is never left parked.
fn park<R: Converge>(
    shared: &Arc<Shared<R>>,
    name: &ClusterName,
    rx: &watch::Receiver<Option<R::Desired>>,
) -> bool {
    let mut slots = shared.slots();
    let Ownership::Elsewhere { owner } = owner_of(shared, name) else {
        return false;
    };
    let Some(desired) = rx.borrow().clone() else {
        return false;
    };
    slots.names.insert(name.clone(), Slot::Parked(desired));
    debug!(
        owner = owner.as_deref().unwrap_or("unknown"),
        "owned elsewhere: worker parked"
    );
    // After the member's removal, which cleared its record.
    shared.members.report_elsewhere(name, owner);
    watch_parked(shared, &mut slots);
    true
}

/// Starts [`watch_ownership`] once, when the first name is parked.
fn watch_parked<R: Converge>(shared: &Arc<Shared<R>>, slots: &mut Slots<R::Desired>) {
    if slots.watching {
        return;
    }
    let Some(changes) = shared.engagements.ownership_changes() else {
        return;
    };
    slots.watching = true;
    shared.tasks.spawn(
        watch_ownership(shared.clone(), changes).instrument(tracing::info_span!("parked_members")),
    );
}

/// At every change of ownership, starts the worker of each parked name this replica owns
/// now: one task and one pass over the names per change, rather than a waiting task per name.
async fn watch_ownership<R: Converge>(shared: Arc<Shared<R>>, mut changes: watch::Receiver<u64>) {
    loop {
        changes.borrow_and_update();
        {
            let mut slots = shared.slots();
            for (name, slot) in slots.names.iter_mut() {
                if matches!(slot, Slot::Parked(_)) && owner_of(&shared, name).is_owned() {
                    let placeholder = Slot::Running(watch::Sender::new(None));
                    if let Slot::Parked(desired) = std::mem::replace(slot, placeholder) {
                        debug!(cluster = %name, "owned here now: worker started");
                        *slot = start(&shared, name, desired);
                    }
                }
            }
        }
        tokio::select! {
            () = shared.token.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
    }
}

/// Who owns `name` (this replica without a coordinator).
fn owner_of<R: Converge>(shared: &Shared<R>, name: &ClusterName) -> Ownership {
    shared.engagements.owner(name)
}

/// How many times ownership changed so far (`None` without a coordinator).
fn ownership_version(engagements: &Engagements) -> Option<u64> {
    engagements
        .ownership_changes()
        .map(|changes| *changes.borrow())
}

/// Returns once this replica no longer owns `name` (never without a coordinator).
async fn lost(engagements: &Engagements, name: &ClusterName) {
    until_owned(engagements, name, false).await;
}

/// Returns once whether this replica owns `name` is `owned` (never without a coordinator).
async fn until_owned(engagements: &Engagements, name: &ClusterName, owned: bool) {
    let Some(mut changes) = engagements.ownership_changes() else {
        return std::future::pending::<()>().await;
    };
    loop {
        changes.borrow_and_update();
        if engagements.owner(name).is_owned() == owned {
            return;
        }
        if changes.changed().await.is_err() {
            return std::future::pending::<()>().await;
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the provider panicked while bringing the member up: {0}")]
struct Panicked(String);
