//! Prometheus metrics of the manager's controllers, labelled per controller and cluster.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `mcr_reconcile_total` | counter | controller, cluster, result (`success`, `error`, `panic`, `cluster_gone`) |
//! | `mcr_reconcile_duration_seconds` | histogram | controller, cluster |
//! | `mcr_queue_wait_seconds` | histogram | controller, cluster (time from a request becoming due to its reconcile starting) |
//! | `mcr_queue_depth` | gauge | controller, cluster (keys ready to run) |
//! | `mcr_engaged_clusters` | gauge | controller |
//! | `mcr_engagements_total` | counter | (none): clusters engaged with the manager since it started, a cluster engaged again (released and re-engaged, or a new instance) counted each time; churn shows here |
//! | `mcr_watch_restarts` | gauge | controller, cluster (watch errors seen by its informers) |
//! | `mcr_cluster_synced` | gauge | cluster (caches synced, 0 for a member not engaged; host: `cluster="<host>"`) |
//! | `mcr_members` | gauge | provider, state (`engaged`, `pending`, `failed`, `elsewhere`): the members the provider reports, and those a runnable reports under its own name (`webhook-configurations`) |
//! | `mcr_cluster_credentials_*` | gauges | cluster (expiry, expired, renewal failing: see `credentials.rs`) |
//!
//! The per-cluster gauges are refreshed on every scrape of the manager's `/metrics`.
//!
//! `mcr_queue_wait_seconds` is the analogue of controller-runtime's
//! `workqueue_queue_duration_seconds`: a request is *due* when it is enqueued ready, when its
//! requeue / backoff / debounce time is reached, or (for an event that arrived while its key was
//! reconciling) when it arrived; the wait ends when the runner takes it off the queue to start the
//! reconcile. It grows when reconciles of other keys hold every concurrency slot, and shows
//! whether one cluster's backlog delays another's (the queue is round-robin per cluster).
//! Exact samples can be kept as well (see [`Metrics::keep_queue_wait_samples`]).

mod credentials;
mod label;
mod samples;
mod series;

use std::{sync::Arc, time::Duration};

