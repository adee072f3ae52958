//! The series of one (controller, cluster), kept in one allocation per engaged cluster.
//!
//! A `prometheus-client` `Family` keeps a hash-map entry per label set, an owned `String` per
//! label value and a separate allocation behind every counter, gauge and histogram: about 3.5
//! KiB for the eight series of one engaged cluster (bench/README.md, "Bytes per member").
//! Here one [`Series`] holds them all, as atomics and two fixed bucket arrays, its labels
//! shared (`Arc<str>` for the controller, [`ClusterName`] for the cluster); each metric is
//! a [`View`] over the one [`SeriesSet`] that encodes exactly what a `Family` of the same
//! name, labels and buckets would.

use std::{
    collections::HashMap,
    fmt,
    sync::{
        Arc, LazyLock,
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
    },
    time::Duration,
};

use mcr_core::ClusterName;
use parking_lot::{Mutex, RwLock};
use prometheus_client::{
    encoding::{EncodeMetric, MetricEncoder, NoLabelSet},
    metrics::{MetricType, histogram::exponential_buckets},
};

use super::{label::Escaped, samples::SampleLane};

/// The upper bounds of `mcr_reconcile_duration_seconds`: 1 ms .. ~65 s, then `+Inf`.
static DURATION_BOUNDS: LazyLock<[f64; 18]> = LazyLock::new(|| bounds(0.001));
/// The upper bounds of `mcr_queue_wait_seconds`: 10 us .. ~21 s (a healthy queue hands work
/// out within microseconds), then `+Inf`.
static WAIT_BOUNDS: LazyLock<[f64; 23]> = LazyLock::new(|| bounds(0.000_01));

/// `N - 1` upper bounds from `start`, each twice the one before, then `f64::MAX`: the last
/// bucket, which the encoder writes as `+Inf` (as `prometheus_client`'s `Histogram` adds it).
fn bounds<const N: usize>(start: f64) -> [f64; N] {
    let mut out = [f64::MAX; N];
    let finite = u16::try_from(N - 1).unwrap_or(u16::MAX);
    for (slot, b) in out.iter_mut().zip(exponential_buckets(start, 2.0, finite)) {
        *slot = b;
    }
    out
}

/// A monotonic counter.
#[derive(Debug, Default)]
pub(crate) struct Count(AtomicU64);

impl Count {
    /// Adds one.
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A gauge.
#[derive(Debug, Default)]
pub(crate) struct Level(AtomicI64);

impl Level {
    /// Sets the value.
    pub(crate) fn set(&self, v: i64) {
        self.0.store(v, Ordering::Relaxed);
    }

    fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A histogram of `N` buckets with fixed upper bounds, the last `+Inf`; an observation counts
/// in the first bucket whose bound is not below it (as in `prometheus_client`'s `Histogram`).
pub(crate) struct Buckets<const N: usize> {
    bounds: &'static [f64; N],
    state: Mutex<BucketState<N>>,
}

struct BucketState<const N: usize> {
    sum: f64,
    count: u64,
    counts: [u64; N],
}

impl<const N: usize> Buckets<N> {
    fn new(bounds: &'static [f64; N]) -> Self {
        Buckets {
            bounds,
            state: Mutex::new(BucketState {
                sum: 0.0,
                count: 0,
                counts: [0; N],
            }),
        }
    }

    /// Records one observation of `v`.
    pub(crate) fn observe(&self, v: f64) {
        let mut s = self.state.lock();
        s.sum += v;
        s.count += 1;
        if let Some(i) = self.bounds.iter().position(|b| *b >= v) {
            s.counts[i] += 1;
        }
    }

    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let (sum, count, buckets) = {
            let s = self.state.lock();
            let buckets: [(f64, u64); N] = std::array::from_fn(|i| (self.bounds[i], s.counts[i]));
            (s.sum, s.count, buckets)
        };
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }
}

impl<const N: usize> fmt::Debug for Buckets<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.lock();
        f.debug_struct("Buckets")
            .field("sum", &s.sum)
            .field("count", &s.count)
            .finish_non_exhaustive()
    }
}

