//! Prometheus metrics of the manager's controllers, labelled per controller and cluster.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `mcr_reconcile_total` | counter | controller, cluster, result (`success`, `error`, `panic`, `cluster_gone`) |
//! | `mcr_reconcile_duration_seconds` | histogram | controller, cluster |
//! | `mcr_queue_depth` | gauge | controller, cluster (keys ready to run) |
//! | `mcr_engaged_clusters` | gauge | controller |
//! | `mcr_watch_restarts` | gauge | controller, cluster (watch errors seen by its informers) |

use std::sync::{Arc, Mutex};

use prometheus_client::{
    encoding::text::encode,
    metrics::{
        counter::Counter,
        family::{Family, MetricConstructor},
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

type ClusterLabels = [(&'static str, String); 2];
type ResultLabels = [(&'static str, String); 3];
type ControllerLabels = [(&'static str, String); 1];

#[derive(Clone, Copy, Debug)]
struct DurationBuckets;

impl MetricConstructor<Histogram> for DurationBuckets {
    fn new_metric(&self) -> Histogram {
        // 1 ms .. ~65 s
        Histogram::new(exponential_buckets(0.001, 2.0, 17))
    }
}

/// The metrics of one manager (cheap to clone). Served on `/metrics` by the manager's HTTP
/// endpoint, or rendered with [`Metrics::encode`].
///
/// ```
/// let metrics = mcr_manager::Metrics::new();
/// let text = metrics.encode(); // series appear once controllers reconcile
/// assert!(text.ends_with("# EOF\n"));
/// ```
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    reconciles: Family<ResultLabels, Counter>,
    durations: Family<ClusterLabels, Histogram, DurationBuckets>,
    depth: Family<ClusterLabels, Gauge>,
    engaged: Family<ControllerLabels, Gauge>,
    restarts: Family<ClusterLabels, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every mcr metric registered.
    ///
    /// ```
    /// let metrics = mcr_manager::Metrics::new();
    /// ```
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ResultLabels, Counter>::default();
        let durations = Family::new_with_constructor(DurationBuckets);
        let depth = Family::<ClusterLabels, Gauge>::default();
        let engaged = Family::<ControllerLabels, Gauge>::default();
        let restarts = Family::<ClusterLabels, Gauge>::default();
        registry.register("mcr_reconcile", "Reconciles by result", reconciles.clone());
        registry.register(
            "mcr_reconcile_duration_seconds",
            "Time spent in the reconciler",
            durations.clone(),
        );
        registry.register("mcr_queue_depth", "Keys ready to reconcile", depth.clone());
        registry.register("mcr_engaged_clusters", "Clusters engaged", engaged.clone());
        registry.register(
            "mcr_watch_restarts",
            "Watch errors seen by the cluster's informers",
            restarts.clone(),
        );
        Self {
            registry: Arc::new(Mutex::new(registry)),
            reconciles,
            durations,
            depth,
            engaged,
            restarts,
        }
    }

    /// The metrics in the Prometheus text format.
    ///
    /// ```
    /// let text = mcr_manager::Metrics::new().encode();
    /// assert!(text.ends_with("# EOF\n"));
    /// ```
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = match self.registry.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &registry);
        out
    }

    /// Registers more metrics (of your own) on the same registry, served on the same endpoint.
    ///
    /// ```
    /// use prometheus_client::metrics::counter::Counter;
    /// let metrics = mcr_manager::Metrics::new();
    /// let mine = Counter::<u64>::default();
    /// metrics.with_registry(|r| r.register("my_things", "Things done", mine.clone()));
    /// mine.inc();
    /// assert!(metrics.encode().contains("my_things_total 1"));
    /// ```
    pub fn with_registry<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        let mut registry = match self.registry.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut registry)
    }

    pub(crate) fn engaged(&self, controller: &str) -> Gauge {
        self.engaged
            .get_or_create_owned(&[("controller", controller.to_owned())])
    }

    pub(crate) fn cluster(&self, controller: &str, cluster: &str) -> ClusterMetrics {
        let labels: ClusterLabels = [
            ("controller", controller.to_owned()),
            ("cluster", cluster.to_owned()),
        ];
        let result = |r: &str| {
            self.reconciles.get_or_create_owned(&[
                ("controller", controller.to_owned()),
                ("cluster", cluster.to_owned()),
                ("result", r.to_owned()),
            ])
        };
        ClusterMetrics {
            success: result("success"),
            error: result("error"),
            panic: result("panic"),
            gone: result("cluster_gone"),
            duration: self.durations.get_or_create_owned(&labels),
            depth: self.depth.get_or_create_owned(&labels),
            restarts: self.restarts.get_or_create_owned(&labels),
            labels,
        }
    }

    /// Forgets the label sets of a cluster that left (memory stays bounded under churn).
    pub(crate) fn forget_cluster(&self, m: &ClusterMetrics) {
        let [controller, cluster] = &m.labels;
        for r in ["success", "error", "panic", "cluster_gone"] {
            self.reconciles.remove(&[
                controller.clone(),
                cluster.clone(),
                ("result", r.to_owned()),
            ]);
        }
        self.durations.remove(&m.labels);
        self.depth.remove(&m.labels);
        self.restarts.remove(&m.labels);
    }
}

/// Metric handles of one (controller, cluster), looked up once at engagement.
#[derive(Clone, Debug)]
pub(crate) struct ClusterMetrics {
    labels: ClusterLabels,
    pub(crate) success: Counter,
    pub(crate) error: Counter,
    pub(crate) panic: Counter,
    pub(crate) gone: Counter,
    pub(crate) duration: Histogram,
    pub(crate) depth: Gauge,
    pub(crate) restarts: Gauge,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labelled_per_controller_and_cluster() {
        let metrics = Metrics::new();
        let m = metrics.cluster("demo", "east");
        m.success.inc();
        m.duration.observe(0.01);
        m.depth.set(3);
        metrics.engaged("demo").set(2);
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"mcr_reconcile_total{controller="demo",cluster="east",result="success"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"mcr_queue_depth{controller="demo",cluster="east"} 3"#));
        assert!(text.contains(r#"mcr_engaged_clusters{controller="demo"} 2"#));
        metrics.forget_cluster(&m);
        assert!(!metrics.encode().contains(r#"cluster="east""#));
    }
}
