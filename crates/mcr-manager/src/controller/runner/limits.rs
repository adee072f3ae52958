//! Bounds on reconciles: per-cluster share of the slots, stall period, run time, and shutdown
//! grace.

use std::time::Duration;

use super::slots::DEFAULT_STALLED_AFTER;

/// How long a stopping controller waits for its in-flight reconciles before dropping them,
/// unless the builder says otherwise.
pub(crate) const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// What the builder decided about bounding reconciles.
#[derive(Clone, Debug)]
pub(crate) struct Limits {
    /// Reconciles of one cluster in flight at once; `None` = the default share.
    pub(crate) per_cluster: Option<usize>,
    /// A reconcile still running after this is dropped and retried with backoff.
    pub(crate) reconcile_timeout: Option<Duration>,
    /// A cluster none of whose in-flight reconciles finished for this long is stalled (see
    /// `runner::slots`).
    pub(crate) stalled_after: Duration,
    /// Wait for in-flight reconciles on stop (shutdown or leadership loss).
    pub(crate) shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_cluster: None,
            reconcile_timeout: None,
            stalled_after: DEFAULT_STALLED_AFTER,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

impl Limits {
    /// The cap of one cluster: the explicit one, else three quarters of `concurrency` (at
    /// least 1), so one cluster can never take the last quarter of the slots.
    pub(crate) fn per_cluster_cap(&self, concurrency: usize) -> usize {
        self.per_cluster
            .unwrap_or(concurrency - concurrency / 4)
            .clamp(1, concurrency.max(1))
    }
}

/// Why a reconcile was cut short by the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// It ran longer than the reconcile timeout.
    TimedOut,
    /// Its cluster left (or was replaced).
    ClusterLeft,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_cap_leaves_a_quarter_of_the_slots_to_other_clusters() {
        let l = Limits::default();
        assert_eq!(l.per_cluster_cap(16), 12);
        assert_eq!(l.per_cluster_cap(4), 3);
        assert_eq!(l.per_cluster_cap(1), 1);
        let l = Limits {
            per_cluster: Some(100),
            ..Limits::default()
        };
        assert_eq!(l.per_cluster_cap(8), 8);
        let l = Limits {
            per_cluster: Some(0),
            ..Limits::default()
        };
        assert_eq!(l.per_cluster_cap(8), 1);
    }
}
