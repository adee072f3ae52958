//! Members joining and leaving (`Builder::on_join`, `Builder::on_leave`): which end of an
//! engagement is a departure, the drain of a departed member's reconciles, and its leave hook,
//! retried with backoff until it succeeds.
//!
//! A departure runs in three steps, each bounded:
//! 1. **classify** the engagement that ended, from the table ([`Engagements::phase`]): still
//!    wanted and owned here (a replacement, a retry) is no departure; owned by another replica
//!    is [`DepartureReason::MovedAway`]; not wanted at all is [`DepartureReason::LeftFleet`];
//! 2. **drain**: the member's reconciles still running end first. Those of a member that left
//!    the fleet may finish (so a write they sent lands before the cleanup), for at most the
//!    shutdown grace, then they are cut; those of a member that moved are cut at once (the new
//!    owner may start);
//! 3. **the hook**, on a task of its own: retried with backoff until it succeeds, each attempt
//!    bounded. The member joining again stops its retries; its activation waits for the
//!    attempt in flight, so a cleanup never lands after the member's next writes.
//!
//! [`Engagements::phase`]: mcr_core::Engagements::phase

use std::{fmt::Debug, hash::Hash, panic::AssertUnwindSafe, time::Duration};

use futures::FutureExt;
use kube::Resource;
use mcr_core::{ClusterName, ErrorChain, MemberState, backoff::Backoff};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info_span, warn};

use super::{
    Loop,
    engage::Engaged,
    member::{Instance, Phase},
};
use crate::controller::membership::{Departure, DepartureReason, LeaveFn};

/// How long one attempt of a leave hook (or one sweep) may run without a reconcile timeout.
pub(super) const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// The first retry delay of a failed leave hook; it doubles up to [`LEAVE_BACKOFF_MAX`].
const LEAVE_BACKOFF_INITIAL: Duration = Duration::from_millis(200);
const LEAVE_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A member that left, until its leave hook has run (or was abandoned).
pub(super) struct Departing<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    departure: Departure,
    /// Cuts the departed instance's reconciles still running.
    cut: CancellationToken,
    /// Whether the hook's task was started.
    started: bool,
    /// Stops the hook's retries (the member joined again, or the controller stops).
    abandon: CancellationToken,
    /// An instance of the member engaged (or watched) meanwhile: present once the departure
    /// is over.
    pub(super) back: Option<Instance<K, Ctx>>,
    /// Whether `back` became active in the manager's table meanwhile: it is activated once
    /// the departure is over.
    rejoined: bool,
}

impl<K, Ctx> Departing<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    fn new(departure: Departure, cut: CancellationToken) -> Self {
        Self {
            departure,
            cut,
            started: false,
            abandon: CancellationToken::new(),
            back: None,
            rejoined: false,
        }
    }

    /// `instance` came back (in place of one that came back before it): it waits for its own
    /// activation.
    pub(super) fn back_again(&mut self, instance: Instance<K, Ctx>) {
        self.back = Some(instance);
        self.rejoined = false;
    }
}

