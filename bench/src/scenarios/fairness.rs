//! B5: fairness. One cluster floods updates while 99 quiet clusters get one update every
//! 100 ms each; the quiet updates' latency (write sent -> reconcile saw that value or a later
//! one) with and without the flood.
//!
//! The in-process variant also reads the manager's queue-wait samples (`mcr_queue_wait_seconds`,
//! exact values via `Metrics::keep_queue_wait_samples`) over the same window: how long the quiet
//! and the flooded clusters' requests waited in the controller's queue once due. That separates
//! queue delay (a quiet key behind flood keys) from everything else (CPU, API server, watch).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use mcr_envtest::{Fleet, TestCluster};
use serde_json::{Value, json};

use crate::{
    child, load,
    probe::Probe,
    report::Scenario,
    sides,
    stats::{ms, percentile},
};

/// How often each quiet cluster gets an update.
pub(crate) const INTERVAL: Duration = Duration::from_millis(100);

/// Sizes of B5 (both variants).
#[derive(Clone, Copy)]
pub(crate) struct Params {
    pub quiet: usize,
    pub flood_objects: usize,
    pub flood_rounds: u64,
    pub writers: usize,
    pub calm: Duration,
    pub reps: usize,
}

pub(crate) fn params(quick: bool) -> Params {
    if quick {
        Params {
            quiet: 19,
            flood_objects: 50,
            flood_rounds: 100,
            writers: 8,
            calm: Duration::from_secs(2),
            reps: 1,
        }
    } else {
        // 100 objects x 500 rounds = 50,000 updates.
        Params {
            quiet: 99,
            flood_objects: 100,
            flood_rounds: 500,
            writers: 8,
            calm: Duration::from_secs(5),
            reps: 3,
        }
    }
}

/// The quiet writers: one update of `cm-0` every 100 ms per quiet cluster until `stop`.
pub(crate) fn spawn_quiet(
    clients: Vec<(String, kube::Client)>,
    probe: Probe,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Result<Vec<Duration>>>> {
    let n = clients.len().max(1) as u32;
    clients
        .into_iter()
        .enumerate()
        .map(|(i, (name, client))| {
            let (probe, stop) = (probe.clone(), stop.clone());
            tokio::spawn(async move {
                let api: Api<ConfigMap> = Api::namespaced(client, load::NS);
                // Spread the clusters over the interval.
                tokio::time::sleep(INTERVAL * i as u32 / n).await;
                let mut tick = tokio::time::interval(INTERVAL);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut k = 0;
                let mut write_times = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    k += 1;
                    probe.sent(&name, k);
                    let t = Instant::now();
                    load::write(&api, &load::object_name(0), k).await?;
                    write_times.push(t.elapsed());
                }
                Ok(write_times)
            })
        })
        .collect()
}

/// Child: `mode` is `flood` or `calm`.
pub async fn child(mode: &str, quick: bool) -> Result<Value> {
    let flood = match mode {
        "flood" => true,
        "calm" => false,
        other => bail!("unknown B5 mode {other:?} (flood, calm)"),
    };
    let p = params(quick);
    let host = TestCluster::start("host").await?;
    let flooder = TestCluster::start("flood").await?;
    load::create_objects(flooder.client(), p.flood_objects).await?;
    let quiet = Fleet::builder()
        .clusters(p.quiet)
        .name_prefix("quiet")
        .start()
        .await?;
    for c in quiet.clusters() {
        load::create_objects(c.client(), 1).await?;
    }
    let probe = Probe::default();
    probe.expect(0, p.flood_objects + p.quiet);
    let mut members: Vec<(String, kube::Client)> = quiet
        .clusters()
        .iter()
        .map(|c| (c.name().to_string(), c.client()))
        .collect();
    members.push(("flood".into(), flooder.client()));
    let running = sides::start_mcr(host.client(), members, vec![probe.clone()]).await?;
    probe
        .wait_done("initial sync", Duration::from_secs(120))
        .await?;
    let metrics = running
        .metrics
        .clone()
        .context("the mcr side has metrics")?;
    metrics.keep_queue_wait_samples(true);

    let stop = Arc::new(AtomicBool::new(false));
    let quiet_clients = quiet
        .clusters()
        .iter()
        .map(|c| (c.name().to_string(), c.client()))
        .collect();
    let start = Instant::now();
    let writers = spawn_quiet(quiet_clients, probe.clone(), stop.clone());
    let mut flood_writes = 0;
    if flood {
        flood_writes =
            load::load_cluster(flooder.client(), p.flood_objects, p.flood_rounds, p.writers)
                .await?;
        let (n, rounds) = (p.flood_objects, p.flood_rounds);
        probe
            .wait("the flood reconciled", Duration::from_secs(600), |pr| {
                pr.cluster_at("flood", rounds, n)
            })
            .await?;
    } else {
        tokio::time::sleep(p.calm).await;
    }
    let window = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut write_times = Vec::new();
    for w in writers {
        write_times.extend(w.await??);
    }
    // The last quiet updates are still on their way: wait for them.
    probe
        .wait("the last quiet updates", Duration::from_secs(30), |pr| {
            pr.latencies().1 == 0
        })
        .await?;
    let controller = sides::mcr_controller_name(0);
    let mut quiet_waits = Vec::new();
    for c in quiet.clusters() {
        quiet_waits.extend(metrics.take_queue_wait_samples(&controller, c.name()));
    }
    let flood_waits = metrics.take_queue_wait_samples(&controller, "flood");
    running.stop().await;
    let (lat, _) = probe.latencies();
    Ok(json!({
        "mode": mode, "quiet_clusters": p.quiet, "quiet_updates": lat.len(),
        "window_seconds": window.as_secs_f64(), "flood_writes": flood_writes,
        "p50_ms": percentile(&lat, 50.0).map(ms), "p99_ms": percentile(&lat, 99.0).map(ms),
        "max_ms": percentile(&lat, 100.0).map(ms),
        "write_p50_ms": percentile(&write_times, 50.0).map(ms),
        "write_p99_ms": percentile(&write_times, 99.0).map(ms),
        "wait_quiet_samples": quiet_waits.len(),
        "wait_quiet_p50_ms": percentile(&quiet_waits, 50.0).map(ms),
        "wait_quiet_p99_ms": percentile(&quiet_waits, 99.0).map(ms),
        "wait_quiet_max_ms": percentile(&quiet_waits, 100.0).map(ms),
        "wait_flood_samples": flood_waits.len(),
        "wait_flood_p50_ms": percentile(&flood_waits, 50.0).map(ms),
        "wait_flood_p99_ms": percentile(&flood_waits, 99.0).map(ms),
    }))
}

