//! Exact queue-wait samples, kept only on request (benchmarks, diagnostics).
//!
//! The histogram `mcr_queue_wait_seconds` answers "how long do requests wait" within a bucket's
//! factor of two; a benchmark that compares percentiles needs the exact values. When asked to
//! ([`Metrics::keep_queue_wait_samples`](super::Metrics::keep_queue_wait_samples)), every
//! observation is also appended to the buffer of its (controller, cluster). Switched off (the
//! default) the hot path costs one relaxed atomic load and takes no lock, and an empty buffer
//! allocates nothing.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;

/// At most this many samples are kept per (controller, cluster) between two takes; later ones
/// are dropped (the histogram still counts them).
pub(crate) const MAX_SAMPLES: usize = 1 << 20;

/// The sample buffer of one (controller, cluster).
#[derive(Debug)]
pub(crate) struct SampleLane {
    /// The switch of the whole [`Metrics`](super::Metrics), shared by every lane.
    enabled: Arc<AtomicBool>,
    buf: Mutex<Vec<Duration>>,
}

impl SampleLane {
    /// An empty buffer that keeps samples while `enabled` is on.
    pub(crate) fn new(enabled: Arc<AtomicBool>) -> Self {
        SampleLane {
            enabled,
            buf: Mutex::new(Vec::new()),
        }
    }

    /// Keeps `wait` if samples are switched on (and the buffer is not full).
    pub(crate) fn record(&self, wait: Duration) {
        if self.enabled.load(Ordering::Relaxed) {
            let mut buf = self.buf.lock();
            if buf.len() < MAX_SAMPLES {
                buf.push(wait);
            }
        }
    }

    /// Takes the samples recorded so far.
    pub(crate) fn take(&self) -> Vec<Duration> {
        std::mem::take(&mut *self.buf.lock())
    }
}
