//! B3b: initial-sync work behind live changes. 1,000 clusters of 10 objects each join at once
//! while one synced cluster gets a live update every 100 ms; the live updates' latency (write
//! sent -> reconcile saw that value) while the joiners' initial reconciles are queued, with
//! the controller's `live_changes_first` on (the default) and off.
//!
//! Each reconcile waits [`RECONCILE`] (a tokio sleep: one API round trip of a real reconciler)
//! after it recorded the object. Without it the 10,000 initial reconciles drain in about
//! 0.16 s here, so the backlog the live updates must pass would hold for one or two of them.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use mcr_core::Cluster;
use mcr_envtest::{Fleet, TestCluster};
use serde_json::{Value, json};

use crate::{
    child, load,
    probe::Probe,
    report::Scenario,
    scenarios::fairness::spawn_quiet,
    sides,
    stats::{ms, percentile},
};

/// Joining clusters and objects in each.
fn sizes(quick: bool) -> (usize, usize) {
    if quick { (100, 10) } else { (1000, 10) }
}

/// What one reconcile waits, like one API call (see the module docs).
const RECONCILE: Duration = Duration::from_millis(5);

/// Repetitions per mode.
fn reps(quick: bool) -> usize {
    if quick { 1 } else { 3 }
}

/// Child: `mode` is `live-first` or `one-line`.
pub async fn child(mode: &str, quick: bool) -> Result<Value> {
    let live_first = match mode {
        "live-first" => true,
        "one-line" => false,
        other => bail!("unknown B3b mode {other:?} (live-first, one-line)"),
    };
    let (joining, objects) = sizes(quick);
    let host = TestCluster::start("host").await?;
    let synced = TestCluster::start("synced").await?;
    load::create_objects(synced.client(), 1).await?;
    let joiners = Fleet::builder()
        .clusters(joining)
        .name_prefix("join")
        .start()
        .await?;
    for c in joiners.clusters() {
        load::create_objects(c.client(), objects).await?;
    }
    let probe = Probe::default();
    probe.set_pause(RECONCILE);
    probe.expect(0, 1);
    let members = vec![("synced".to_string(), synced.client())];
    let running =
        sides::start_mcr_with(host.client(), members, vec![probe.clone()], live_first).await?;
    probe
        .wait_done("the synced cluster", Duration::from_secs(60))
        .await?;
    let provider = running
        .provider
        .clone()
        .context("mcr side has a provider")?;

    // Live updates in the synced cluster for the whole join; their queue waits (due to
    // started) are kept, so the report splits a live update's latency into the wait for a
    // worker and the rest (the write's event reaching the queue, then the reconcile).
    let metrics = running.metrics.clone().context("mcr side has metrics")?;
    metrics.keep_queue_wait_samples(true);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_quiet(
        vec![("synced".into(), synced.client())],
        probe.clone(),
        stop.clone(),
    );
    probe.expect(0, 1 + joining * objects);
    let start = Instant::now();
    let adds = joiners.clusters().iter().map(|c| {
        let provider = provider.clone();
        let cluster = Cluster::new(c.name(), c.client());
        async move { provider.add(cluster).await }
    });
    for added in futures::future::join_all(adds).await {
        added?;
    }
    probe
        .wait_done("every joining object reconciled", Duration::from_secs(600))
        .await?;
    let window = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await??;
    }
    probe
        .wait("the last live update", Duration::from_secs(30), |pr| {
            pr.latencies().1 == 0
        })
        .await?;
    let waits = metrics.take_queue_wait_samples(&sides::mcr_controller_name(0), "synced");
    running.stop().await;
    let (lat, _) = probe.latencies();
    Ok(json!({
        "mode": mode, "joining": joining, "objects": objects, "live_updates": lat.len(),
        "window_seconds": window.as_secs_f64(),
        "p50_ms": percentile(&lat, 50.0).map(ms), "p99_ms": percentile(&lat, 99.0).map(ms),
        "max_ms": percentile(&lat, 100.0).map(ms),
        "queue_wait_p50_ms": percentile(&waits, 50.0).map(ms),
        "queue_wait_p99_ms": percentile(&waits, 99.0).map(ms),
        "queue_wait_max_ms": percentile(&waits, 100.0).map(ms),
    }))
}

/// Parent: interleaved runs of both modes.
pub fn run(quick: bool) -> Scenario {
    let (joining, objects) = sizes(quick);
    let mut s = Scenario::new(
        "B3b",
        format!(
            "{joining} clusters x {objects} objects join at once (reconcile: 5 ms wait); 1 synced cluster gets 1 live update / 100 ms"
        ),
        "live update p99 <= 10 ms (live changes first)",
    );
    if let Err(err) = summarize(quick, &mut s) {
        s.error = Some(format!("{err:#}"));
    }
    s
}

fn summarize(quick: bool, s: &mut Scenario) -> Result<()> {
    for _ in 0..reps(quick) {
        for mode in ["one-line", "live-first"] {
            let mut args = vec!["b3b".to_string(), mode.to_string()];
            if quick {
                args.push("--quick".into());
            }
            s.runs.push(child::run_one(&args)?);
        }
    }
    let runs = s.runs.clone();
    let med = |mode: &str, key: &str| super::compare::median_by(&runs, "mode", mode, key);
    let first = med("live-first", "p99_ms")?;
    s.metric("live update p99, live changes first (median)", first, "ms");
    s.metric(
        "live update p99, one line (median)",
        med("one-line", "p99_ms")?,
        "ms",
    );
    s.metric(
        "live update p50, live changes first",
        med("live-first", "p50_ms")?,
        "ms",
    );
    s.metric(
        "live update p50, one line",
        med("one-line", "p50_ms")?,
        "ms",
    );
    s.metric(
        "live update queue wait p99, live changes first",
        med("live-first", "queue_wait_p99_ms")?,
        "ms",
    );
    s.metric(
        "live update queue wait p99, one line",
        med("one-line", "queue_wait_p99_ms")?,
        "ms",
    );
    s.metric(
        "join window, live changes first",
        med("live-first", "window_seconds")?,
        "s",
    );
    s.metric(
        "join window, one line",
        med("one-line", "window_seconds")?,
        "s",
    );
    s.goal_met = first.map(|p| p <= 10.0);
    Ok(())
}