/// The queue-wait histogram of one (controller, cluster), and its optional exact samples.
#[derive(Debug)]
pub(crate) struct QueueWait {
    histogram: Buckets<23>,
    samples: SampleLane,
}

impl QueueWait {
    /// Records that a request waited `wait` between becoming due and its reconcile starting.
    pub(crate) fn observe(&self, wait: Duration) {
        self.histogram.observe(wait.as_secs_f64());
        self.samples.record(wait);
    }
}

/// Every series of one (controller, cluster).
#[derive(Debug)]
pub(crate) struct Series {
    controller: Arc<str>,
    cluster: ClusterName,
    /// `mcr_reconcile_total{result="success"}`.
    pub(crate) success: Count,
    /// `mcr_reconcile_total{result="error"}`.
    pub(crate) error: Count,
    /// `mcr_reconcile_total{result="panic"}`.
    pub(crate) panic: Count,
    /// `mcr_reconcile_total{result="cluster_gone"}`.
    pub(crate) gone: Count,
    /// `mcr_reconcile_duration_seconds`.
    pub(crate) duration: Buckets<18>,
    /// `mcr_queue_wait_seconds`.
    pub(crate) wait: QueueWait,
    /// `mcr_queue_depth`.
    pub(crate) depth: Level,
    /// `mcr_watch_restarts`.
    pub(crate) restarts: Level,
}

impl Series {
    /// Takes the queue-wait samples recorded so far.
    pub(crate) fn take_samples(&self) -> Vec<Duration> {
        self.wait.samples.take()
    }

    /// The `controller` and `cluster` labels, then `extra`.
    fn labels<'a>(&'a self, extra: Option<(&'static str, &'a str)>) -> Labels<'a> {
        Labels {
            controller: &self.controller,
            cluster: self.cluster.as_str(),
            extra,
        }
    }
}

/// The label set of one series: `controller`, `cluster` and maybe one more (`result`).
struct Labels<'a> {
    controller: &'a str,
    cluster: &'a str,
    extra: Option<(&'static str, &'a str)>,
}

impl prometheus_client::encoding::EncodeLabelSet for Labels<'_> {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> fmt::Result {
        let pairs = [
            Some(("controller", self.controller)),
            Some(("cluster", self.cluster)),
            self.extra,
        ];
        for (key, value) in pairs.into_iter().flatten() {
            prometheus_client::encoding::EncodeLabel::encode(
                &(key, Escaped(value)),
                encoder.encode_label(),
            )?;
        }
        Ok(())
    }
}

type Key = (Arc<str>, ClusterName);

/// The series of every engaged (controller, cluster) of one [`Metrics`](super::Metrics).
#[derive(Debug, Default)]
pub(crate) struct SeriesSet {
    series: RwLock<HashMap<Key, Arc<Series>>>,
    /// Controller names, shared by the series of each controller.
    controllers: Mutex<Vec<Arc<str>>>,
    /// Whether queue-wait samples are kept (see `samples`).
    pub(crate) samples_enabled: Arc<AtomicBool>,
}

impl SeriesSet {
    /// The shared name of `controller`.
    fn controller(&self, controller: &str) -> Arc<str> {
        let mut names = self.controllers.lock();
        if let Some(name) = names.iter().find(|n| ***n == *controller) {
            return name.clone();
        }
        let name: Arc<str> = Arc::from(controller);
        names.push(name.clone());
        name
    }

