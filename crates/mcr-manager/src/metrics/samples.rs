//! Exact queue-wait samples, kept only on request (benchmarks, diagnostics).
//!
//! The histogram `mcr_queue_wait_seconds` answers "how long do requests wait" within a bucket's
//! factor of two; a benchmark that compares percentiles needs the exact values. When asked to
//! ([`Metrics::keep_queue_wait_samples`](super::Metrics::keep_queue_wait_samples)), every
//! observation is also appended to a per-(controller, cluster) buffer. Switched off (the default)
//! the hot path costs one relaxed atomic load and takes no lock.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;

use super::ClusterLabels;

/// At most this many samples are kept per (controller, cluster) between two takes; later ones
/// are dropped (the histogram still counts them).
pub(crate) const MAX_SAMPLES: usize = 1 << 20;

/// The sample buffers of every (controller, cluster) of one [`Metrics`](super::Metrics).
#[derive(Debug, Default)]
pub(crate) struct SampleStore {
    enabled: Arc<AtomicBool>,
    lanes: Mutex<HashMap<ClusterLabels, Arc<SampleLane>>>,
}

impl SampleStore {
    pub(crate) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// The buffer of one (controller, cluster), created on first use.
    pub(crate) fn lane(&self, labels: &ClusterLabels) -> Arc<SampleLane> {
        self.lanes
            .lock()
            .entry(labels.clone())
            .or_insert_with(|| {
                Arc::new(SampleLane {
                    enabled: self.enabled.clone(),
                    buf: Mutex::new(Vec::new()),
                })
            })
            .clone()
    }

    /// Takes the samples of one (controller, cluster) recorded so far.
    pub(crate) fn take(&self, labels: &ClusterLabels) -> Vec<Duration> {
        let lane = self.lanes.lock().get(labels).cloned();
        lane.map(|l| std::mem::take(&mut *l.buf.lock()))
            .unwrap_or_default()
    }

    pub(crate) fn forget(&self, labels: &ClusterLabels) {
        self.lanes.lock().remove(labels);
    }
}

/// The sample buffer of one (controller, cluster).
#[derive(Debug)]
pub(crate) struct SampleLane {
    enabled: Arc<AtomicBool>,
    buf: Mutex<Vec<Duration>>,
}

impl SampleLane {
    /// Keeps `wait` if samples are switched on (and the buffer is not full).
    pub(crate) fn record(&self, wait: Duration) {
        if self.enabled.load(Ordering::Relaxed) {
            let mut buf = self.buf.lock();
            if buf.len() < MAX_SAMPLES {
                buf.push(wait);
            }
        }
    }
}
