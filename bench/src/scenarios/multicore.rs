//! B10: a CPU-heavy reconciler (1 ms of busy work per reconcile) over 100 clusters: one mcr
//! controller against 100 kube-runtime Controllers, on a multi-thread tokio runtime with one
//! worker per core. The emulator is its own process over HTTPS and the loader runs in the
//! runner. The figure that answers "is mcr capped at one core" is the controller process's
//! CPU seconds divided by wall seconds while it works through the updates.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Result;
use serde_json::{Value, json};

use crate::{
    child::{self, Session, num},
    load,
    machine::own_cpu_seconds,
    probe::Probe,
    remote::{self, Server},
    report::Scenario,
    scenarios::compare::{median_of, ratio},
    sides::{self, Side},
};

/// CPU work per reconcile.
const WORK: Duration = Duration::from_millis(1);

/// `(clusters, objects, rounds, reps)`.
fn params(quick: bool) -> (usize, usize, u64, usize) {
    if quick {
        (20, 10, 2, 1)
    } else {
        (100, 10, 3, 3)
    }
}

/// Child: one side with the heavy reconciler over the fleet of `dir`.
pub async fn child(side: &str, quick: bool, dir: &Path) -> Result<Value> {
    let (_, objects, rounds, _) = params(quick);
    let side = Side::parse(side)?;
    let (host, members) = remote::host_and_fleet(dir).await?;
    let total = members.len() * objects;
    let probe = Probe::default();
    probe.expect(0, total);
    let running = sides::start(side, host, members, vec![probe.clone()]).await?;
    probe
        .wait_done("initial sync", Duration::from_secs(300))
        .await?;
    probe.set_spin(WORK);
    probe.expect(rounds, total);
    let (calls, cpu) = (probe.calls(), own_cpu_seconds());
    child::mark("READY");
    let start = Instant::now();
    probe
        .wait_done("every last value", Duration::from_secs(600))
        .await?;
    let wall = start.elapsed().as_secs_f64();
    let (cpu, calls) = (own_cpu_seconds() - cpu, probe.calls() - calls);
    child::mark("DONE");
    running.stop().await;
    Ok(json!({
        "side": side.as_str(), "reconciles": calls, "cpu_s": cpu, "busy_wall_s": wall,
        "cores_used": if wall > 0.0 { cpu / wall } else { 0.0 },
    }))
}

fn one_run(side: &str, quick: bool, bin: &Path, work: &Path) -> Result<Value> {
    let (clusters, objects, rounds, _) = params(quick);
    let server = Server::start(bin, clusters + 1, &work.join("b10-fleet"))?;
    let rt = tokio::runtime::Runtime::new()?;
    let (_, members) = rt.block_on(remote::host_and_fleet(server.dir()))?;
    let loaders: Vec<kube::Client> = members.into_iter().map(|(_, c)| c).collect();
    rt.block_on(remote::populate(&loaders, objects))?;
    let mut args = vec![
        "b10".to_string(),
        side.to_string(),
        "--kubeconfig-dir".into(),
    ];
    args.push(server.dir().display().to_string());
    if quick {
        args.push("--quick".into());
    }
    let mut session = Session::start(&args)?;
    session.wait_for("READY", Duration::from_secs(300))?;
    let start = Instant::now();
    let writes = rt.block_on(load::load_fleet(loaders, objects, rounds, 2))?;
    let done = session.wait_for("DONE", Duration::from_secs(600))?;
    let mut v = session.finish()?;
    if let Value::Object(map) = &mut v {
        let seconds = done.saturating_duration_since(start).as_secs_f64();
        map.insert("seconds".into(), seconds.into());
        map.insert("writes".into(), writes.into());
    }
    Ok(v)
}

/// Parent: interleaved runs and the summary.
pub fn run(quick: bool, envtest_bin: &Path, work: &Path) -> Scenario {
    let (clusters, objects, rounds, reps) = params(quick);
    let mut s = Scenario::new(
        "B10",
        format!(
            "CPU-heavy reconciler ({} ms busy work each) over {clusters} clusters x {objects} \
             objects x {rounds} rounds: one mcr controller vs {clusters} kube-runtime \
             Controllers, concurrency 16 each, {} cores, emulator in its own process ({reps} \
             reps interleaved)",
            WORK.as_millis(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        ),
        "mcr uses every core: cores used mcr / kube-runtime >= 0.9",
    );
    let result = (|| -> Result<()> {
        for _ in 0..reps {
            for side in ["mcr", "kube-runtime"] {
                s.runs.push(one_run(side, quick, envtest_bin, work)?);
            }
        }
        let runs = s.runs.clone();
        let m = |side: &str, key: &str| median_of(&runs, side, key);
        let (c_mcr, c_kr) = (m("mcr", "cores_used")?, m("kube-runtime", "cores_used")?);
        s.metric("cores used while reconciling, mcr (median)", c_mcr, "");
        s.metric(
            "cores used while reconciling, kube-runtime (median)",
            c_kr,
            "",
        );
        let cores = ratio(c_mcr, c_kr);
        s.metric("cores used ratio mcr / kube-runtime", cores, "");
        let (t_mcr, t_kr) = (m("mcr", "seconds")?, m("kube-runtime", "seconds")?);
        s.metric("time to all reconciled mcr (median)", t_mcr, "s");
        s.metric("time to all reconciled kube-runtime (median)", t_kr, "s");
        s.metric("time ratio mcr / kube-runtime", ratio(t_mcr, t_kr), "");
        let per = |side: &str| -> Result<Option<f64>> {
            let xs = runs
                .iter()
                .filter(|r| r["side"] == side)
                .map(|r| Ok(num(r, "reconciles")? / num(r, "writes")?))
                .collect::<Result<Vec<f64>>>()?;
            Ok(crate::stats::median(&xs))
        };
        s.metric("reconciles per update mcr (median)", per("mcr")?, "");
        s.metric(
            "reconciles per update kube-runtime (median)",
            per("kube-runtime")?,
            "",
        );
        s.goal_met = cores.map(|r| r >= 0.9);
        Ok(())
    })();
    if let Err(err) = result {
        s.error = Some(format!("{err:#}"));
    }
    s
}
