//! Reconcile slots: who may start a reconcile, so that stalled clusters cannot starve the
//! others.
//!
//! A controller runs at most `concurrency` reconciles at once, and one cluster at most its
//! per-cluster cap of them. That alone does not protect healthy clusters: reconciles already
//! running when a member's API server hangs keep their slots until the client's read timeout
//! (300 s), and two hung members at their cap fill every slot.
//!
//! So a cluster is **stalled** while it has reconciles in flight and none of its reconciles
//! has finished for the stall period (`Builder::stalled_after`, default 10 s), counted from
//! its last finished reconcile or, if it was idle, from the start of its oldest running one.
//! A stalled cluster
//! - starts no new reconcile (its cap shrinks to what it holds) until one of its reconciles
//!   finishes, which ends the stall;
//! - no longer counts against `concurrency`: its reconciles wait on its API server, not on the
//!   controller, and the slots they held go to the clusters that make progress.
//!
//! So `k` hung members hold no slot of the healthy ones once the stall period has passed,
//! whatever `k` is, with default settings; the reconciles in flight at once are at most
//! `concurrency` plus what stalled clusters held when they stalled (each at most its cap).
//! A cluster that is only slow keeps finishing reconciles and is never stalled. Stalled
//! reconciles are not cancelled (a `reconcile_timeout` does that).

use std::time::Duration;

use tokio::time::Instant;

/// How long a cluster may go without finishing any of its in-flight reconciles before it
/// counts as stalled, unless the builder says otherwise.
pub(crate) const DEFAULT_STALLED_AFTER: Duration = Duration::from_secs(10);

/// The reconciles in flight of one member, whichever of its instances started them (kept in
/// its entry of the loop's table, see `member`): nothing while none runs, as for most members
/// most of the time, so an idle member's entry holds one pointer's worth of it.
#[derive(Debug, Default)]
pub(super) struct InFlight(Option<Box<Busy>>);

/// The reconciles in flight of a member that has some.
#[derive(Debug)]
struct Busy {
    n: usize,
    /// The last time one of them finished, or the first started after the member was idle.
    progress: Instant,
    stalled: bool,
}

impl InFlight {
    /// How many of its reconciles are in flight, stalled or not.
    pub(super) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |b| b.n)
    }

    /// Whether none of its reconciles is in flight.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Whether it may start one more reconcile: not stalled, and below `cap`.
    pub(super) fn may_start(&self, cap: usize) -> bool {
        self.0.as_ref().is_none_or(|b| !b.stalled && b.n < cap)
    }
}

/// The reconcile slots of a controller: how many of the reconciles in flight count against
/// its concurrency (those of members not stalled). Each member's own reconciles in flight are
/// in its entry ([`InFlight`]); every change of them goes through here, so the two agree.
#[derive(Debug, Default)]
pub(super) struct Slots {
    /// Reconciles in flight of members that are not stalled.
    counted: usize,
}

impl Slots {
    /// Reconciles in flight that count against `concurrency` (those of members not stalled).
    pub(super) fn counted(&self) -> usize {
        self.counted
    }

    /// A reconcile of the member whose reconciles in flight are `member` started at `now`.
    pub(super) fn started(&mut self, member: &mut InFlight, now: Instant) {
        let b = member.0.get_or_insert_with(|| {
            Box::new(Busy {
                n: 0,
                progress: now,
                stalled: false,
            })
        });
        b.n += 1;
        if !b.stalled {
            self.counted += 1;
        }
    }

    /// A reconcile of `member` finished (or was cut short) at `now`: the member made
    /// progress, so it is not stalled.
    pub(super) fn finished(&mut self, member: &mut InFlight, now: Instant) {
        let Some(b) = member.0.as_mut() else {
            return;
        };
        if b.stalled {
            b.stalled = false;
            self.counted += b.n;
        }
        b.n = b.n.saturating_sub(1);
        self.counted = self.counted.saturating_sub(1);
        b.progress = now;
        if b.n == 0 {
            member.0 = None;
        }
    }

    /// Marks `member` as stalled if it made no progress for `after` by `now`; returns its
    /// reconciles in flight if it just stalled.
    pub(super) fn check(
        &mut self,
        member: &mut InFlight,
        now: Instant,
        after: Duration,
    ) -> Option<usize> {
        let b = member.0.as_mut()?;
        if b.stalled || now.saturating_duration_since(b.progress) < after {
            return None;
        }
        b.stalled = true;
        self.counted = self.counted.saturating_sub(b.n);
        Some(b.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_secs(10);

    #[test]
    fn a_cluster_without_progress_stops_counting_and_starting() {
        let t0 = Instant::now();
        let mut slots = Slots::default();
        let (mut hung, mut ok) = (InFlight::default(), InFlight::default());
        for _ in 0..3 {
            slots.started(&mut hung, t0);
        }
        slots.started(&mut ok, t0);
        assert_eq!(slots.counted(), 4);
        assert!(hung.may_start(4));
        assert!(!hung.may_start(3), "the cap still applies");

        // Not yet: a cluster is stalled only after the whole period without progress.
        assert_eq!(slots.check(&mut hung, t0 + AFTER / 2, AFTER), None);
        slots.finished(&mut ok, t0 + AFTER / 2);
        assert!(ok.is_empty(), "an idle member holds nothing");
        assert_eq!(slots.check(&mut ok, t0 + AFTER, AFTER), None);
        assert_eq!(
            slots.check(&mut hung, t0 + AFTER, AFTER),
            Some(3),
            "the cluster that finished nothing stalled"
        );
        assert_eq!(slots.counted(), 0);
        assert!(!hung.may_start(16));
        assert!(InFlight::default().may_start(16));
        assert_eq!(
            slots.check(&mut hung, t0 + AFTER * 2, AFTER),
            None,
            "reported once"
        );

        // One of its reconciles finishing ends the stall: the rest count again.
        slots.finished(&mut hung, t0 + AFTER * 2);
        assert_eq!(slots.counted(), 2);
        assert_eq!(hung.len(), 2);
        assert!(hung.may_start(16));
    }

    #[test]
    fn a_slow_cluster_that_keeps_finishing_never_stalls() {
        let t0 = Instant::now();
        let mut slots = Slots::default();
        let mut slow = InFlight::default();
        slots.started(&mut slow, t0);
        slots.started(&mut slow, t0);
        let mut now = t0;
        for _ in 0..10 {
            now += AFTER / 2;
            slots.finished(&mut slow, now);
            slots.started(&mut slow, now);
            assert_eq!(slots.check(&mut slow, now, AFTER), None);
        }
        assert_eq!(slots.counted(), 2);
    }

    #[test]
    fn an_idle_cluster_starts_its_period_with_its_next_reconcile() {
        let t0 = Instant::now();
        let mut slots = Slots::default();
        let mut a = InFlight::default();
        slots.started(&mut a, t0);
        slots.finished(&mut a, t0);
        slots.started(&mut a, t0 + AFTER * 5);
        assert_eq!(slots.check(&mut a, t0 + AFTER * 5, AFTER), None);
        assert_eq!(slots.counted(), 1);
    }
}
