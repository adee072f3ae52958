//! B2 and B2m with the emulator in its own process: 100 clusters x 200 updates served over
//! HTTPS by a separate `mcr-envtest` server, the loader in the bench runner (the parent), and
//! only the controllers in the measured child, so each side's peak RSS is its own.
//!
//! - B2: one mcr controller vs 100 kube-runtime Controllers (one per cluster).
//! - B2m: five controllers on ConfigMaps: one mcr manager with 5 controllers (one shared watch
//!   per cluster) vs 5 kube-runtime Controllers per cluster (500 watches and stores).
//!
//! Protocol: the child connects, waits until every controller has seen every object, prints
//! `READY`; the parent then runs the loader and times it until the child prints `DONE` (every
//! controller saw the last value of every object).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::{
    child::{self, Session},
    load,
    probe::Probe,
    remote::{self, Server},
    report::Scenario,
    scenarios::compare::{self, median_of, ratio},
    sides::{self, Side},
};

/// How many ConfigMap controllers each side runs.
fn controllers(id: &str) -> usize {
    if id == "b2m" { 5 } else { 1 }
}

/// Child: the controllers of one side, on the fleet of `dir` (the first cluster is the host).
pub async fn child(id: &str, side: &str, quick: bool, dir: &Path) -> Result<Value> {
    let p = compare::params(id, quick)?;
    let side = Side::parse(side)?;
    let (host, members) = remote::host_and_fleet(dir).await?;
    if members.len() != p.clusters {
        bail!(
            "expected {} member clusters, found {}",
            p.clusters,
            members.len()
        );
    }
    let total = p.clusters * p.objects;
    let probes: Vec<Probe> = (0..controllers(id)).map(|_| Probe::default()).collect();
    for probe in &probes {
        probe.expect(0, total);
    }
    let running = sides::start(side, host, members, probes.clone()).await?;
    if side != Side::None {
        for probe in &probes {
            probe
                .wait_done("initial sync", Duration::from_secs(120))
                .await?;
        }
    }
    for probe in &probes {
        probe.expect(p.rounds, total);
    }
    let (rss_ready, _) = crate::machine::own_memory();
    child::mark("READY");
    if side != Side::None {
        for probe in &probes {
            probe
                .wait_done("every latest version", Duration::from_secs(600))
                .await?;
        }
    }
    child::mark("DONE");
    let (rss_done, _) = crate::machine::own_memory();
    running.stop().await;
    Ok(json!({
        "scenario": id, "side": side.as_str(), "clusters": p.clusters, "objects": p.objects,
        "rounds": p.rounds, "controllers": controllers(id),
        "rss_kib_ready": rss_ready, "rss_kib_done": rss_done,
    }))
}

/// One run: a fresh server, populated, one child, the loader timed against the child.
fn one_run(id: &str, side: &str, quick: bool, bin: &Path, dir: &Path) -> Result<Value> {
    let p = compare::params(id, quick)?;
    let server = Server::start(bin, p.clusters + 1, dir)?;
    let rt = tokio::runtime::Runtime::new()?;
    let loaders: Vec<kube::Client> = rt
        .block_on(remote::host_and_fleet(server.dir()))?
        .1
        .into_iter()
        .map(|(_, c)| c)
        .collect();
    rt.block_on(remote::populate(&loaders, p.objects))?;
    // `run-one b2` is the in-process variant; this one is `b2r`.
    let name = if id == "b2" { "b2r" } else { id };
    let mut args = vec![
        name.to_string(),
        side.to_string(),
        "--kubeconfig-dir".into(),
    ];
    args.push(server.dir().display().to_string());
    if quick {
        args.push("--quick".into());
    }
    let mut session = Session::start(&args)?;
    session.wait_for("READY", Duration::from_secs(180))?;
    let start = Instant::now();
    let writes = rt.block_on(load::load_fleet(loaders, p.objects, p.rounds, p.writers))?;
    let load_s = start.elapsed().as_secs_f64();
    let done = session.wait_for("DONE", Duration::from_secs(600))?;
    let seconds = done.saturating_duration_since(start).as_secs_f64();
    let mut v = session.finish()?;
    if let Value::Object(map) = &mut v {
        map.insert("writes".into(), writes.into());
        map.insert("seconds".into(), seconds.into());
        map.insert("load_seconds".into(), load_s.into());
    }
    drop(server);
    Ok(v)
}

/// Parent: interleaved runs (mcr, kube-runtime, ...) plus one idle child, and the summary.
pub fn run(id: &str, quick: bool, envtest_bin: &Path, work: &Path) -> Scenario {
    let (title, goal) = match id {
        "b2m" => (
            "100 clusters x 200 updates, 5 ConfigMap controllers: one mcr manager with 5 controllers vs 5 kube-runtime Controllers per cluster (500)",
            "time ratio <= 1.0; RSS ratio <= 0.5 (by analogy with B2)",
        ),
        _ => (
            "100 clusters x 200 updates: one mcr controller vs 100 kube-runtime Controllers",
            "time ratio <= 1.0; RSS ratio <= 0.5",
        ),
    };
    let mut s = Scenario::new(&id.to_uppercase(), title, goal);
    if let Err(err) = summarize(id, quick, envtest_bin, work, &mut s) {
        s.error = Some(format!("{err:#}"));
    }
    s
}

