//! B5r: B5 (fairness) with the emulator in a separate `mcr-envtest` process over HTTPS and
//! the flood loader and quiet writers in the bench runner, so the measured child process only
//! runs the mcr manager and handles events.
//!
//! Latency crosses processes: each quiet write carries its wall-clock send time (see
//! [`crate::stamp`]) and the child's reconciler subtracts it from its own clock.
//!
//! Protocol: the child prints `READY` after the initial sync, `FLOOD-DONE` (flood mode) once
//! it saw the flood's last values; the parent then stops the quiet writers and sends
//! `END {"<cluster>": <last value>, ...}`; the child waits for those values and reports.

use std::{
    collections::HashMap,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::{Value, json};

use crate::{
    child::{self, Session},
    load,
    probe::Probe,
    remote::{self, Server},
    report::Scenario,
    scenarios::compare::{self, ratio},
    scenarios::fairness::{self, INTERVAL, Params},
    sides::{self, Side},
    stamp::Stamps,
    stats::{ms, percentile},
};

/// Child: the manager over the fleet of `dir` (host, then the flood cluster, then the quiet
/// ones); `mode` is `flood` or `calm`.
pub async fn child(mode: &str, quick: bool, dir: &Path) -> Result<Value> {
    let (side, flood) = match mode {
        "flood" => (Side::Mcr, true),
        "calm" => (Side::Mcr, false),
        "kr-flood" => (Side::KubeRuntime, true),
        "kr-calm" => (Side::KubeRuntime, false),
        other => bail!("unknown B5 mode {other:?} (flood, calm, kr-flood, kr-calm)"),
    };
    let p = fairness::params(quick);
    let (host, members) = remote::host_and_fleet(dir).await?;
    if members.len() != p.quiet + 1 {
        bail!(
            "expected {} member clusters, found {}",
            p.quiet + 1,
            members.len()
        );
    }
    let flood_name = members[0].0.clone();
    let probe = Probe::default();
    probe.expect(0, p.flood_objects + p.quiet);
    let running = sides::start(side, host, members, vec![probe.clone()]).await?;
    probe
        .wait_done("initial sync", Duration::from_secs(120))
        .await?;
    child::mark("READY");
    if flood {
        let (n, rounds) = (p.flood_objects, p.flood_rounds);
        probe
            .wait("the flood reconciled", Duration::from_secs(600), |pr| {
                pr.cluster_at(&flood_name, rounds, n)
            })
            .await?;
        child::mark("FLOOD-DONE");
    }
    let command = child::read_command().await?;
    let last: HashMap<String, u64> = serde_json::from_str(
        command
            .strip_prefix("END ")
            .with_context(|| format!("expected END, got {command:?}"))?,
    )
    .context("END payload")?;
    probe
        .wait("the last quiet updates", Duration::from_secs(30), |pr| {
            last.iter().all(|(c, &k)| k == 0 || pr.cluster_at(c, k, 1))
        })
        .await?;
    running.stop().await;
    let (lat, unmeasured) = probe.stamped_latencies(&last);
    Ok(json!({
        "mode": mode, "quiet_clusters": p.quiet, "quiet_updates": lat.len(),
        "unmeasured": unmeasured,
        "p50_ms": percentile(&lat, 50.0).map(ms), "p99_ms": percentile(&lat, 99.0).map(ms),
        "p95_ms": percentile(&lat, 95.0).map(ms), "max_ms": percentile(&lat, 100.0).map(ms),
        "over_30ms": lat.iter().filter(|l| **l > Duration::from_millis(30)).count(),
    }))
}

/// What one quiet writer did: its cluster, its last value, its request times.
type QuietRun = (String, u64, Vec<Duration>);

/// The quiet writers, on `rt`: one stamped update of `cm-0` every 100 ms per cluster.
fn spawn_quiet(
    rt: &tokio::runtime::Runtime,
    clients: Vec<(String, kube::Client)>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Result<QuietRun>>> {
    let n = clients.len().max(1) as u32;
    clients
        .into_iter()
        .enumerate()
        .map(|(i, (name, client))| {
            let stop = stop.clone();
            rt.spawn(async move {
                let api: Api<ConfigMap> = Api::namespaced(client, load::NS);
                tokio::time::sleep(INTERVAL * i as u32 / n).await;
                let mut tick = tokio::time::interval(INTERVAL);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let (mut k, mut stamps, mut times) = (0, Stamps::default(), Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    k += 1;
                    let text = stamps.push(k);
                    let t = Instant::now();
                    load::write_stamped(&api, &load::object_name(0), k, &text).await?;
                    times.push(t.elapsed());
                }
                Ok((name, k, times))
            })
        })
        .collect()
}

/// One run: a fresh server, populated; the child; the loaders in this process.
fn one_run(mode: &str, p: Params, quick: bool, bin: &Path, dir: &Path) -> Result<Value> {
    let server = Server::start(bin, p.quiet + 2, dir)?;
    // The flood loader and the quiet writers get separate runtimes (and clients, whose
    // connection tasks live on the runtime that made them) so quiet writes never queue
    // behind flood writes in one scheduler.
    let rt = tokio::runtime::Runtime::new()?;
    let quiet_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let (_, members) = rt.block_on(remote::host_and_fleet(server.dir()))?;
    let (_, mut quiet) = quiet_rt.block_on(remote::host_and_fleet(server.dir()))?;
    let flooder = members.first().context("no flood cluster")?.1.clone();
    quiet.remove(0);
    drop(members);
    rt.block_on(load::create_objects(flooder.clone(), p.flood_objects))?;
    // Populating through the quiet writers' own clients also opens their connections, so no
    // measured write pays a TLS handshake.
    let quiet_clients: Vec<kube::Client> = quiet.iter().map(|(_, c)| c.clone()).collect();
    quiet_rt.block_on(remote::populate(&quiet_clients, 1))?;
    drop(quiet_clients);

    let mut args = vec![
        "b5r".to_string(),
        mode.to_string(),
        "--kubeconfig-dir".into(),
    ];
    args.push(server.dir().display().to_string());
    if quick {
        args.push("--quick".into());
    }
    let mut session = Session::start(&args)?;
    session.wait_for("READY", Duration::from_secs(180))?;
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let writers = spawn_quiet(&quiet_rt, quiet, stop.clone());
    let mut flood_writes = 0;
    if mode.ends_with("flood") {
        flood_writes = rt.block_on(load::load_cluster(
            flooder,
            p.flood_objects,
            p.flood_rounds,
            p.writers,
        ))?;
        session.wait_for("FLOOD-DONE", Duration::from_secs(600))?;
    } else {
        std::thread::sleep(p.calm);
    }
    let window = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut last = HashMap::new();
    let mut write_times = Vec::new();
    for joined in quiet_rt.block_on(futures::future::join_all(writers)) {
        let (name, k, times) = joined.context("quiet writer panicked")??;
        last.insert(name, k);
        write_times.extend(times);
    }
    session.send(&format!("END {}", serde_json::to_string(&last)?))?;
    let mut v = session.finish()?;
    if let Value::Object(map) = &mut v {
        map.insert("window_seconds".into(), window.as_secs_f64().into());
        map.insert("flood_writes".into(), flood_writes.into());
        let p50 = percentile(&write_times, 50.0).map(ms);
        let p99 = percentile(&write_times, 99.0).map(ms);
        map.insert("write_p50_ms".into(), p50.into());
        map.insert("write_p99_ms".into(), p99.into());
    }
    drop(server);
    Ok(v)
}

/// Parent: interleaved calm / flood runs with the emulator and loaders out of process.
pub fn run(quick: bool, envtest_bin: &Path, work: &Path) -> Scenario {
    let p = fairness::params(quick);
    let mut s = Scenario::new(
        "B5r",
        format!(
            "fairness as B5, but the emulator (separate mcr-envtest process, HTTPS) and the flood loader and quiet writers (bench runner) run outside the measured process; the same runs with one kube-runtime Controller per cluster as the peer ({} reps, interleaved)",
            p.reps
        ),
        "quiet p99 under the flood, mcr / kube-runtime <= 1.0 (flood / calm <= 2 kept as information)",
    );
    let dir = work.join("b5r-fleet");
    let result = (|| -> Result<()> {
        for _ in 0..p.reps {
            for mode in ["calm", "flood", "kr-flood", "kr-calm"] {
                s.runs.push(one_run(mode, p, quick, envtest_bin, &dir)?);
            }
        }
        fairness::summarize_runs(&mut s)?;
        let runs = s.runs.clone();
        let med = |mode: &str, key: &str| compare::median_by(&runs, "mode", mode, key);
        let (kr_calm, kr_flood) = (med("kr-calm", "p99_ms")?, med("kr-flood", "p99_ms")?);
        let mcr_flood = med("flood", "p99_ms")?;
        s.metric(
            "kube-runtime: quiet p99 without flood (median)",
            kr_calm,
            "ms",
        );
        s.metric(
            "kube-runtime: quiet p99 with flood (median)",
            kr_flood,
            "ms",
        );
        s.metric(
            "kube-runtime: p99 ratio flood / calm",
            ratio(kr_flood, kr_calm),
            "",
        );
        let peer = ratio(mcr_flood, kr_flood);
        s.metric("quiet p99 under the flood, mcr / kube-runtime", peer, "");
        s.metric(
            "quiet p50 under the flood, mcr / kube-runtime",
            ratio(med("flood", "p50_ms")?, med("kr-flood", "p50_ms")?),
            "",
        );
        s.metric(
            "kube-runtime: flood duration (median)",
            med("kr-flood", "window_seconds")?,
            "s",
        );
        s.goal_met = peer.map(|r| r <= 1.0);
        let unmeasured: f64 = s
            .runs
            .iter()
            .filter_map(|r| r.get("unmeasured").and_then(Value::as_f64))
            .sum();
        s.metric(
            "quiet updates without a measured latency (all runs)",
            Some(unmeasured),
            "",
        );
        Ok(())
    })();
    if let Err(err) = result {
        s.error = Some(format!("{err:#}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use mcr_envtest::TestCluster;

    use super::*;

    /// A stamped write is measured by the reconciler's probe, with no shared `Instant`; a
    /// value skipped by coalescing is measured from the stamps of the later one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stamped_writes_give_latencies() {
        let host = TestCluster::start("host").await.unwrap();
        let quiet = TestCluster::start("quiet").await.unwrap();
        load::create_objects(quiet.client(), 1).await.unwrap();
        let probe = Probe::default();
        probe.expect(0, 1);
        let members = vec![("quiet".to_string(), quiet.client())];
        let running = sides::start_mcr(host.client(), members, vec![probe.clone()])
            .await
            .unwrap();
        let deadline = Duration::from_secs(30);
        probe.wait_done("initial sync", deadline).await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(quiet.client(), load::NS);
        let mut stamps = Stamps::default();
        for k in 1..=3 {
            let text = stamps.push(k);
            load::write_stamped(&api, &load::object_name(0), k, &text)
                .await
                .unwrap();
        }
        probe
            .wait("value 3", deadline, |pr| pr.cluster_at("quiet", 3, 1))
            .await
            .unwrap();
        running.stop().await;
        let last = HashMap::from([("quiet".to_string(), 3)]);
        let (lat, unmeasured) = probe.stamped_latencies(&last);
        assert_eq!((lat.len(), unmeasured), (3, 0));
        let (_, beyond) = probe.stamped_latencies(&HashMap::from([("quiet".to_string(), 4)]));
        assert_eq!(beyond, 1, "value 4 was never written");
    }
}
