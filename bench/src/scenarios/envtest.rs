//! E1 and E2: mcr-envtest alone. E1: write throughput of one in-process cluster with 100
//! kube-runtime watchers attached. E2: memory of 1,000 in-process clusters with 10 ConfigMaps.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::WatchParams,
    runtime::{watcher, watcher::Event},
};
use mcr_envtest::{Fleet, TestCluster};
use serde_json::{Value, json};

use crate::{child, load, report::Scenario};

const WATCHERS: usize = 100;
const WRITERS: usize = 16;
const OBJECTS_PER_WRITER: usize = 4;

fn e1_duration(quick: bool) -> Duration {
    Duration::from_secs(if quick { 2 } else { 5 })
}

fn e2_clusters(_quick: bool) -> usize {
    1000
}

/// Whether a raw watch line is of type `kind` (e.g. `b"ERROR"`), whichever of `type` and
/// `object` comes first in the line: one prefix and one suffix compare, no allocation.
fn is_type(line: &[u8], kind: &[u8]) -> bool {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let head = line
        .strip_prefix(b"{\"type\":\"")
        .is_some_and(|rest| rest.starts_with(kind) && rest.get(kind.len()) == Some(&b'"'));
    let tail = line
        .strip_suffix(b"\"}")
        .and_then(|rest| rest.strip_suffix(kind))
        .is_some_and(|rest| rest.ends_with(b"\"type\":\""));
    head || tail
}

/// One raw watch stream over the in-process HTTP path (no decoding into objects): counts
/// object events; ends on an ERROR line (e.g. 410 Gone) or end of stream.
async fn raw_watch(
    client: kube::Client,
    delivered: Arc<AtomicU64>,
    ended: Arc<AtomicUsize>,
) -> Result<()> {
    use futures::AsyncBufReadExt;
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{}/configmaps", load::NS))
        .watch(&WatchParams::default(), "0")?;
    let mut body = Box::pin(client.request_stream(request).await?);
    let mut line = Vec::new();
    loop {
        line.clear();
        if body.read_until(b'\n', &mut line).await? == 0 {
            break;
        }
        if is_type(&line, b"ERROR") {
            break;
        }
        if !is_type(&line, b"BOOKMARK") {
            delivered.fetch_add(1, Ordering::Relaxed);
        }
    }
    ended.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// A kube-runtime watcher: counts `Apply` events (relists after 410 are counted apart).
async fn kube_watch(
    api: Api<ConfigMap>,
    delivered: Arc<AtomicU64>,
    ready: Arc<AtomicUsize>,
    relists: Arc<AtomicU64>,
) {
    let mut events = watcher(api, watcher::Config::default()).boxed();
    let mut inits = 0;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Apply(_)) => {
                delivered.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Event::InitDone) => {
                inits += 1;
                if inits == 1 {
                    ready.fetch_add(1, Ordering::Relaxed);
                } else {
                    relists.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(%err, "watcher error"),
        }
    }
}

/// Child: E1. `mode` is `raw` (raw watch streams, the emulator's own cost) or `kube`
/// (kube-runtime watchers, which also decode every event into a ConfigMap in this process).
pub async fn e1(mode: &str, quick: bool) -> Result<Value> {
    let raw = match mode {
        "raw" => true,
        "kube" => false,
        other => bail!("unknown E1 mode {other:?} (raw, kube)"),
    };
    let cluster = TestCluster::start("e1").await?;
    let objects = WRITERS * OBJECTS_PER_WRITER;
    load::create_objects(cluster.client(), objects).await?;
    let delivered = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let relists = Arc::new(AtomicU64::new(0));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let (delivered, ready, ended, relists) = (
            delivered.clone(),
            ready.clone(),
            ended.clone(),
            relists.clone(),
        );
        let client = cluster.client();
        watchers.push(tokio::spawn(async move {
            if raw {
                if let Err(err) = raw_watch(client, delivered, ended).await {
                    tracing::warn!(%err, "raw watch failed");
                }
            } else {
                kube_watch(Api::namespaced(client, load::NS), delivered, ready, relists).await;
            }
        }));
    }
    if raw {
        // Each raw watch starts with one ADDED per object.
        let initial = (WATCHERS * objects) as u64;
        wait_for("initial events", || {
            delivered.load(Ordering::Relaxed) >= initial
        })
        .await?;
        delivered.store(0, Ordering::Relaxed);
    } else {
        wait_for("watchers ready", || {
            ready.load(Ordering::Relaxed) >= WATCHERS
        })
        .await?;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let writers = (0..WRITERS).map(|w| {
        let api: Api<ConfigMap> = Api::namespaced(cluster.client(), load::NS);
        let stop = stop.clone();
        tokio::spawn(async move {
            let names: Vec<String> = (0..OBJECTS_PER_WRITER)
                .map(|i| load::object_name(w * OBJECTS_PER_WRITER + i))
                .collect();
            let mut writes = 0u64;
            let mut v = 0;
            while !stop.load(Ordering::Relaxed) {
                v += 1;
                for name in &names {
                    load::write(&api, name, v).await?;
                    writes += 1;
                }
            }
            Ok::<u64, anyhow::Error>(writes)
        })
    });
    let writers: Vec<_> = writers.collect();
    tokio::time::sleep(e1_duration(quick)).await;
    stop.store(true, Ordering::Relaxed);
    let mut writes = 0;
    for w in writers {
        writes += w.await??;
    }
    let elapsed = start.elapsed();
    let expected = writes * WATCHERS as u64;
    let drained = wait_for("every event delivered", || {
        delivered.load(Ordering::Relaxed) >= expected
            || ended.load(Ordering::Relaxed) > 0
            || relists.load(Ordering::Relaxed) > 0
    })
    .await
    .is_ok();
    let drain = start.elapsed() - elapsed;
    for w in watchers {
        w.abort();
    }
    Ok(json!({
        "watchers": WATCHERS, "writers": WRITERS, "seconds": elapsed.as_secs_f64(),
        "writes": writes, "writes_per_s": writes as f64 / elapsed.as_secs_f64(),
        "events_expected": expected, "events_delivered": delivered.load(Ordering::Relaxed),
        "mode": mode, "all_delivered": drained && delivered.load(Ordering::Relaxed) >= expected,
        "relists": relists.load(Ordering::Relaxed), "streams_ended": ended.load(Ordering::Relaxed), "drain_seconds": drain.as_secs_f64(),
        "events_per_s": delivered.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64(),
    }))
}

