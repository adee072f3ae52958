//! B12: mcr's sharded mode against Go multicluster-runtime's sharded coordinator, on one fleet.
//!
//! One fleet (B11's: `mcr-envtest` processes over HTTPS, one ConfigMap per cluster) is served
//! for both sides. First 3 replicas of the Go peer in `-sharded` mode
//! (`pkg/manager/coordinator/sharded` of multicluster-runtime v0.24.1 at its defaults: a peer
//! Lease per replica renewed every 10 s with a 30 s TTL, HRW assignment recomputed every 5 s, a
//! fence Lease per cluster of 20 s renewed every 10 s), then 3 mcr replicas (B11's child,
//! mcr's default timings: lease 15 s, renew period 5 s), each side with a fresh host cluster in
//! the runner whose request counters give the Lease writes. Both are driven by B11's driver
//! ([`shard::measure`]): time from start until every object was reconciled, RSS of each
//! replica once settled, Lease writes per second over a steady window, per-update latency and
//! CPU per update (one write per object), and the time after a SIGKILL of the replica owning
//! most until every cluster it had reconciled last was reconciled by a survivor.

use std::{path::Path, time::Duration};

use anyhow::{Result, bail};
use serde_json::Value;

use crate::{
    report::Scenario,
    scenarios::{
        compare::ratio,
        go_peer::Bins,
        shard::{self, FleetSetup, Plan, Side},
    },
};

/// Member clusters of the fleet.
fn clusters(quick: bool) -> usize {
    if quick { 12 } else { 1_000 }
}

/// Replicas per side.
const REPLICAS: usize = 3;

/// The replicas' identities on both sides: names like a Deployment's pods (the hostname, which
/// is both coordinators' default identity). Go's HRW scores FNV-1a of `<cluster>|<peer>`, which
/// barely mixes a difference in the last characters: with `replica-1` .. `replica-3` it gave
/// one replica 954 of the 1,000 clusters, another 46 and the third none (measured 2026-11-26).
const IDENTITIES: [&str; REPLICAS] = [
    "ctrl-7d9f8b6c4-ieqh5",
    "ctrl-7d9f8b6c4-24yng",
    "ctrl-7d9f8b6c4-5by1a",
];

/// The run of one side: both sides at their default timings, a steady window of 30 s (3 of
/// Go's renew periods, 6 of mcr's), settled after 15 s without an ownership change (3 of Go's
/// synchronization ticks, 3 of mcr's renew periods).
fn plan(value: u64) -> Plan {
    Plan {
        replicas: REPLICAS,
        value,
        join: false,
        kill: true,
        rolling: false,
        quiet: Duration::from_secs(15),
        window: Duration::from_secs(30),
        deadline: Duration::from_secs(300),
        identities: IDENTITIES.iter().map(|s| s.to_string()).collect(),
        load: None,
    }
}

/// Parent: Go's replicas, then mcr's, on the same fleet.
pub fn run(quick: bool, bins: &Bins, work: &Path) -> Scenario {
    let n = clusters(quick);
    let mut s = Scenario::new(
        "B12",
        format!(
            "sharded mode against Go multicluster-runtime v0.24.1's sharded coordinator: \
             {n} clusters (1 ConfigMap each, emulator in separate mcr-envtest processes over \
             HTTPS), {REPLICAS} Go replicas (bench/go-peer -sharded, its defaults: peer Lease \
             TTL 30 s renewed every 10 s, a fence Lease per cluster of 20 s renewed every 10 s) \
             then {REPLICAS} mcr replicas (B11's, lease 15 s, renew period 5 s) on the same \
             fleet; host = an emulated cluster in the runner (its request counters)"
        ),
        "host Lease writes per second mcr <= 0.1 x Go's; time to re-own a killed replica's \
         clusters mcr <= Go's",
    );
    match both(quick, bins, work, &mut s) {
        Ok(met) => s.goal_met = Some(met),
        Err(err) => s.error = Some(format!("{err:#}")),
    }
    s
}