/// Parent: interleaved calm / flood runs.
pub fn run(quick: bool) -> Scenario {
    let p = params(quick);
    let mut s = Scenario::new(
        "B5",
        format!(
            "fairness: 1 cluster floods {} updates, {} quiet clusters get 1 update / 100 ms each ({} reps)",
            p.flood_objects as u64 * p.flood_rounds,
            p.quiet,
            p.reps
        ),
        "p99 ratio flood / calm <= 2",
    );
    if let Err(err) = summarize(quick, p, &mut s) {
        s.error = Some(format!("{err:#}"));
    }
    s
}

fn summarize(quick: bool, p: Params, s: &mut Scenario) -> Result<()> {
    for _ in 0..p.reps {
        for mode in ["calm", "flood"] {
            let mut args = vec!["b5".to_string(), mode.to_string()];
            if quick {
                args.push("--quick".into());
            }
            s.runs.push(child::run_one(&args)?);
        }
    }
    summarize_runs(s)
}

/// The figures of B5 from its runs (each with `mode`, `p50_ms`, `p99_ms`, `write_p99_ms`,
/// `window_seconds`).
pub(crate) fn summarize_runs(s: &mut Scenario) -> Result<()> {
    let runs = s.runs.clone();
    let med = |mode: &str, key: &str| super::compare::median_by(&runs, "mode", mode, key);
    let calm = med("calm", "p99_ms")?;
    let flood = med("flood", "p99_ms")?;
    let calm50 = med("calm", "p50_ms")?;
    let flood50 = med("flood", "p50_ms")?;
    let ratio = match (flood, calm) {
        (Some(f), Some(c)) if c > 0.0 => Some(f / c),
        _ => None,
    };
    s.metric("quiet p99 without flood (median)", calm, "ms");
    s.metric("quiet p99 with flood (median)", flood, "ms");
    s.metric("p99 ratio flood / calm", ratio, "");
    s.metric("quiet p50 without flood (median)", calm50, "ms");
    s.metric("quiet p50 with flood (median)", flood50, "ms");
    s.metric(
        "  of which the quiet write request itself, p99 calm",
        med("calm", "write_p99_ms")?,
        "ms",
    );
    s.metric(
        "  of which the quiet write request itself, p99 flood",
        med("flood", "write_p99_ms")?,
        "ms",
    );
    // Queue waits (in-process variant only): how long due requests sat in the queue.
    let has_waits = runs.iter().any(|r| r.get("wait_quiet_p99_ms").is_some());
    if has_waits {
        let waits = [
            (
                "calm",
                "wait_quiet_p99_ms",
                "queue wait of quiet requests, p99 calm",
            ),
            (
                "flood",
                "wait_quiet_p99_ms",
                "queue wait of quiet requests, p99 flood",
            ),
            (
                "calm",
                "wait_quiet_p50_ms",
                "queue wait of quiet requests, p50 calm",
            ),
            (
                "flood",
                "wait_quiet_p50_ms",
                "queue wait of quiet requests, p50 flood",
            ),
            (
                "flood",
                "wait_quiet_max_ms",
                "queue wait of quiet requests, max flood",
            ),
            (
                "flood",
                "wait_flood_p99_ms",
                "queue wait of flood requests, p99 flood",
            ),
        ];
        for (mode, key, name) in waits {
            s.metric(&format!("  {name} (median)"), med(mode, key)?, "ms");
        }
    }
    let flood_s = med("flood", "window_seconds")?;
    s.metric("flood duration (median)", flood_s, "s");
    s.goal_met = ratio.map(|r| r <= 2.0);
    Ok(())
}