use mcr_core::ClusterName;
use parking_lot::Mutex;
use prometheus_client::{
    encoding::text::encode,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use self::credentials::CredentialMetrics;
use self::label::LabelValue;
use self::series::{Metric, SeriesSet, View};

// Label values are escaped when encoded: cluster names come from outside (see `label`).
type ControllerLabels = [(&'static str, LabelValue); 1];
type MemberLabels = [(&'static str, LabelValue); 2];

/// The metrics of one manager (cheap to clone). Served on `/metrics` by the manager's HTTP
/// endpoint, or rendered with [`Metrics::encode`].
///
/// Per controller and cluster: reconciles by result (`mcr_reconcile_total`), time in the
/// reconciler (`mcr_reconcile_duration_seconds`), time a due request waited in the queue before
/// its reconcile started (`mcr_queue_wait_seconds`), ready keys (`mcr_queue_depth`) and watch
/// errors (`mcr_watch_restarts`); per controller: engaged clusters (`mcr_engaged_clusters`).
/// The crate README has the table.
///
/// ```
/// let metrics = mcr_manager::Metrics::new();
/// let text = metrics.encode(); // series appear once controllers reconcile
/// assert!(text.ends_with("# EOF\n"));
/// ```
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    /// The per-(controller, cluster) series: `mcr_reconcile_total`,
    /// `mcr_reconcile_duration_seconds`, `mcr_queue_wait_seconds`, `mcr_queue_depth`,
    /// `mcr_watch_restarts`.
    series: Arc<SeriesSet>,
    engaged: Family<ControllerLabels, Gauge>,
    engagements: Counter,
    synced: Family<ControllerLabels, Gauge>,
    members: Family<MemberLabels, Gauge>,
    credentials: CredentialMetrics,
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
        let series = Arc::new(SeriesSet::default());
        let view = |metric| View {
            set: series.clone(),
            metric,
        };
        let engaged = Family::<ControllerLabels, Gauge>::default();
        let synced = Family::<ControllerLabels, Gauge>::default();
        let members = Family::<MemberLabels, Gauge>::default();
        registry.register(
            "mcr_cluster_synced",
            "Whether the engaged cluster's caches have synced (1) or not (0); host: cluster=\"<host>\"",
            synced.clone(),
        );
        registry.register(
            "mcr_members",
            "Members the provider knows, by provider and state (engaged, pending, failed)",
            members.clone(),
        );
        registry.register(
            "mcr_reconcile",
            "Reconciles by result",
            view(Metric::Reconciles),
        );
        registry.register(
            "mcr_reconcile_duration_seconds",
            "Time spent in the reconciler",
            view(Metric::Durations),
        );
        registry.register(
            "mcr_queue_wait_seconds",
            "Time from a request becoming due to its reconcile starting",
            view(Metric::Waits),
        );
        registry.register(
            "mcr_queue_depth",
            "Keys ready to reconcile",
            view(Metric::Depth),
        );
        registry.register("mcr_engaged_clusters", "Clusters engaged", engaged.clone());
        let engagements = Counter::default();
        registry.register(
            "mcr_engagements",
            "Clusters engaged with the manager (each new engagement of a cluster counted)",
            engagements.clone(),
        );
        registry.register(
            "mcr_watch_restarts",
            "Watch errors seen by the cluster's informers",
            view(Metric::Restarts),
        );
        let credentials = CredentialMetrics::register(&mut registry);
        Self {
            registry: Arc::new(Mutex::new(registry)),
            series,
            engaged,
            engagements,
            synced,
            members,
            credentials,
        }
    }

    /// Counts one engagement of a cluster with the manager.
    pub(crate) fn engaged_one(&self) {
        self.engagements.inc();
    }

    /// Clusters engaged with the manager since it started (`mcr_engagements_total`): a
    /// cluster released and engaged again counts again, so a rollout's churn is the growth of
    /// this number.
    ///
    /// ```
    /// assert_eq!(mcr_manager::Metrics::new().engagements(), 0);
    /// ```
    pub fn engagements(&self) -> u64 {
        self.engagements.get()
    }

    /// Replaces the `mcr_cluster_synced` series with `states` (departed clusters vanish).
    pub(crate) fn set_cluster_sync(&self, states: &[(String, bool)]) {
        self.synced.clear();
        for (cluster, synced) in states {
            self.synced
                .get_or_create(&[("cluster", LabelValue::from(cluster.as_str()))])
                .set(i64::from(*synced));
        }
    }

    /// Replaces the `mcr_members` series with the counts of `members` by provider and state
    /// (every state of a provider that has members, zeros included).
    pub(crate) fn set_members(&self, members: &[mcr_core::MemberStatus]) {
        let mut counts: std::collections::BTreeMap<(&str, &str), i64> = Default::default();
        for m in members {
            for state in mcr_core::MemberState::ALL {
                counts.entry((&m.provider, state)).or_default();
            }
            *counts.entry((&m.provider, m.state.as_str())).or_default() += 1;
        }
        self.members.clear();
        for ((provider, state), n) in counts {
            let labels = [
                ("provider", LabelValue::from(provider)),
                ("state", LabelValue::from(state)),
            ];
            self.members.get_or_create(&labels).set(n);
        }
    }

    /// Replaces the `mcr_cluster_credentials_*` series with `states`.
    pub(crate) fn set_credentials(
        &self,
        states: &[(String, mcr_core::credentials::CredentialStatus)],
    ) {
        self.credentials.set(states);
    }

    /// The metrics in the Prometheus text format.
    ///
    /// ```
    /// let text = mcr_manager::Metrics::new().encode();
    /// assert!(text.ends_with("# EOF\n"));
    /// ```
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock();
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
        let mut registry = self.registry.lock();
        f(&mut registry)
    }

    /// Also keeps every `mcr_queue_wait_seconds` observation from now on (`true`), or stops
    /// keeping them (`false`, the default), for [`take_queue_wait_samples`](Self::take_queue_wait_samples).
    ///
    /// Meant for benchmarks and diagnostics that need exact percentiles rather than histogram
    /// buckets. Kept in memory until taken (at most about a million per controller and cluster;
    /// later ones are dropped), and forgotten when the cluster leaves or the controller stops.
    ///
    /// ```
    /// let metrics = mcr_manager::Metrics::new();
    /// metrics.keep_queue_wait_samples(true);
    /// // ... run the manager ...
    /// let waits = metrics.take_queue_wait_samples("my-controller", "cluster-a");
    /// assert!(waits.is_empty()); // nothing ran here
    /// ```
    pub fn keep_queue_wait_samples(&self, on: bool) {
        self.series
            .samples_enabled
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Takes the queue waits of `controller` in `cluster` recorded since samples were switched
    /// on or last taken (see [`keep_queue_wait_samples`](Self::keep_queue_wait_samples)), in the
    /// order the reconciles started. Empty for a controller or cluster not (or no longer) engaged.
    ///
    /// ```
    /// let metrics = mcr_manager::Metrics::new();
    /// metrics.keep_queue_wait_samples(true);
    /// let waits: Vec<std::time::Duration> = metrics.take_queue_wait_samples("demo", "east");
    /// assert!(waits.is_empty());
    /// ```
    pub fn take_queue_wait_samples(&self, controller: &str, cluster: &str) -> Vec<Duration> {
        self.series
            .get(controller, cluster)
            .map(|s| s.take_samples())
            .unwrap_or_default()
    }

    pub(crate) fn engaged(&self, controller: &str) -> Gauge {
        self.engaged
            .get_or_create_owned(&[("controller", controller.into())])
    }

    /// The series of `controller` in `cluster`, created at zero on first use (shared by every
    /// caller until [`forget_cluster`](Self::forget_cluster)).
    pub(crate) fn cluster(&self, controller: &str, cluster: &ClusterName) -> ClusterMetrics {
        self.series.get_or_create(controller, cluster)
    }

    /// Forgets the series of a cluster that left (memory stays bounded under churn).
    pub(crate) fn forget_cluster(&self, m: &ClusterMetrics) {
        self.series.remove(m);
    }
}

/// Metric handles of one (controller, cluster), looked up once at engagement: one allocation
/// holding every series (see `series`).
pub(crate) type ClusterMetrics = Arc<series::Series>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labelled_per_controller_and_cluster() {
        let metrics = Metrics::new();
        let m = metrics.cluster("demo", &ClusterName::new("east"));
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

    #[test]
    fn queue_wait_histogram_and_samples_per_cluster() {
        let metrics = Metrics::new();
        let (east, west) = (
            metrics.cluster("demo", &ClusterName::new("east")),
            metrics.cluster("demo", &ClusterName::new("west")),
        );
        east.wait.observe(Duration::from_millis(3));
        assert!(
            metrics.take_queue_wait_samples("demo", "east").is_empty(),
            "samples are off by default"
        );
        metrics.keep_queue_wait_samples(true);
        east.wait.observe(Duration::from_micros(40));
        west.wait.observe(Duration::from_millis(7));
        let text = metrics.encode();
        assert!(
            text.contains(r#"mcr_queue_wait_seconds_count{controller="demo",cluster="east"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcr_queue_wait_seconds_count{controller="demo",cluster="west"} 1"#)
        );
        assert!(
            text.contains(r#"mcr_queue_wait_seconds_sum{controller="demo",cluster="west"} 0.007"#)
        );
        assert_eq!(
            metrics.take_queue_wait_samples("demo", "east"),
            [Duration::from_micros(40)]
        );
        assert!(
            metrics.take_queue_wait_samples("demo", "east").is_empty(),
            "taken"
        );
        assert!(metrics.take_queue_wait_samples("other", "west").is_empty());
        metrics.forget_cluster(&west);
        assert!(
            metrics.take_queue_wait_samples("demo", "west").is_empty(),
            "forgotten"
        );
        assert!(!metrics.encode().contains(r#"cluster="west""#));
    }
}