    /// The series of (`controller`, `cluster`), created at zero on first use.
    pub(crate) fn get_or_create(&self, controller: &str, cluster: &ClusterName) -> Arc<Series> {
        let key = (self.controller(controller), cluster.clone());
        if let Some(s) = self.series.read().get(&key) {
            return s.clone();
        }
        self.series
            .write()
            .entry(key)
            .or_insert_with_key(|(controller, cluster)| {
                Arc::new(Series {
                    controller: controller.clone(),
                    cluster: cluster.clone(),
                    success: Count::default(),
                    error: Count::default(),
                    panic: Count::default(),
                    gone: Count::default(),
                    duration: Buckets::new(&DURATION_BOUNDS),
                    wait: QueueWait {
                        histogram: Buckets::new(&WAIT_BOUNDS),
                        samples: SampleLane::new(self.samples_enabled.clone()),
                    },
                    depth: Level::default(),
                    restarts: Level::default(),
                })
            })
            .clone()
    }

    /// The series of (`controller`, `cluster`), if there is one.
    pub(crate) fn get(&self, controller: &str, cluster: &str) -> Option<Arc<Series>> {
        let key = (Arc::<str>::from(controller), ClusterName::new(cluster));
        self.series.read().get(&key).cloned()
    }

    /// Forgets the series of `s`'s (controller, cluster).
    pub(crate) fn remove(&self, s: &Series) {
        let key = (s.controller.clone(), s.cluster.clone());
        self.series.write().remove(&key);
    }
}

/// One metric of the per-(controller, cluster) series, as the registry encodes it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Metric {
    /// `mcr_reconcile_total`, labelled by result.
    Reconciles,
    /// `mcr_reconcile_duration_seconds`.
    Durations,
    /// `mcr_queue_wait_seconds`.
    Waits,
    /// `mcr_queue_depth`.
    Depth,
    /// `mcr_watch_restarts`.
    Restarts,
}

/// One metric over every series of a [`SeriesSet`] (registered once per metric).
#[derive(Debug)]
pub(crate) struct View {
    pub(crate) set: Arc<SeriesSet>,
    pub(crate) metric: Metric,
}

