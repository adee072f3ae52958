//! The loader: keeps writing a new value (`data.v`, growing per object) into every chaos
//! object of every member, faults or not, and remembers the last value each member
//! acknowledged.
//!
//! At most one write per object is in flight, so an object's values land in order; a write
//! that gets no answer within [`WRITE_TIMEOUT`] is dropped (the in-process client then never
//! applies it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::world::{FIRST, NAMESPACE, object_name};

/// How long one write may take before the loader gives up on it.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// Writes in flight at most.
const MAX_IN_FLIGHT: usize = 256;

/// The loader's shared state: per (member, object), the last acknowledged value.
pub struct Load {
    objects: usize,
    acked: Vec<AtomicU64>,
    issued: Vec<AtomicU64>,
    busy: Vec<AtomicBool>,
    /// Writes acknowledged.
    pub ok: AtomicU64,
    /// Writes failed or timed out.
    pub failed: AtomicU64,
}

impl Load {
    /// The last acknowledged value of every object of member `m`.
    pub fn acked(&self, m: usize) -> Vec<u64> {
        (0..self.objects)
            .map(|o| self.acked[m * self.objects + o].load(Ordering::SeqCst))
            .collect()
    }
}

/// Starts writing `rate` values per second over `clients` (one per member) until `stop`.
pub fn start(
    clients: Vec<kube::Client>,
    objects: usize,
    rate: u32,
    stop: CancellationToken,
) -> (Arc<Load>, tokio::task::JoinHandle<()>) {
    let slots = clients.len() * objects;
    let load = Arc::new(Load {
        objects,
        acked: (0..slots).map(|_| AtomicU64::new(FIRST)).collect(),
        issued: (0..slots).map(|_| AtomicU64::new(FIRST)).collect(),
        busy: (0..slots).map(|_| AtomicBool::new(false)).collect(),
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
    });
    let apis: Vec<Api<ConfigMap>> = clients
        .into_iter()
        .map(|c| Api::namespaced(c, NAMESPACE))
        .collect();
    let task = tokio::spawn({
        let load = load.clone();
        async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut writes = JoinSet::new();
            let mut cursor = 0usize;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                while writes.try_join_next().is_some() {}
                if writes.len() >= MAX_IN_FLIGHT || slots == 0 {
                    continue;
                }
                // The next object without a write in flight.
                let Some(slot) = (0..slots)
                    .map(|k| (cursor + k) % slots)
                    .find(|&s| !load.busy[s].load(Ordering::SeqCst))
                else {
                    continue;
                };
                cursor = slot + 1;
                load.busy[slot].store(true, Ordering::SeqCst);
                let value = load.issued[slot].fetch_add(1, Ordering::SeqCst) + 1;
                let api = apis[slot / objects].clone();
                let load = load.clone();
                writes.spawn(async move {
                    let patch = serde_json::json!({"data": {"v": value.to_string()}});
                    let name = object_name(slot % objects);
                    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
                    let write = api.patch(&name, &params, &patch);
                    match tokio::time::timeout(WRITE_TIMEOUT, write).await {
                        Ok(Ok(_)) => {
                            load.acked[slot].fetch_max(value, Ordering::SeqCst);
                            load.ok.fetch_add(1, Ordering::Relaxed);
                        }
                        failed => {
                            load.failed.fetch_add(1, Ordering::Relaxed);
                            let why = match failed {
                                Ok(Err(err)) => err.to_string(),
                                _ => "timed out".to_owned(),
                            };
                            tracing::debug!(member = slot / objects + 1, %name, value, error = %why, "loader write failed");
                        }
                    }
                    load.busy[slot].store(false, Ordering::SeqCst);
                });
            }
            writes.shutdown().await;
        }
    });
    (load, task)
}
