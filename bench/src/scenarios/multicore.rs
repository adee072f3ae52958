//! B10: a CPU-heavy reconciler (1 ms of busy work per reconcile) over 100 clusters: one mcr
//! controller against 100 kube-runtime Controllers, on a multi-thread tokio runtime with one
//! worker per core. The emulator is its own process over HTTPS and the loader runs in the
//! runner. The figure that answers "is mcr capped at one core" is the controller process's
//! CPU seconds divided by wall seconds while it works through the backlog of the initial
//! list (every object queued at once). On a busy machine that ratio says little, so the
//! probe also records the most reconciles inside their busy loop at the same moment: 1 for
//! a side that runs them one at a time, whatever the load.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Result;
use serde_json::{Value, json};

use crate::{
    child::{self, num},
    machine::own_cpu_seconds,
    probe::Probe,
    remote::{self, Server},
    report::Scenario,
    scenarios::compare::{median_of, ratio},
    sides::{self, Side},
};

/// CPU work per reconcile.
const WORK: Duration = Duration::from_millis(1);

/// `(clusters, objects, reps)`.
fn params(quick: bool) -> (usize, usize, usize) {
    if quick { (20, 20, 1) } else { (100, 50, 3) }
}

/// Child: one side with the heavy reconciler over the fleet of `dir`. Every object is
/// listed at once at the start, so the reconciles queue up and the controller has
/// `clusters x objects` ms of CPU work waiting: the measure is how many cores it spreads
/// that over, from the start of the side until every object was reconciled.
pub async fn child(side: &str, quick: bool, dir: &Path) -> Result<Value> {
    let (_, objects, _) = params(quick);
    let side = Side::parse(side)?;
    let (host, members) = remote::host_and_fleet(dir).await?;
    let total = members.len() * objects;
    let probe = Probe::default();
    probe.set_spin(WORK);
    probe.expect(0, total);
    let (start, cpu) = (Instant::now(), own_cpu_seconds());
    let running = sides::start(side, host, members, vec![probe.clone()]).await?;
    probe
        .wait_done("every object reconciled", Duration::from_secs(600))
        .await?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = own_cpu_seconds() - cpu;
    let calls = probe.calls();
    let at_once = probe.max_spinning();
    running.stop().await;
    Ok(json!({
        "side": side.as_str(), "reconciles": calls, "objects": total, "cpu_s": cpu,
        "seconds": wall, "cores_used": if wall > 0.0 { cpu / wall } else { 0.0 },
        "max_at_once": at_once,
    }))
}

fn one_run(side: &str, quick: bool, bin: &Path, work: &Path) -> Result<Value> {
    let (clusters, objects, _) = params(quick);
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
    child::run_one(&args)
}

/// Parent: interleaved runs and the summary.
pub fn run(quick: bool, envtest_bin: &Path, work: &Path) -> Scenario {
    let (clusters, objects, reps) = params(quick);
    let mut s = Scenario::new(
        "B10",
        format!(
            "CPU-heavy reconciler ({} ms busy work each) over {clusters} clusters x {objects} \
             objects, all queued at the initial list: one mcr controller vs {clusters} \
             kube-runtime Controllers, concurrency 16 each, {} cores, emulator in its own \
             process ({reps} reps interleaved)",
            WORK.as_millis(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        ),
        "mcr spreads reconciles over the cores like kube-runtime: reconciles compute at once \
         on several cores whenever kube-runtime's do, and CPU/wall ratio mcr / kube-runtime \
         >= 0.9 (the ratio judged only when kube-runtime got > 1.2 cores)",
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
        s.metric("CPU seconds / wall seconds, mcr (median)", c_mcr, "");
        s.metric(
            "CPU seconds / wall seconds, kube-runtime (median)",
            c_kr,
            "",
        );
        let cores = ratio(c_mcr, c_kr);
        s.metric("cores used ratio mcr / kube-runtime", cores, "");
        let (t_mcr, t_kr) = (m("mcr", "seconds")?, m("kube-runtime", "seconds")?);
        s.metric(
            "time from start to all reconciled, mcr (median)",
            t_mcr,
            "s",
        );
        s.metric(
            "time from start to all reconciled, kube-runtime (median)",
            t_kr,
            "s",
        );
        s.metric("time ratio mcr / kube-runtime", ratio(t_mcr, t_kr), "");
        // Load-independent: whether two reconciles were ever running their CPU work at the
        // same moment (on different threads), however busy the machine was.
        let (a_mcr, a_kr) = (m("mcr", "max_at_once")?, m("kube-runtime", "max_at_once")?);
        s.metric("most reconciles computing at once, mcr (median)", a_mcr, "");
        s.metric(
            "most reconciles computing at once, kube-runtime (median)",
            a_kr,
            "",
        );
        let per = |side: &str| -> Result<Option<f64>> {
            let xs = runs
                .iter()
                .filter(|r| r["side"] == side)
                .map(|r| Ok(num(r, "reconciles")? / num(r, "objects")?))
                .collect::<Result<Vec<f64>>>()?;
            Ok(crate::stats::median(&xs))
        };
        s.metric("reconciles per object mcr (median)", per("mcr")?, "");
        s.metric(
            "reconciles per object kube-runtime (median)",
            per("kube-runtime")?,
            "",
        );
        // Only a peer that got more than one core shows whether mcr could: on a loaded
        // machine neither side does, and the run says nothing about the cap.
        let judged = match (cores, c_kr) {
            (Some(r), Some(kr)) if kr > 1.2 => Some(r >= 0.9),
            _ => None,
        };
        // mcr running one reconcile at a time while the peer ran several is a miss whatever
        // the machine's load; running several at once meets the goal unless the ratio,
        // where it can be judged, says otherwise.
        let overlap = match (a_mcr, a_kr) {
            (Some(am), Some(ak)) => Some(am >= ak.min(2.0)),
            _ => None,
        };
        s.goal_met = match (overlap, judged) {
            (Some(false), _) => Some(false),
            (Some(true), judged) => Some(judged.unwrap_or(true)),
            (None, judged) => judged,
        };
        Ok(())
    })();
    if let Err(err) = result {
        s.error = Some(format!("{err:#}"));
    }
    s
}
