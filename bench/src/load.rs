//! The loader: creates ConfigMaps and writes an increasing counter into them as fast as it can.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};

use crate::{probe::KEY, stamp::STAMP_KEY};

/// The namespace every benchmark object lives in.
pub const NS: &str = "default";

/// The name of object `i`.
pub fn object_name(i: usize) -> String {
    format!("cm-{i}")
}

/// A ConfigMap carrying counter value `v`.
pub fn config_map(name: &str, v: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(KEY.to_string(), v.to_string())])),
        ..ConfigMap::default()
    }
}

/// Creates `cm-0` .. `cm-{n-1}` with value 0 in one cluster.
pub async fn create_objects(client: kube::Client, n: usize) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map(&object_name(i), 0))
                    .await
                    .with_context(|| format!("creating {}", object_name(i)))
            }
        })
        .buffer_unordered(8)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Sets the counter of one object with a JSON merge patch (one request).
pub async fn write(api: &Api<ConfigMap>, name: &str, v: u64) -> Result<()> {
    let patch = serde_json::json!({ "data": { KEY: v.to_string() } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("patching {name} to {v}"))?;
    Ok(())
}

/// Sets the counter of one object and its send-time stamps (see [`crate::stamp`]) with one
/// JSON merge patch.
pub async fn write_stamped(api: &Api<ConfigMap>, name: &str, v: u64, stamps: &str) -> Result<()> {
    let patch = serde_json::json!({ "data": { KEY: v.to_string(), STAMP_KEY: stamps } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("patching {name} to {v}"))?;
    Ok(())
}

/// Writes values `1..=rounds` into `cm-0` .. `cm-{objects-1}` of one cluster, round by round,
/// with `writers` concurrent writers each owning a disjoint set of objects (so each object's
/// values arrive in order and its last value is `rounds`). Returns the number of writes.
pub async fn load_cluster(
    client: kube::Client,
    objects: usize,
    rounds: u64,
    writers: usize,
) -> Result<u64> {
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let writers = writers.clamp(1, objects.max(1));
    let tasks = (0..writers).map(|w| {
        let api = api.clone();
        async move {
            let mine: Vec<String> = (w..objects).step_by(writers).map(object_name).collect();
            for v in 1..=rounds {
                for name in &mine {
                    write(&api, name, v).await?;
                }
            }
            Ok::<u64, anyhow::Error>(mine.len() as u64 * rounds)
        }
    });
    let counts = futures::future::try_join_all(tasks).await?;
    Ok(counts.into_iter().sum())
}

/// One acknowledged write of [`load_fleet_acked`]: the object, the value written, and the
/// wall-clock time (see [`crate::stamp::now_nanos`]) at which the API server's answer arrived.
#[derive(Clone, Debug)]
pub struct Ack {
    /// The object's name.
    pub object: String,
    /// The value written.
    pub value: u64,
    /// Nanoseconds since the Unix epoch when the write was acknowledged.
    pub at: u128,
}

/// [`load_cluster`] that also returns the acknowledgement time of every write.
async fn load_cluster_acked(
    client: kube::Client,
    objects: usize,
    rounds: u64,
    writers: usize,
) -> Result<Vec<Ack>> {
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let writers = writers.clamp(1, objects.max(1));
    let tasks = (0..writers).map(|w| {
        let api = api.clone();
        async move {
            let mine: Vec<String> = (w..objects).step_by(writers).map(object_name).collect();
            let mut acks = Vec::with_capacity(mine.len() * rounds as usize);
            for value in 1..=rounds {
                for name in &mine {
                    write(&api, name, value).await?;
                    let at = crate::stamp::now_nanos();
                    acks.push(Ack {
                        object: name.clone(),
                        value,
                        at,
                    });
                }
            }
            Ok::<Vec<Ack>, anyhow::Error>(acks)
        }
    });
    let acks = futures::future::try_join_all(tasks).await?;
    Ok(acks.into_iter().flatten().collect())
}

/// [`load_fleet`] that also returns, per client (in order), the acknowledgement time of every
/// write: the write side of a per-update latency measured across processes (B8).
pub async fn load_fleet_acked(
    clients: Vec<kube::Client>,
    objects: usize,
    rounds: u64,
    writers: usize,
) -> Result<Vec<Vec<Ack>>> {
    let tasks = clients
        .into_iter()
        .map(|c| tokio::spawn(load_cluster_acked(c, objects, rounds, writers)));
    let mut out = Vec::new();
    for joined in futures::future::join_all(tasks).await {
        out.push(joined.context("loader task panicked")??);
    }
    Ok(out)
}

/// [`load_cluster`] on every client at once. Returns the total number of writes.
pub async fn load_fleet(
    clients: Vec<kube::Client>,
    objects: usize,
    rounds: u64,
    writers: usize,
) -> Result<u64> {
    let tasks = clients
        .into_iter()
        .map(|c| tokio::spawn(load_cluster(c, objects, rounds, writers)));
    let mut total = 0;
    for joined in futures::future::join_all(tasks).await {
        total += joined.context("loader task panicked")??;
    }
    Ok(total)
}

/// Writes values `1..=rounds` into `cm-0` .. `cm-{objects-1}` of every client, one write at a
/// time at `per_second` writes per second (round by round, cluster by cluster), so that a
/// slow (profiled) controller keeps up and reconciles every update. Returns the number of
/// writes.
pub async fn load_paced(
    clients: &[kube::Client],
    objects: usize,
    rounds: u64,
    per_second: u32,
) -> Result<u64> {
    let apis: Vec<Api<ConfigMap>> = clients
        .iter()
        .map(|c| Api::namespaced(c.clone(), NS))
        .collect();
    let names: Vec<String> = (0..objects).map(object_name).collect();
    let period = std::time::Duration::from_secs(1) / per_second.max(1);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut writes = 0;
    for v in 1..=rounds {
        for api in &apis {
            for name in &names {
                tick.tick().await;
                write(api, name, v).await?;
                writes += 1;
            }
        }
    }
    Ok(writes)
}
