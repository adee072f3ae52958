//! What the benchmark reconcilers record: the highest counter value seen per object, when each
//! cluster was first reconciled, and (for the fairness scenario) per-update latencies.
//!
//! Both sides of a comparison call the same [`Probe::observe`] from their reconciler, so the
//! reconcile cost is identical.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use crate::stamp;

/// The data key the loader writes its counter to.
pub const KEY: &str = "v";

/// The counter value of a ConfigMap written by the loader (0 if absent or malformed).
pub fn value(cm: &ConfigMap) -> u64 {
    cm.data
        .as_ref()
        .and_then(|d| d.get(KEY))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[derive(Default)]
struct Slot {
    /// Highest value seen.
    max: u64,
    /// The phase in which this object was last counted as done.
    phase: u64,
}

#[derive(Default)]
struct State {
    /// cluster -> object -> what was seen.
    seen: HashMap<String, HashMap<String, Slot>>,
    /// cluster -> first reconcile.
    first: HashMap<String, Instant>,
    /// An object counts as done when it has been seen at `target` or above.
    target: u64,
    /// Incremented by every [`Probe::expect`].
    phase: u64,
    /// How many objects must reach the target.
    expected: usize,
    done: usize,
    /// quiet cluster -> (send time of value k at index k-1, latency once seen).
    latency: HashMap<String, Vec<(Instant, Option<Duration>)>>,
    /// cluster -> value -> latency, from send times stamped into the objects.
    stamped: HashMap<String, HashMap<u64, Duration>>,
    /// How many times [`Probe::observe`] ran (reconciles).
    calls: u64,
    /// Whether [`Probe::observe`] records when each object's highest value rose (B8).
    record_rises: bool,
    /// cluster -> object -> (value, wall-clock nanoseconds) each time its highest value rose.
    rises: HashMap<String, HashMap<String, Vec<(u64, u128)>>>,
}

/// Shared record of what reconcilers saw. Cheap to clone.
#[derive(Clone, Default)]
pub struct Probe {
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    /// CPU work (busy loop, nanoseconds) every [`Probe::observe`] does first (B10).
    spin_nanos: Arc<AtomicU64>,
    /// How long (nanoseconds) the mcr reconciler waits, asynchronously, after observing: an
    /// API round trip of a real reconciler (B3b).
    pause_nanos: Arc<AtomicU64>,
    /// Reconciles inside their busy loop right now, and the most there ever were at once.
    spinning: Arc<AtomicU64>,
    max_spinning: Arc<AtomicU64>,
}

impl Probe {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// Makes every later [`Probe::observe`] first burn `work` of CPU (a busy loop on the
    /// calling thread, outside any lock), like a CPU-heavy reconciler.
    pub fn set_spin(&self, work: Duration) {
        let nanos = u64::try_from(work.as_nanos()).unwrap_or(u64::MAX);
        self.spin_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Makes every later mcr reconcile wait `pause` (a tokio sleep, no CPU) after observing,
    /// like a reconciler that makes one API call.
    pub fn set_pause(&self, pause: Duration) {
        let nanos = u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
        self.pause_nanos.store(nanos, Ordering::Relaxed);
    }

    /// The wait set by [`Probe::set_pause`], if any.
    pub fn pause(&self) -> Option<Duration> {
        let nanos = self.pause_nanos.load(Ordering::Relaxed);
        (nanos > 0).then(|| Duration::from_nanos(nanos))
    }

    /// Records that a reconcile in `cluster` saw `cm`.
    pub fn observe(&self, cluster: &str, cm: &ConfigMap) {
        let spin = self.spin_nanos.load(Ordering::Relaxed);
        if spin > 0 {
            let at_once = self.spinning.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_spinning.fetch_max(at_once, Ordering::SeqCst);
            let start = Instant::now();
            let mut x = 0u64;
            while start.elapsed() < Duration::from_nanos(spin) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
            self.spinning.fetch_sub(1, Ordering::SeqCst);
        }
        let v = value(cm);
        let name = cm.name_any();
        let now = Instant::now();
        let mut notify = false;
        {
            let mut guard = self.lock();
            let state = &mut *guard;
            state.calls += 1;
            if !state.first.contains_key(cluster) {
                state.first.insert(cluster.to_string(), now);
                notify = true;
            }
            let objects = match state.seen.get_mut(cluster) {
                Some(o) => o,
                None => state.seen.entry(cluster.to_string()).or_default(),
            };
            let slot = match objects.get_mut(&name) {
                Some(s) => s,
                None => objects.entry(name).or_default(),
            };
            if v > slot.max && state.record_rises {
                let at = stamp::now_nanos();
                let per = state.rises.entry(cluster.to_string()).or_default();
                per.entry(cm.name_any()).or_default().push((v, at));
            }
            slot.max = slot.max.max(v);
            // An object counts once per phase, the first time it is seen at the target.
            if slot.phase != state.phase && slot.max >= state.target {
                slot.phase = state.phase;
                state.done += 1;
                notify |= state.done >= state.expected;
            }
            if let Some(stamps) = cm.data.as_ref().and_then(|d| d.get(stamp::STAMP_KEY)) {
                let now = stamp::now_nanos();
                let seen = match state.stamped.get_mut(cluster) {
                    Some(s) => s,
                    None => state.stamped.entry(cluster.to_string()).or_default(),
                };
                for (k, sent) in stamp::parse(stamps).filter(|(k, _)| *k <= v) {
                    seen.entry(k).or_insert_with(|| stamp::since(sent, now));
                }
            }
            if let Some(log) = state.latency.get_mut(cluster) {
                for (sent, lat) in log.iter_mut().take(v as usize) {
                    if lat.is_none() {
                        *lat = Some(now.saturating_duration_since(*sent));
                    }
                }
            }
        }
        if notify {
            self.changed.notify_waiters();
        }
    }

    /// Starts a phase: `expected` objects must be seen at `target` or above. Objects already
    /// seen at or above the target count at once.
    pub fn expect(&self, target: u64, expected: usize) {
        let mut guard = self.lock();
        let state = &mut *guard;
        state.phase += 1;
        state.target = target;
        state.expected = expected;
        state.done = 0;
        for slot in state.seen.values_mut().flat_map(|o| o.values_mut()) {
            if slot.max >= target {
                slot.phase = state.phase;
                state.done += 1;
            }
        }
    }

    /// The most reconciles that were inside their busy loop ([`Probe::set_spin`]) at the same
    /// time: 1 when a side runs its reconciles one at a time, however many cores it has.
    pub fn max_spinning(&self) -> u64 {
        self.max_spinning.load(Ordering::SeqCst)
    }

    /// From now on, records the wall-clock time (see [`crate::stamp::now_nanos`]) at which a
    /// reconcile first saw each new highest value of each object: the reconcile side of a
    /// per-update latency measured across processes (B8).
    pub fn record_rises(&self) {
        self.lock().record_rises = true;
    }

    /// What [`Probe::record_rises`] recorded, as JSON: `[[cluster, object, [[value, nanos],
    /// ...]], ...]` (nanoseconds as strings), the format the Go peer prints too.
    pub fn rises_json(&self) -> serde_json::Value {
        let state = self.lock();
        let mut out = Vec::new();
        for (cluster, objects) in &state.rises {
            for (name, rises) in objects {
                let rises: Vec<serde_json::Value> = rises
                    .iter()
                    .map(|(v, t)| serde_json::json!([v, t.to_string()]))
                    .collect();
                out.push(serde_json::json!([cluster, name, rises]));
            }
        }
        serde_json::Value::Array(out)
    }

    /// How many reconciles recorded something so far.
    pub fn calls(&self) -> u64 {
        self.lock().calls
    }

    /// How many objects reached the target of the current phase.
    pub fn done(&self) -> usize {
        self.lock().done
    }

    /// Whether `n` objects of `cluster` have been seen at `target` or above.
    pub fn cluster_at(&self, cluster: &str, target: u64, n: usize) -> bool {
        self.lock()
            .seen
            .get(cluster)
            .is_some_and(|o| o.values().filter(|s| s.max >= target).count() >= n)
    }

    /// When `cluster` was first reconciled.
    pub fn first_seen(&self, cluster: &str) -> Option<Instant> {
        self.lock().first.get(cluster).copied()
    }

    /// Records that value `k` (1-based, consecutive) of `cluster`'s quiet object was sent now.
    pub fn sent(&self, cluster: &str, k: u64) {
        let mut state = self.lock();
        let log = state.latency.entry(cluster.to_string()).or_default();
        debug_assert_eq!(log.len() as u64 + 1, k);
        log.push((Instant::now(), None));
    }

    /// Every latency measured so far (updates never seen are left out) and how many were not
    /// seen yet.
    pub fn latencies(&self) -> (Vec<Duration>, usize) {
        let state = self.lock();
        let mut out = Vec::new();
        let mut missing = 0;
        for log in state.latency.values() {
            for (_, lat) in log {
                match lat {
                    Some(l) => out.push(*l),
                    None => missing += 1,
                }
            }
        }
        (out, missing)
    }

    /// Latencies of stamped values (see [`crate::stamp`]): for each cluster of `last`, values
    /// `1..=last`; returns those measured and how many were not (skipped beyond the stamps
    /// an object carries, or never seen).
    pub fn stamped_latencies(&self, last: &HashMap<String, u64>) -> (Vec<Duration>, usize) {
        let state = self.lock();
        let mut out = Vec::new();
        let mut missing = 0;
        for (cluster, &n) in last {
            let seen = state.stamped.get(cluster);
            for k in 1..=n {
                match seen.and_then(|s| s.get(&k)) {
                    Some(l) => out.push(*l),
                    None => missing += 1,
                }
            }
        }
        (out, missing)
    }

    /// Waits until `cond` holds on the probe, re-checking whenever a phase completes or a
    /// cluster is first seen, and at least every 50 ms. Fails after `deadline`.
    pub async fn wait(
        &self,
        what: &str,
        deadline: Duration,
        cond: impl Fn(&Probe) -> bool,
    ) -> Result<()> {
        let end = Instant::now() + deadline;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if cond(self) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= end {
                bail!(
                    "timed out after {deadline:?} waiting for {what} ({} done)",
                    self.done()
                );
            }
            let step = (end - now).min(Duration::from_millis(50));
            let _ = tokio::time::timeout(step, notified).await;
        }
    }

    /// Waits until every expected object of the current phase reached the target.
    pub async fn wait_done(&self, what: &str, deadline: Duration) -> Result<()> {
        self.wait(what, deadline, |p| {
            let s = p.lock();
            s.done >= s.expected
        })
        .await
    }
}
