//! [`ShardMetrics`]: the metrics of sharded mode.

use prometheus_client::metrics::{counter::Counter, gauge::Gauge, histogram::Histogram};

/// `mcr_shard_peers`, `mcr_shard_owned_clusters`, `mcr_shard_epoch`,
/// `mcr_shard_handoffs_total`, `mcr_shard_forced_handoffs_total`,
/// `mcr_shard_handoff_duration_seconds` and `mcr_shard_lease_writes_total`.
#[derive(Clone, Debug)]
pub(crate) struct ShardMetrics {
    pub(crate) peers: Gauge,
    pub(crate) owned: Gauge,
    pub(crate) epoch: Gauge,
    pub(crate) handoffs: Counter,
    pub(crate) forced: Counter,
    pub(crate) handoff_seconds: Histogram,
    pub(crate) writes: Counter,
}

impl ShardMetrics {
    pub(crate) fn new() -> Self {
        ShardMetrics {
            peers: Gauge::default(),
            owned: Gauge::default(),
            epoch: Gauge::default(),
            handoffs: Counter::default(),
            forced: Counter::default(),
            // 10 ms .. ~80 s
            handoff_seconds: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.01, 2.0, 14),
            ),
            writes: Counter::default(),
        }
    }

    /// Registers them in `registry`.
    pub(crate) fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "mcr_shard_peers",
            "Live replicas of the shard group as this replica sees them",
            self.peers.clone(),
        );
        registry.register(
            "mcr_shard_owned_clusters",
            "Clusters this replica owns and has engaged",
            self.owned.clone(),
        );
        registry.register(
            "mcr_shard_epoch",
            "The assignment this replica has applied (a hash of the peer set and weights)",
            self.epoch.clone(),
        );
        registry.register(
            "mcr_shard_handoffs",
            "Clusters this replica released to another replica",
            self.handoffs.clone(),
        );
        registry.register(
            "mcr_shard_forced_handoffs",
            "Clusters handed over while work of theirs still ran here after the lease duration (a reconcile that ignores cancellation)",
            self.forced.clone(),
        );
        registry.register(
            "mcr_shard_handoff_duration_seconds",
            "Time from a change of the peer set to this replica applying it (release, claim, list)",
            self.handoff_seconds.clone(),
        );
        registry.register(
            "mcr_shard_lease_writes",
            "Writes of this replica's peer Lease",
            self.writes.clone(),
        );
    }
}
