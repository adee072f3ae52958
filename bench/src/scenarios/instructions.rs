//! B9: the per-event cost of B1 and B2 in instructions, mcr against kube-runtime.
//!
//! `perf stat -e instructions` is not available on every (virtual) machine, so the controller
//! process runs under `valgrind --tool=callgrind`, which counts the instructions it executes
//! whatever the CPU. The emulator is its own `mcr-envtest` process over HTTPS and the loader
//! runs in the bench runner, so only controller-side work is counted. The runner zeroes the
//! counters once the child is `READY` (initial sync done), writes the updates at a fixed pace
//! the profiled controller keeps up with (so every update is reconciled on both sides, no
//! coalescing), and dumps the counters when the child reports `DONE`, before it shuts down.
//! The figure is instructions per update, including the idle work of the paced period.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::{
    child::{self, Session, num},
    load,
    probe::Probe,
    remote::{self, Server},
    report::Scenario,
    scenarios::compare::ratio,
    sides::{self, Side},
};

/// One measured case: `(label, clusters, objects, rounds)`.
type Case = (&'static str, usize, usize, u64);

fn cases(quick: bool) -> [Case; 2] {
    if quick {
        [("B1", 1, 50, 4), ("B2", 20, 5, 2)]
    } else {
        // 2,000 updates each.
        [("B1", 1, 100, 20), ("B2", 100, 10, 2)]
    }
}

/// Writes per second (slow enough for a controller under callgrind).
const PACE: u32 = 100;

/// Child: one side over the fleet of `dir`; after `DONE` it waits for `stop` on stdin so
/// that the runner can dump the counters before the shutdown runs.
pub async fn child(spec: &str, side: &str, dir: &Path) -> Result<Value> {
    let (objects, rounds) = parse_spec(spec)?;
    let side = Side::parse(side)?;
    let (host, members) = remote::host_and_fleet(dir).await?;
    let total = members.len() * objects;
    let probe = Probe::default();
    probe.expect(0, total);
    let running = sides::start(side, host, members, vec![probe.clone()]).await?;
    probe
        .wait_done("initial sync", Duration::from_secs(600))
        .await?;
    probe.expect(rounds, total);
    let calls_ready = probe.calls();
    child::mark("READY");
    probe
        .wait_done("every last value", Duration::from_secs(900))
        .await?;
    let calls_done = probe.calls();
    child::mark("DONE");
    let _ = child::read_command().await?;
    running.stop().await;
    Ok(json!({
        "side": side.as_str(), "objects": objects, "rounds": rounds,
        "reconciles": calls_done - calls_ready,
    }))
}

/// `<objects>:<rounds>`.
fn parse_spec(spec: &str) -> Result<(usize, u64)> {
    let (o, r) = spec.split_once(':').context("b9:<objects>:<rounds>")?;
    Ok((o.parse()?, r.parse()?))
}

/// The `summary:` (or `totals:`) instruction count of a callgrind output file.
fn total_instructions(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

fn callgrind_control(flag: &str, pid: u32) -> Result<()> {
    let out = Command::new("callgrind_control")
        .args([flag, &pid.to_string()])
        .output()
        .context("running callgrind_control")?;
    if !out.status.success() {
        bail!(
            "callgrind_control {flag} {pid} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// One case, one side: returns the child's result with `instructions` added.
fn one_run(case: Case, side: &str, bin: &Path, work: &Path) -> Result<Value> {
    let (label, clusters, objects, rounds) = case;
    let dir = work.join("b9-fleet");
    let server = Server::start(bin, clusters + 1, &dir)?;
    let rt = tokio::runtime::Runtime::new()?;
    let (_, members) = rt.block_on(remote::host_and_fleet(server.dir()))?;
    let loaders: Vec<kube::Client> = members.into_iter().map(|(_, c)| c).collect();
    rt.block_on(remote::populate(&loaders, objects))?;
    let out: PathBuf = work.join(format!("callgrind.{label}.{side}"));
    let _ = std::fs::remove_file(&out);
    let dumped = PathBuf::from(format!("{}.1", out.display()));
    let _ = std::fs::remove_file(&dumped);
    let wrapper = vec![
        "valgrind".to_string(),
        "--quiet".into(),
        "--tool=callgrind".into(),
        format!("--callgrind-out-file={}", out.display()),
    ];
    let exe = std::env::current_exe()?;
    let args = vec![
        "run-one".to_string(),
        format!("b9:{objects}:{rounds}"),
        side.into(),
        "--kubeconfig-dir".into(),
        server.dir().display().to_string(),
    ];
    let mut session = Session::start_wrapped(&wrapper, &exe, &args)?;
    session.wait_for("READY", Duration::from_secs(900))?;
    callgrind_control("-z", session.pid())?;
    let writes = rt.block_on(load::load_paced(&loaders, objects, rounds, PACE))?;
    session.wait_for("DONE", Duration::from_secs(900))?;
    callgrind_control("-d", session.pid())?;
    session.send("stop")?;
    let mut v = session.finish()?;
    let text = std::fs::read_to_string(&dumped)
        .with_context(|| format!("reading {}", dumped.display()))?;
    let instructions = total_instructions(&text).context("no totals in the callgrind dump")?;
    if let Value::Object(map) = &mut v {
        map.insert("case".into(), label.into());
        map.insert("clusters".into(), clusters.into());
        map.insert("writes".into(), writes.into());
        map.insert("instructions".into(), instructions.into());
        map.insert("profile".into(), dumped.display().to_string().into());
    }
    Ok(v)
}

/// Parent: both cases, both sides (one run each: instruction counts hardly vary).
pub fn run(quick: bool, envtest_bin: &Path, work: &Path) -> Scenario {
    let mut s = Scenario::new(
        "B9",
        format!(
            "controller-side instructions per update (valgrind callgrind, controller process \
             only; emulator in its own process over HTTPS; updates paced at {PACE}/s so each \
             is reconciled): B1 = 1 cluster, B2 = 100 clusters, mcr vs kube-runtime"
        ),
        "B1: mcr <= kube-runtime; B2: mcr < kube-runtime",
    );
    if let Err(err) = summarize(quick, envtest_bin, work, &mut s) {
        s.error = Some(format!("{err:#}"));
    }
    s
}

fn summarize(quick: bool, bin: &Path, work: &Path, s: &mut Scenario) -> Result<()> {
    let mut met = true;
    for case in cases(quick) {
        let label = case.0;
        let mut per = Vec::new();
        for side in ["mcr", "kube-runtime"] {
            let v = one_run(case, side, bin, work)?;
            let updates = num(&v, "writes")?;
            let ir = num(&v, "instructions")? / updates;
            s.metric(
                &format!("{label} instructions per update, {side}"),
                Some(ir),
                "",
            );
            s.metric(
                &format!("{label} reconciles per update, {side}"),
                Some(num(&v, "reconciles")? / updates),
                "",
            );
            per.push(ir);
            s.runs.push(v);
        }
        let r = ratio(Some(per[0]), Some(per[1]));
        s.metric(
            &format!("{label} instruction ratio mcr / kube-runtime"),
            r,
            "",
        );
        met &= r.is_some_and(|r| if label == "B1" { r <= 1.0 } else { r < 1.0 });
    }
    s.goal_met = Some(met);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_callgrind_totals() {
        let text = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 123456\n";
        assert_eq!(total_instructions(text), Some(123456));
        assert_eq!(total_instructions("events: Ir\ntotals: 42\n"), Some(42));
        assert_eq!(total_instructions("events: Ir\n"), None);
        assert_eq!(parse_spec("100:20").unwrap(), (100, 20));
        assert!(parse_spec("100").is_err());
    }
}