impl<K, Ctx> Loop<'_, K, Ctx>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// Why the member `name` is no longer engaged here, if that is a departure: `None` while
    /// the table still wants it and this replica owns it (it is being replaced or retried).
    fn departure_reason(&self, name: &ClusterName) -> Option<DepartureReason> {
        match self.spec.fleet.members().member_state(name) {
            None => Some(DepartureReason::LeftFleet),
            Some(MemberState::Elsewhere { owner }) => Some(DepartureReason::MovedAway { owner }),
            Some(_) => None,
        }
    }

    /// The engaged instance `e` of `name` was disengaged: starts its departure if it is one
    /// (with a leave hook), else cuts its reconciles still running.
    pub(super) fn departed(&mut self, name: &ClusterName, e: Engaged<K, Ctx>) {
        if let Some(Phase::Departing(d)) = self.members.get_mut(name).map(|m| &mut m.phase) {
            // A new instance that came back during the departure left before it became
            // active: the departure, abandoned for it, is resumed once its attempt ends.
            d.rejoined = false;
            e.cut.cancel();
            return;
        }
        let hooked = self.spec.on_leave.is_some() && e.joined;
        let reason = if hooked {
            self.departure_reason(name)
        } else {
            None
        };
        let Some(reason) = reason else {
            // No hook, never joined, not a departure, or a departure already under way (a
            // new instance that left before it became active).
            e.cut.cancel();
            return;
        };
        let left_fleet = reason.left_fleet();
        debug!(controller = %self.spec.name, cluster = %name, ?reason, "member departed");
        if left_fleet {
            // Its reconciles may finish, for at most the shutdown grace.
            let deadline = Instant::now() + self.spec.limits.shutdown_grace;
            let expired = name.clone();
            self.drains.push(Box::pin(async move {
                tokio::time::sleep_until(deadline).await;
                expired
            }));
        } else {
            // The new owner may start at once: nothing more of it runs here.
            e.cut.cancel();
        }
        let departure = Departure {
            cluster: name.clone(),
            reason,
            fleet: self.spec.fleet.clone(),
            attempt: 1,
        };
        if let Some(member) = self.members.get_mut(name) {
            member.phase = Phase::Departing(Box::new(Departing::new(departure, e.cut)));
        }
        self.start_leave(name);
    }

    /// The drain of `name` reached its bound: its reconciles still running are cut.
    pub(super) fn drain_expired(&mut self, name: &ClusterName) {
        let Some(member) = self.members.get(name) else {
            return;
        };
        if let Phase::Departing(d) = &member.phase
            && !d.started
        {
            let in_flight = member.in_flight.len();
            if in_flight > 0 {
                warn!(controller = %self.spec.name, cluster = %name, in_flight,
                    grace = ?self.spec.limits.shutdown_grace,
                    "reconciles of a departed member still running after the shutdown grace: cut");
            }
            d.cut.cancel();
        }
    }

    /// Starts the leave hook of `name` once none of its reconciles runs any more; ends the
    /// departure at once if it was abandoned before its hook started.
    pub(super) fn start_leave(&mut self, name: &ClusterName) {
        let Some(member) = self.members.get_mut(name) else {
            return;
        };
        let Phase::Departing(d) = &mut member.phase else {
            return;
        };
        if d.started || !member.in_flight.is_empty() {
            return;
        }
        d.started = true;
        if d.abandon.is_cancelled() {
            return self.left(name.clone());
        }
        let Some(hook) = self.spec.on_leave.clone() else {
            return self.left(name.clone());
        };
        let timeout = self
            .spec
            .limits
            .reconcile_timeout
            .unwrap_or(DEFAULT_HOOK_TIMEOUT);
        let span = info_span!("leave", controller = %self.spec.name, cluster = %name);
        let task = run_leave(hook, d.departure.clone(), d.abandon.clone(), timeout);
        self.leaving.spawn(task.instrument(span));
    }

    /// The departure of `name` is over (its hook succeeded or was abandoned): a new instance
    /// that became active meanwhile is activated now.
    pub(super) fn left(&mut self, name: ClusterName) {
        let Some(member) =
            (self.members.get_mut(&name)).filter(|m| matches!(m.phase, Phase::Departing(_)))
        else {
            return;
        };
        let Phase::Departing(d) = std::mem::replace(&mut member.phase, Phase::Gone) else {
            return;
        };
        let Departing {
            departure,
            cut,
            abandon,
            back,
            rejoined,
            ..
        } = *d;
        let engaged = matches!(back, Some(Instance::Engaged(_)));
        if let Some(back) = back {
            member.put(back);
        }
        if rejoined {
            return self.activate(&name);
        }
        // Abandoned for an instance that left again before it became active: the member is
        // gone after all, and its hook runs again (the controller is not stopping: it would
        // not be here).
        if abandon.is_cancelled()
            && !engaged
            && let Some(reason) = self.departure_reason(&name)
        {
            debug!(controller = %self.spec.name, cluster = %name, ?reason,
                "member left again before it was back: departure resumed");
            let departure = Departure {
                reason,
                attempt: 1,
                ..departure
            };
            if let Some(member) = self.members.get_mut(&name) {
                let mut d = Departing::new(departure, cut);
                d.back = member.take();
                member.phase = Phase::Departing(Box::new(d));
            }
            return self.start_leave(&name);
        }
        self.settle(&name);
    }

    /// Whether the activation of `(name, id)` waits for a departure of `name`: if so, the
    /// departure is abandoned (no more retries, the departed reconciles cut) and the
    /// activation happens when it is over.
    pub(super) fn rejoining(&mut self, name: &ClusterName) -> bool {
        let Some(Phase::Departing(d)) = self.members.get_mut(name).map(|m| &mut m.phase) else {
            return false;
        };
        debug!(controller = %self.spec.name, cluster = %name,
            "member joined again during its departure: the leave hook is not retried");
        d.rejoined = true;
        d.abandon.cancel();
        d.cut.cancel();
        self.start_leave(name);
        true
    }

    /// Runs the join hook of a member that became active: queues what it returns.
    pub(super) fn run_join_hook(&mut self, name: &ClusterName) {
        let Some(join) = self.spec.on_join.clone() else {
            return;
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| join(name))) {
            Ok(requests) => {
                let at = Instant::now();
                for r in requests {
                    self.push_one(r, at);
                }
            }
            Err(panic) => error!(
                controller = %self.spec.name, cluster = %name,
                panic = %mcr_core::panic_message(panic.as_ref()),
                "the join hook panicked; the member's reconciles start anyway"
            ),
        }
    }

    /// The controller stops: no departure is retried any more, and none still draining
    /// starts its hook.
    pub(super) fn abandon_departures(&mut self) {
        for member in self.members.values() {
            if let Phase::Departing(d) = &member.phase {
                d.abandon.cancel();
                d.cut.cancel();
            }
        }
    }
}

/// Runs `hook` for `departure` until an attempt succeeds or `abandon` fires between attempts;
/// each attempt is bounded by `timeout`. Returns the member's name.
async fn run_leave(
    hook: LeaveFn,
    mut departure: Departure,
    abandon: CancellationToken,
    timeout: Duration,
) -> ClusterName {
    let name = departure.cluster.clone();
    let mut backoff = Backoff::new(LEAVE_BACKOFF_INITIAL, LEAVE_BACKOFF_MAX);
    loop {
        let attempt = departure.attempt;
        let run = AssertUnwindSafe(hook(departure.clone())).catch_unwind();
        match tokio::time::timeout(timeout, run).await {
            Ok(Ok(Ok(()))) => {
                debug!(attempt, "leave hook done");
                return name;
            }
            Ok(Ok(Err(err))) => {
                warn!(cluster = %name, attempt, error = %ErrorChain(err.as_ref()),
                    "leave hook failed; retrying with backoff");
            }
            Ok(Err(panic)) => {
                error!(cluster = %name, attempt, panic = %mcr_core::panic_message(panic.as_ref()),
                    "leave hook panicked; retrying with backoff");
            }
            Err(_) => {
                warn!(cluster = %name, attempt, ?timeout, "leave hook timed out; retrying with backoff");
            }
        }
        tokio::select! {
            biased;
            () = abandon.cancelled() => {
                debug!(attempt, "leave hook not retried: the member joined again, or the controller stops");
                return name;
            }
            () = tokio::time::sleep(backoff.next_delay()) => {}
        }
        departure.attempt = attempt.saturating_add(1);
    }
}