async fn wait_for(what: &str, cond: impl Fn() -> bool) -> Result<()> {
    let end = Instant::now() + Duration::from_secs(30);
    while !cond() {
        if Instant::now() > end {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Child: E2.
pub async fn e2(quick: bool) -> Result<Value> {
    let n = e2_clusters(quick);
    let start = Instant::now();
    let fleet = Fleet::builder().clusters(n).start().await?;
    stream::iter(
        fleet
            .clusters()
            .iter()
            .map(|c| load::create_objects(c.client(), 10)),
    )
    .buffer_unordered(16)
    .collect::<Vec<_>>()
    .await
    .into_iter()
    .collect::<Result<Vec<_>>>()?;
    let seconds = start.elapsed().as_secs_f64();
    let (rss, _) = crate::machine::own_memory();
    Ok(json!({ "clusters": n, "objects_per_cluster": 10, "seconds": seconds, "rss_kib_end": rss }))
}

fn args(id: &str, mode: &str, quick: bool) -> Vec<String> {
    let mut a = vec![id.to_string(), mode.to_string()];
    if quick {
        a.push("--quick".into());
    }
    a
}

/// Parent: E1, with raw watch streams (the goal) and with kube-runtime watchers.
pub fn run_e1(quick: bool) -> Scenario {
    let mut e1s = Scenario::new(
        "E1",
        format!(
            "mcr-envtest alone: 1 in-process cluster, {WATCHERS} watchers, {WRITERS} writers for {:?}",
            e1_duration(quick)
        ),
        ">= 10,000 writes/s",
    );
    for (mode, label) in [
        ("raw", "raw watch streams"),
        ("kube", "kube-runtime watchers"),
    ] {
        match child::run_one(&args("e1", mode, quick)) {
            Ok(v) => {
                let get = |k: &str| v.get(k).and_then(Value::as_f64);
                e1s.metric(
                    &format!("{label}: writes/s sustained"),
                    get("writes_per_s"),
                    "",
                );
                e1s.metric(
                    &format!("{label}: events delivered"),
                    get("events_delivered"),
                    "",
                );
                e1s.metric(
                    &format!("{label}: events expected (writes x watchers)"),
                    get("events_expected"),
                    "",
                );
                e1s.metric(&format!("{label}: relists after 410"), get("relists"), "");
                if mode == "raw" {
                    e1s.goal_met = get("writes_per_s").map(|w| w >= 10_000.0);
                }
                e1s.runs.push(v);
            }
            Err(err) => e1s.error = Some(format!("{err:#}")),
        }
    }
    e1s
}

/// Parent: E2.
pub fn run_e2(quick: bool) -> Scenario {
    let n = e2_clusters(quick);
    let mut e2s = Scenario::new(
        "E2",
        format!("mcr-envtest alone: {n} in-process clusters x 10 ConfigMaps"),
        "RSS < 500 MiB",
    );
    match child::run_one(&args("e2", "envtest", quick)) {
        Ok(v) => {
            let mib = |k: &str| v.get(k).and_then(Value::as_f64).map(|x| x / 1024.0);
            e2s.metric("process RSS at the end", mib("vm_rss_kib"), "MiB");
            e2s.metric("process peak RSS", mib("vm_hwm_kib"), "MiB");
            e2s.metric(
                "start + populate time",
                v.get("seconds").and_then(Value::as_f64),
                "s",
            );
            e2s.goal_met = mib("vm_hwm_kib").map(|r| r < 500.0);
            e2s.runs.push(v);
        }
        Err(err) => e2s.error = Some(format!("{err:#}")),
    }
    e2s
}

#[cfg(test)]
mod tests {
    use super::is_type;

    #[test]
    fn raw_line_types() {
        assert!(is_type(b"{\"object\":{},\"type\":\"ERROR\"}\n", b"ERROR"));
        assert!(is_type(
            b"{\"type\":\"BOOKMARK\",\"object\":{}}\n",
            b"BOOKMARK"
        ));
        assert!(!is_type(
            b"{\"object\":{},\"type\":\"MODIFIED\"}\n",
            b"ERROR"
        ));
        assert!(!is_type(b"{\"type\":\"ERRORS\",\"object\":{}}", b"ERROR"));
    }
}
