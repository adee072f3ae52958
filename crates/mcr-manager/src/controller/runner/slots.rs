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

use std::{collections::HashMap, time::Duration};

use mcr_core::ClusterName;
use tokio::time::Instant;

/// How long a cluster may go without finishing any of its in-flight reconciles before it
/// counts as stalled, unless the builder says otherwise.
pub(crate) const DEFAULT_STALLED_AFTER: Duration = Duration::from_secs(10);

/// The in-flight reconciles of one cluster.
#[derive(Debug)]
struct InFlight {
    n: usize,
    /// The last time one of them finished, or the first started after the cluster was idle.
    progress: Instant,
    stalled: bool,
}

/// The in-flight reconciles of every cluster, and which clusters are stalled (see the module
/// documentation).
#[derive(Debug, Default)]
pub(super) struct Slots {
    clusters: HashMap<ClusterName, InFlight>,
    /// Reconciles in flight in clusters that are not stalled.
    counted: usize,
}

impl Slots {
    /// Reconciles in flight that count against `concurrency` (those of clusters not stalled).
    pub(super) fn counted(&self) -> usize {
        self.counted
    }

    /// How many reconciles of `cluster` are in flight, stalled or not.
    pub(super) fn in_flight(&self, cluster: &ClusterName) -> usize {
        self.clusters.get(cluster).map_or(0, |c| c.n)
    }

    /// Whether `cluster` may start one more reconcile: not stalled, and below `cap`.
    pub(super) fn may_start(&self, cluster: &ClusterName, cap: usize) -> bool {
        self.clusters
            .get(cluster)
            .is_none_or(|c| !c.stalled && c.n < cap)
    }

    /// A reconcile of `cluster` started at `now`.
    pub(super) fn started(&mut self, cluster: &ClusterName, now: Instant) {
        let c = self.clusters.entry(cluster.clone()).or_insert(InFlight {
            n: 0,
            progress: now,
            stalled: false,
        });
        c.n += 1;
        if !c.stalled {
            self.counted += 1;
        }
    }

    /// A reconcile of `cluster` finished (or was cut short) at `now`: the cluster made
    /// progress, so it is not stalled.
    pub(super) fn finished(&mut self, cluster: &ClusterName, now: Instant) {
        let Some(c) = self.clusters.get_mut(cluster) else {
            return;
        };
        if c.stalled {
            c.stalled = false;
            self.counted += c.n;
        }
        c.n = c.n.saturating_sub(1);
        self.counted = self.counted.saturating_sub(1);
        c.progress = now;
        if c.n == 0 {
            self.clusters.remove(cluster);
        }
    }

    /// Marks the clusters that have made no progress for `after` by `now` as stalled; returns
    /// the ones that just stalled, with their reconciles in flight.
    pub(super) fn check(&mut self, now: Instant, after: Duration) -> Vec<(ClusterName, usize)> {
        let mut newly = Vec::new();
        for (name, c) in &mut self.clusters {
            if !c.stalled && now.saturating_duration_since(c.progress) >= after {
                c.stalled = true;
                self.counted = self.counted.saturating_sub(c.n);
                newly.push((name.clone(), c.n));
            }
        }
        newly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_secs(10);

    fn name(s: &str) -> ClusterName {
        ClusterName::new(s)
    }

    #[test]
    fn a_cluster_without_progress_stops_counting_and_starting() {
        let t0 = Instant::now();
        let mut slots = Slots::default();
        for _ in 0..3 {
            slots.started(&name("hung"), t0);
        }
        slots.started(&name("ok"), t0);
        assert_eq!(slots.counted(), 4);
        assert!(slots.may_start(&name("hung"), 4));
        assert!(!slots.may_start(&name("hung"), 3), "the cap still applies");

        // Not yet: a cluster is stalled only after the whole period without progress.
        assert!(slots.check(t0 + AFTER / 2, AFTER).is_empty());
        slots.finished(&name("ok"), t0 + AFTER / 2);
        assert_eq!(
            slots.check(t0 + AFTER, AFTER),
            vec![(name("hung"), 3)],
            "the cluster that finished nothing stalled"
        );
        assert_eq!(slots.counted(), 0);
        assert!(!slots.may_start(&name("hung"), 16));
        assert!(slots.may_start(&name("other"), 16));
        assert!(
            slots.check(t0 + AFTER * 2, AFTER).is_empty(),
            "reported once"
        );

        // One of its reconciles finishing ends the stall: the rest count again.
        slots.finished(&name("hung"), t0 + AFTER * 2);
        assert_eq!(slots.counted(), 2);
        assert!(slots.may_start(&name("hung"), 16));
    }

    #[test]
    fn a_slow_cluster_that_keeps_finishing_never_stalls() {
        let t0 = Instant::now();
        let mut slots = Slots::default();
        slots.started(&name("slow"), t0);
        slots.started(&name("slow"), t0);
        let mut now = t0;
        for _ in 0..10 {
            now += AFTER / 2;
            slots.finished(&name("slow"), now);
            slots.started(&name("slow"), now);
            assert!(slots.check(now, AFTER).is_empty());
        }
        assert_eq!(slots.counted(), 2);
    }

    #[test]
    fn an_idle_cluster_starts_its_period_with_its_next_reconcile() {
        let t0 = Instant::now();
        let mut slots = Slots::default();
        slots.started(&name("a"), t0);
        slots.finished(&name("a"), t0);
        slots.started(&name("a"), t0 + AFTER * 5);
        assert!(slots.check(t0 + AFTER * 5, AFTER).is_empty());
        assert_eq!(slots.counted(), 1);
    }
}
