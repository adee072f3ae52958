//! B3: a manager already running 1,000 clusters; 200 more are added one by one through the
//! `ClustersProvider`. Measures the time from `provider.add` to the first reconcile in the new
//! cluster.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use mcr_core::Cluster;
use mcr_envtest::{Fleet, TestCluster};
use serde_json::{Value, json};

use crate::{
    child, load,
    probe::Probe,
    report::Scenario,
    sides,
    stats::{ms, percentile},
};

fn sizes(quick: bool) -> (usize, usize) {
    if quick { (100, 20) } else { (1000, 200) }
}

/// Child: runs B3 (mcr only).
pub async fn child(quick: bool) -> Result<Value> {
    let (existing, added) = sizes(quick);
    let host = TestCluster::start("host").await?;
    let fleet = Fleet::builder()
        .clusters(existing)
        .name_prefix("member")
        .start()
        .await?;
    for c in fleet.clusters() {
        load::create_objects(c.client(), 1).await?;
    }
    let probe = Probe::default();
    probe.expect(0, existing);
    let members = fleet
        .clusters()
        .iter()
        .map(|c| (c.name().to_string(), c.client()))
        .collect();
    let started = Instant::now();
    let running = sides::start_mcr(host.client(), members, vec![probe.clone()]).await?;
    probe
        .wait_done("the first clusters", Duration::from_secs(300))
        .await?;
    let warmup = started.elapsed();
    let provider = running
        .provider
        .clone()
        .context("mcr side has a provider")?;

    let mut late = Vec::with_capacity(added);
    let mut to_first = Vec::with_capacity(added);
    let mut add_calls = Vec::with_capacity(added);
    for i in 0..added {
        let name = format!("late-{i}");
        let tc = TestCluster::start(name.clone()).await?;
        load::create_objects(tc.client(), 1).await?;
        let t0 = Instant::now();
        provider
            .add(Cluster::new(name.clone(), tc.client()))
            .await?;
        add_calls.push(t0.elapsed());
        probe
            .wait(
                "first reconcile in a new cluster",
                Duration::from_secs(30),
                |p| p.first_seen(&name).is_some(),
            )
            .await?;
        let first = probe.first_seen(&name).context("seen")?;
        to_first.push(first.saturating_duration_since(t0));
        late.push(tc);
    }
    running.stop().await;
    let p = |xs: &[Duration], q| percentile(xs, q).map(ms);
    Ok(json!({
        "existing": existing, "added": added, "warmup_seconds": warmup.as_secs_f64(),
        "p50_ms": p(&to_first, 50.0), "p99_ms": p(&to_first, 99.0),
        "max_ms": p(&to_first, 100.0),
        "add_call_p50_ms": p(&add_calls, 50.0), "add_call_p99_ms": p(&add_calls, 99.0),
    }))
}

/// Parent: one run of B3.
pub fn run(quick: bool) -> Scenario {
    let (existing, added) = sizes(quick);
    let mut s = Scenario::new(
        "B3",
        format!(
            "manager running {existing} clusters; {added} more added one by one (provider.add -> first reconcile)"
        ),
        "p50 <= 20 ms",
    );
    let mut args = vec!["b3".to_string(), "mcr".to_string()];
    if quick {
        args.push("--quick".into());
    }
    match child::run_one(&args) {
        Ok(v) => {
            let get = |k: &str| v.get(k).and_then(Value::as_f64);
            s.metric("time to first reconcile p50", get("p50_ms"), "ms");
            s.metric("time to first reconcile p99", get("p99_ms"), "ms");
            s.metric(
                "provider.add (start, sync, engage) p50",
                get("add_call_p50_ms"),
                "ms",
            );
            s.metric(
                &format!("start of the first {existing} clusters"),
                get("warmup_seconds"),
                "s",
            );
            s.goal_met = get("p50_ms").map(|p| p <= 20.0);
            s.runs.push(v);
        }
        Err(err) => s.error = Some(format!("{err:#}")),
    }
    s
}