fn both(quick: bool, bins: &Bins, work: &Path, s: &mut Scenario) -> Result<bool> {
    if !bins.go_peer.exists() {
        bail!(
            "{} not found: `cargo xtask bench` builds it (needs Go)",
            bins.go_peer.display()
        );
    }
    let rt = tokio::runtime::Runtime::new()?;
    let fleet = FleetSetup::start(
        &rt,
        clusters(quick),
        &bins.envtest,
        work,
        "b12-fleet",
        shard::ONE_OBJECT,
    )?;
    let mut go = shard::measure(
        &rt,
        Side::Go {
            bin: bins.go_peer.clone(),
        },
        &plan(1),
        &fleet,
    )?;
    go["scenario"] = "b12".into();
    go["side"] = "go".into();
    let mut mcr = shard::measure(&rt, Side::Mcr { quick: false }, &plan(2), &fleet)?;
    mcr["scenario"] = "b12".into();
    mcr["side"] = "mcr".into();
    let met = summarize(&mcr, &go, s);
    s.runs.push(go);
    s.runs.push(mcr);
    Ok(met)
}

/// The largest of a run's per-replica RSS figures, in MiB.
fn max_rss_mib(v: &Value) -> Option<f64> {
    v["rss_kib"]
        .as_array()?
        .iter()
        .filter_map(Value::as_f64)
        .reduce(f64::max)
        .map(|k| k / 1024.0)
}

/// Prints both sides' figures and their ratios; returns whether both goals were met.
fn summarize(mcr: &Value, go: &Value, s: &mut Scenario) -> bool {
    let pair = |s: &mut Scenario, what: &str, key: &str, unit: &str| {
        let (m, g) = (mcr[key].as_f64(), go[key].as_f64());
        s.metric(&format!("{what} mcr"), m, unit);
        s.metric(&format!("{what} Go"), g, unit);
        let r = ratio(m, g);
        s.metric(&format!("{what} ratio mcr / Go"), r, "");
        r
    };
    let writes = pair(s, "host Lease writes (steady)", "lease_writes_per_s", "/s");
    pair(
        s,
        "start to every object reconciled",
        "all_reconciled_s",
        "s",
    );
    let (rm, rg) = (max_rss_mib(mcr), max_rss_mib(go));
    s.metric("RSS per replica (max) mcr", rm, "MiB");
    s.metric("RSS per replica (max) Go", rg, "MiB");
    s.metric("RSS per replica (max) ratio mcr / Go", ratio(rm, rg), "");
    pair(s, "per-update latency p50", "latency_ms_p50", "ms");
    pair(s, "per-update latency p99", "latency_ms_p99", "ms");
    pair(s, "CPU per update (3 replicas)", "cpu_us_per_update", "us");
    s.metric(
        "clusters the killed replica owned mcr",
        mcr["killed_owned"].as_f64(),
        "",
    );
    s.metric(
        "clusters the killed replica owned Go",
        go["killed_owned"].as_f64(),
        "",
    );
    let handoff = pair(s, "handoff after kill -9", "reown_s", "s");
    s.metric(
        "host Lease writes during the handoff mcr",
        mcr["reown_lease_writes"].as_f64(),
        "",
    );
    s.metric(
        "host Lease writes during the handoff Go",
        go["reown_lease_writes"].as_f64(),
        "",
    );
    writes.is_some_and(|w| w <= 0.1) && handoff.is_some_and(|h| h <= 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn goals_are_judged_on_the_ratios() {
        let side = |writes: f64, reown: f64| json!({"lease_writes_per_s": writes, "reown_s": reown, "rss_kib": [1024, 2048]});
        let mut s = Scenario::new("B12", "t", "g");
        assert!(summarize(&side(0.6, 17.0), &side(100.0, 40.0), &mut s));
        assert_eq!(max_rss_mib(&side(0.0, 0.0)), Some(2.0));
        let mut s = Scenario::new("B12", "t", "g");
        assert!(!summarize(&side(20.0, 17.0), &side(100.0, 40.0), &mut s));
        let mut s = Scenario::new("B12", "t", "g");
        assert!(!summarize(&side(0.6, 41.0), &side(100.0, 40.0), &mut s));
        let mut s = Scenario::new("B12", "t", "g");
        assert!(!summarize(&json!({}), &side(100.0, 40.0), &mut s));
    }
}
