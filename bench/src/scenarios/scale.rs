//! B13: one fleet as large as one machine holds, over sharded replicas.
//!
//! 100,000 emulated HTTPS clusters (10 ConfigMaps each) are served by `mcr-envtest`
//! processes of 10,000 clusters each, every process on one port (`--shared-port`: a cluster
//! is the path prefix `/clusters/<name>` of its kubeconfig's server URL), so no cluster needs a
//! port or a listening socket of its own and no process nears its 20,000 open files. Ten
//! replicas of B11's controller (`mcr-bench run-one b11 <identity>`: the file provider over
//! the fleet, one ConfigMap controller, sharded mode at mcr's default Lease timings) split the
//! fleet; the host, where they keep their Leases, is an emulated cluster in the runner.
//!
//! Reported, from B11's measurement ([`shard::measure`]): time from start until every object
//! of every cluster was reconciled; peak RSS per replica and of all of them; host Lease writes
//! per second over a steady window; per-update latency p50 and p99 (write acknowledged to the
//! reconcile that saw it) under a steady 500 updates per second spread over the fleet; then a
//! replica joins (the clusters it takes and the time until it has reconciled every one of
//! them) and the replica owning most is killed with SIGKILL (the time until every one of its
//! clusters was reconciled by another).
//!
//! `--quick`: 2,000 clusters over 4 replicas, one server, short Lease timings (CI keeps it
//! working). `MCR_B13_CLUSTERS` and `MCR_B13_REPLICAS` change the full run's size (the curve
//! at 10,000, 25,000 and 50,000 clusters).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};
use serde_json::Value;

use crate::report::Scenario;
use crate::scenarios::shard::{self, FleetSetup, Layout, Load, Plan, Side};

/// Clusters and replicas of a run.
fn size(quick: bool) -> Result<(usize, usize)> {
    if quick {
        return Ok((2_000, 4));
    }
    let var = |name: &str, default: usize| -> Result<usize> {
        match std::env::var(name) {
            Ok(v) => v
                .parse()
                .with_context(|| format!("{name}={v:?} is not a count")),
            Err(_) => Ok(default),
        }
    };
    Ok((
        var("MCR_B13_CLUSTERS", 100_000)?,
        var("MCR_B13_REPLICAS", 10)?,
    ))
}

/// The renew period of the replicas' Leases (B11's: 1 s quick, mcr's default 5 s).
fn renew_period(quick: bool) -> Duration {
    Duration::from_secs(if quick { 1 } else { 5 })
}

fn one_run(
    quick: bool,
    clusters: usize,
    replicas: usize,
    envtest: &Path,
    work: &Path,
) -> Result<Value> {
    let rt = tokio::runtime::Runtime::new()?;
    let layout = Layout {
        per_server: if quick { 2_000 } else { 10_000 },
        shared_port: true,
        objects: 10,
    };
    let fleet = FleetSetup::start(&rt, clusters, envtest, work, "b13-fleet", layout)?;
    let plan = Plan {
        replicas,
        value: 1,
        join: true,
        kill: true,
        rolling: false,
        quiet: renew_period(quick) * 3,
        window: renew_period(quick) * if quick { 3 } else { 6 },
        deadline: Duration::from_secs(if quick { 300 } else { 3_600 }),
        identities: Vec::new(),
        load: Some(Load {
            rate: 500,
            duration: Duration::from_secs(if quick { 4 } else { 30 }),
        }),
    };
    let mut out = shard::measure(&rt, Side::Mcr { quick }, &plan, &fleet)?;
    out["scenario"] = "b13".into();
    Ok(out)
}

/// Parent: one run at the size of [`size`].
pub fn run(quick: bool, envtest: &Path, work: &Path) -> Scenario {
    let (clusters, replicas) = size(quick).unwrap_or((0, 0));
    let mut s = Scenario::new(
        "B13",
        format!(
            "{clusters} emulated HTTPS clusters (10 ConfigMaps each; mcr-envtest processes of \
             up to {} clusters on one port each) over {replicas} sharded replicas (B11's \
             controller, Lease timings {}); 500 updates/s spread over the fleet; a replica \
             joins, then one is killed",
            if quick { 2_000 } else { 10_000 },
            if quick {
                "4 s / 3 s / 1 s"
            } else {
                "15 s / 10 s / 5 s (defaults)"
            }
        ),
        "every cluster engaged and every object reconciled; <= 1 host Lease write per replica \
         per renew period; every cluster of a killed replica reconciled again within lease \
         duration + sync",
    );
    let result = size(quick)
        .and_then(|(clusters, replicas)| one_run(quick, clusters, replicas, envtest, work));
    match result {
        Ok(v) => {
            let f = |k: &str| v[k].as_f64();
            let kib = |k: &str| -> Vec<f64> {
                v[k].as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .collect()
            };
            s.metric(
                "time until every object of every cluster reconciled",
                f("all_reconciled_s"),
                "s",
            );
            let peak = kib("peak_rss_kib");
            s.metric(
                "peak RSS per replica (max)",
                peak.iter().copied().reduce(f64::max).map(|k| k / 1024.0),
                "MiB",
            );
            s.metric(
                "peak RSS, all replicas",
                Some(peak.iter().sum::<f64>() / 1024.0),
                "MiB",
            );
            // What the peer-ratio chart sets against Go's B8 bytes per cluster.
            s.metric(
                "peak RSS per cluster, all replicas",
                Some(peak.iter().sum::<f64>() / clusters.max(1) as f64),
                "KiB",
            );
            s.metric(
                "RSS per engaged cluster (all replicas, settled)",
                Some(kib("rss_kib").iter().sum::<f64>() / clusters.max(1) as f64),
                "KiB",
            );
            let writes = f("lease_writes_per_s");
            s.metric("host Lease writes", writes, "/s");
            s.metric("updates written", f("updates_per_s"), "/s");
            s.metric("per-update latency p50", f("latency_ms_p50"), "ms");
            s.metric("per-update latency p99", f("latency_ms_p99"), "ms");
            s.metric("clusters a joining replica takes", f("moved_on_join"), "");
            s.metric(
                "time until the joiner reconciled every one of them",
                f("join_handoff_s"),
                "s",
            );
            s.metric("clusters of the killed replica", f("killed_owned"), "");
            s.metric(
                "time until every one of them reconciled by another (kill -9)",
                f("reown_s"),
                "s",
            );
            let budget = replicas as f64 / renew_period(quick).as_secs_f64();
            // Lease duration 15 s (4 s quick) plus a generous sync allowance.
            let reown_bound = if quick { 4.0 + 20.0 } else { 15.0 + 60.0 };
            s.goal_met = Some(
                writes.is_some_and(|w| w <= budget * 1.05)
                    && f("reown_s").is_some_and(|r| r <= reown_bound),
            );
            s.runs.push(v);
        }
        Err(err) => {
            s.error = Some(format!("{err:#}"));
            s.goal_met = Some(false);
        }
    }
    s
}