impl EncodeMetric for View {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let series = self.set.series.read();
        for s in series.values() {
            match self.metric {
                Metric::Reconciles => {
                    for (result, count) in [
                        ("success", &s.success),
                        ("error", &s.error),
                        ("panic", &s.panic),
                        ("cluster_gone", &s.gone),
                    ] {
                        let labels = s.labels(Some(("result", result)));
                        encoder
                            .encode_family(&labels)?
                            .encode_counter::<NoLabelSet, _, u64>(&count.get(), None)?;
                    }
                }
                Metric::Durations => s.duration.encode(encoder.encode_family(&s.labels(None))?)?,
                Metric::Waits => s
                    .wait
                    .histogram
                    .encode(encoder.encode_family(&s.labels(None))?)?,
                Metric::Depth => encoder
                    .encode_family(&s.labels(None))?
                    .encode_gauge(&s.depth.get())?,
                Metric::Restarts => encoder
                    .encode_family(&s.labels(None))?
                    .encode_gauge(&s.restarts.get())?,
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        match self.metric {
            Metric::Reconciles => MetricType::Counter,
            Metric::Durations | Metric::Waits => MetricType::Histogram,
            Metric::Depth | Metric::Restarts => MetricType::Gauge,
        }
    }

    fn is_empty(&self) -> bool {
        self.set.series.read().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcr_core::ClusterName;
    use prometheus_client::{
        encoding::text::encode,
        metrics::{
            counter::Counter,
            family::Family,
            gauge::Gauge,
            histogram::{Histogram, exponential_buckets},
        },
        registry::Registry,
    };

    use super::Series;
    use crate::metrics::{Metrics, label::LabelValue};

    /// The lines of `text` about the per-(controller, cluster) metrics, sorted (series come out
    /// in no particular order).
    fn per_cluster_lines(text: &str) -> Vec<String> {
        let names = [
            "mcr_reconcile",
            "mcr_reconcile_duration_seconds",
            "mcr_queue_wait_seconds",
            "mcr_queue_depth",
            "mcr_watch_restarts",
        ];
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| {
                let name = l
                    .trim_start_matches("# TYPE ")
                    .trim_start_matches("# HELP ");
                let name = name.split(['{', ' ']).next().unwrap_or_default();
                names
                    .iter()
                    .any(|n| name == *n || name.strip_prefix(n).is_some_and(|s| s.starts_with('_')))
            })
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }

    /// What `prometheus-client`'s families wrote for the same observations before the series
    /// were kept in one allocation per cluster: names, types, labels, buckets and values.
    #[test]
    fn encodes_what_families_of_the_same_series_encode() {
        let metrics = Metrics::new();
        let mut registry = Registry::default();
        type Labels = Vec<(&'static str, LabelValue)>;
        let reconciles = Family::<Labels, Counter>::default();
        let durations = Family::<Labels, Histogram, _>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 17))
        });
        let waits = Family::<Labels, Histogram, _>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_01, 2.0, 22))
        });
        let depth = Family::<Labels, Gauge>::default();
        let restarts = Family::<Labels, Gauge>::default();
        registry.register("mcr_reconcile", "Reconciles by result", reconciles.clone());
        registry.register(
            "mcr_reconcile_duration_seconds",
            "Time spent in the reconciler",
            durations.clone(),
        );
        registry.register(
            "mcr_queue_wait_seconds",
            "Time from a request becoming due to its reconcile starting",
            waits.clone(),
        );
        registry.register("mcr_queue_depth", "Keys ready to reconcile", depth.clone());
        registry.register(
            "mcr_watch_restarts",
            "Watch errors seen by the cluster's informers",
            restarts.clone(),
        );
        for (controller, cluster, n) in [
            ("demo", "east", 3u32),
            ("demo", "we\"st\n", 1),
            ("other", "east", 0),
        ] {
            let labels: Labels = vec![
                ("controller", controller.into()),
                ("cluster", cluster.into()),
            ];
            let m = metrics.cluster(controller, &ClusterName::new(cluster));
            for (result, count) in [
                ("success", &m.success),
                ("error", &m.error),
                ("panic", &m.panic),
                ("cluster_gone", &m.gone),
            ] {
                let mut with_result = labels.clone();
                with_result.push(("result", result.into()));
                let counter = reconciles.get_or_create(&with_result);
                for _ in 0..n {
                    count.inc();
                    counter.inc();
                }
            }
            let durations = durations.get_or_create(&labels);
            let waits = waits.get_or_create(&labels);
            for v in [0.0, 0.000_5, 0.001, 0.003, 0.7, 40.0, 1e6]
                .iter()
                .take(n as usize * 2 + 1)
            {
                m.duration.observe(*v);
                durations.observe(*v);
                m.wait.observe(Duration::from_secs_f64(*v / 1000.0));
                waits.observe(Duration::from_secs_f64(*v / 1000.0).as_secs_f64());
            }
            m.depth.set(i64::from(n) * 7);
            depth.get_or_create(&labels).set(i64::from(n) * 7);
            m.restarts.set(i64::from(n));
            restarts.get_or_create(&labels).set(i64::from(n));
        }
        let mut families = String::new();
        encode(&mut families, &registry).unwrap();
        let ours = per_cluster_lines(&metrics.encode());
        assert_eq!(ours, per_cluster_lines(&families));
        assert_eq!(
            ours.iter()
                .filter(|l| l.starts_with("mcr_reconcile_total"))
                .count(),
            12
        );
    }

    /// Every series of one (controller, cluster) is one allocation of at most 512 bytes (about
    /// 3.5 KiB of families, label strings and per-metric allocations before, bench/README.md).
    #[test]
    fn one_cluster_s_series_fit_in_512_bytes() {
        assert!(
            std::mem::size_of::<Series>() <= 512,
            "{}",
            std::mem::size_of::<Series>()
        );
        let metrics = Metrics::new();
        let name = ClusterName::new("east");
        let a = metrics.cluster("demo", &name);
        let b = metrics.cluster("demo", &name);
        assert!(
            std::sync::Arc::ptr_eq(&a, &b),
            "one series per (controller, cluster)"
        );
    }
}
