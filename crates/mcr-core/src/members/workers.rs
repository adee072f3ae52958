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
use tracing::{Instrument, error, info};

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
    slots: Mutex<HashMap<ClusterName, watch::Sender<Option<R::Desired>>>>,
}

impl<R: Converge> Shared<R> {
    fn slots(&self) -> MutexGuard<'_, HashMap<ClusterName, watch::Sender<Option<R::Desired>>>> {
        self.slots.lock()
    }
}

/// The per-name workers of one provider run.
///
/// [`ensure`](Workers::ensure) publishes what should run under a name (the latest value wins;
/// a worker busy with an older one picks it up next), [`remove`](Workers::remove) says nothing
/// should. Each name has its own task and its own capped exponential
/// [`Backoff`] ([`MembersOptions::backoff_initial`](super::MembersOptions::backoff_initial) up
/// to `backoff_max`), so a slow, hung or failing member only delays itself.
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
                slots: Mutex::new(HashMap::new()),
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
        let mut slots = self.shared.slots();
        if let Some(tx) = slots.get(name) {
            tx.send_replace(Some(desired));
            return;
        }
        let (tx, rx) = watch::channel(Some(desired));
        slots.insert(name.clone(), tx);
        let span = tracing::info_span!("member", cluster = %name);
        let worker = run(self.shared.clone(), name.clone(), rx).instrument(span);
        self.shared.tasks.spawn(worker);
    }

    /// Nothing should run under `name` any more: its worker removes the member and ends.
    pub fn remove(&self, name: &ClusterName) {
        if let Some(tx) = self.shared.slots().get(name) {
            tx.send_replace(None);
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
                slots.remove(&name);
                return;
            }
            continue;
        };
        // A member another replica owns keeps only its name and desired state: stopped if it
        // ran, brought up again once this replica owns it (see `crate::coordinator`).
        if let Ownership::Elsewhere { owner } = owner_of(&shared, &name) {
            if shared.members.remove(&name) {
                info!(
                    owner = owner.as_deref().unwrap_or("unknown"),
                    "ownership moved to another replica: member stopped"
                );
            }
            // After `remove`, which clears the member's record.
            shared.members.report_elsewhere(&name, owner);
            tokio::select! {
                () = shared.token.cancelled() => return,
                changed = rx.changed() => if changed.is_err() { return },
                () = until_owned(&shared.engagements, &name, true) => {}
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
        // Ownership moved away during the attempt, before it was announced (the engagement
        // table refused the member as owned elsewhere): no failure, the member is released at
        // the top of the loop.
        Ok(Err(_)) if !owner_of(shared, name).is_owned() => return ControlFlow::Continue(()),
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

/// Who owns `name` (this replica without a coordinator).
fn owner_of<R: Converge>(shared: &Shared<R>, name: &ClusterName) -> Ownership {
    shared.engagements.owner(name)
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