fn summarize(id: &str, quick: bool, bin: &Path, work: &Path, s: &mut Scenario) -> Result<()> {
    let p = compare::params(id, quick)?;
    s.title = format!(
        "{} ({} clusters x {} objects x {} rounds = {} updates; emulator in a separate mcr-envtest process over HTTPS, loader in the bench runner; {} reps interleaved)",
        s.title,
        p.clusters,
        p.objects,
        p.rounds,
        p.clusters * p.objects * p.rounds as usize,
        p.reps
    );
    let dir = work.join(format!("{id}-fleet"));
    for _ in 0..p.reps {
        for side in ["mcr", "kube-runtime"] {
            s.runs.push(one_run(id, side, quick, bin, &dir)?);
        }
    }
    // A child with the same clients but no controller: the floor of every process.
    s.runs.push(one_run(id, "none", quick, bin, &dir)?);
    let t_mcr = median_of(&s.runs, "mcr", "seconds")?;
    let t_kr = median_of(&s.runs, "kube-runtime", "seconds")?;
    let t_ratio = ratio(t_mcr, t_kr);
    s.metric("time mcr (median)", t_mcr, "s");
    s.metric("time kube-runtime (median)", t_kr, "s");
    s.metric("time ratio mcr / kube-runtime", t_ratio, "");
    let runs = s.runs.clone();
    let mib = |side: &str, key: &str| -> Result<Option<f64>> {
        Ok(median_of(&runs, side, key)?.map(|v| v / 1024.0))
    };
    let r_mcr = mib("mcr", "vm_hwm_kib")?;
    let r_kr = mib("kube-runtime", "vm_hwm_kib")?;
    let r_none = mib("none", "vm_hwm_kib")?;
    let rss_ratio = ratio(r_mcr, r_kr);
    s.metric("peak RSS mcr process (median)", r_mcr, "MiB");
    s.metric("peak RSS kube-runtime process (median)", r_kr, "MiB");
    s.metric(
        "RSS ratio mcr / kube-runtime (whole process)",
        rss_ratio,
        "",
    );
    s.metric(
        "peak RSS of the same process without controllers",
        r_none,
        "MiB",
    );
    let net = |x: Option<f64>| Some(x? - r_none?);
    s.metric(
        "RSS ratio net of that floor",
        ratio(net(r_mcr), net(r_kr)),
        "",
    );
    s.metric(
        "RSS mcr after initial sync (median)",
        mib("mcr", "rss_kib_ready")?,
        "MiB",
    );
    s.metric(
        "RSS kube-runtime after initial sync (median)",
        mib("kube-runtime", "rss_kib_ready")?,
        "MiB",
    );
    s.goal_met = match (t_ratio, rss_ratio) {
        (Some(t), Some(r)) => Some(t <= 1.0 && r <= 0.5),
        _ => None,
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use mcr_envtest::Fleet;

    use super::*;

    /// Both B2m sides, on clients read from kubeconfigs (as the child does), see every last
    /// value with every controller; the hand-rolled side opens one watch per controller and
    /// cluster, mcr one per cluster.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_sides_see_every_update_over_https() {
        let (clusters, objects, rounds, controllers) = (3, 2, 3, 5);
        for (side, watches) in [(Side::Mcr, 1), (Side::KubeRuntime, controllers as u64)] {
            let dir = std::env::temp_dir().join(format!(
                "mcr-bench-test-{}-{}",
                std::process::id(),
                side.as_str()
            ));
            let fleet = Fleet::builder()
                .clusters(clusters + 1)
                .name_prefix("member")
                .kubeconfig_dir(&dir)
                .start()
                .await
                .unwrap();
            let (host, members) = remote::host_and_fleet(&dir).await.unwrap();
            assert_eq!(members.len(), clusters);
            assert_eq!(members[0].0, "member-2");
            let loaders: Vec<kube::Client> = members.iter().map(|(_, c)| c.clone()).collect();
            remote::populate(&loaders, objects).await.unwrap();
            let probes: Vec<Probe> = (0..controllers).map(|_| Probe::default()).collect();
            for probe in &probes {
                probe.expect(0, clusters * objects);
            }
            let running = sides::start(side, host, members, probes.clone())
                .await
                .unwrap();
            let deadline = Duration::from_secs(30);
            for probe in &probes {
                probe.wait_done("initial sync", deadline).await.unwrap();
                probe.expect(rounds, clusters * objects);
            }
            load::load_fleet(loaders, objects, rounds, 2).await.unwrap();
            for probe in &probes {
                probe.wait_done("last values", deadline).await.unwrap();
            }
            running.stop().await;
            for c in &fleet.clusters()[1..] {
                assert_eq!(
                    c.request_count("watch", "configmaps"),
                    watches,
                    "{side:?} watches in {}",
                    c.name()
                );
            }
            drop(fleet);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
