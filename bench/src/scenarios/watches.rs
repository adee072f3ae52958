//! B6: five controllers watching ConfigMaps in every cluster; how many watch requests each
//! cluster's API server received for configmaps (mcr shares one watch per cluster and type).

use std::time::Duration;

use anyhow::Result;
use mcr_envtest::{Fleet, TestCluster};
use serde_json::{Value, json};

use crate::{child, load, probe::Probe, report::Scenario, sides};

/// Requests per cluster for configmaps once every controller has reconciled a fresh update.
#[derive(Debug)]
pub struct Counts {
    /// `watch configmaps` per cluster.
    pub watches: Vec<u64>,
    /// `list configmaps` per cluster.
    pub lists: Vec<u64>,
}

/// Starts `controllers` mcr controllers on `clusters` in-process clusters, waits until each
/// controller has reconciled the initial objects *and* an update written afterwards in every
/// cluster (so every watch is live), and returns the request counts.
pub async fn measure(clusters: usize, controllers: usize) -> Result<Counts> {
    let host = TestCluster::start("host").await?;
    let fleet = Fleet::builder()
        .clusters(clusters)
        .name_prefix("member")
        .start()
        .await?;
    for c in fleet.clusters() {
        load::create_objects(c.client(), 2).await?;
    }
    let probes: Vec<Probe> = (0..controllers).map(|_| Probe::default()).collect();
    for p in &probes {
        p.expect(0, clusters * 2);
    }
    let members = fleet
        .clusters()
        .iter()
        .map(|c| (c.name().to_string(), c.client()))
        .collect();
    let running = sides::start_mcr(host.client(), members, probes.clone()).await?;
    let deadline = Duration::from_secs(120);
    for p in &probes {
        p.wait_done("initial objects", deadline).await?;
    }
    // An update delivered to every controller proves the watches are established.
    for p in &probes {
        p.expect(1, clusters);
    }
    for c in fleet.clusters() {
        load::load_cluster(c.client(), 1, 1, 1).await?;
    }
    for p in &probes {
        p.wait_done("an update through the watch", deadline).await?;
    }
    let counts = Counts {
        watches: fleet
            .clusters()
            .iter()
            .map(|c| c.request_count("watch", "configmaps"))
            .collect(),
        lists: fleet
            .clusters()
            .iter()
            .map(|c| c.request_count("list", "configmaps"))
            .collect(),
    };
    running.stop().await;
    Ok(counts)
}

fn sizes(quick: bool) -> (usize, usize) {
    if quick { (20, 5) } else { (100, 5) }
}

/// Child: runs B6.
pub async fn child(quick: bool) -> Result<Value> {
    let (clusters, controllers) = sizes(quick);
    let c = measure(clusters, controllers).await?;
    let min = |v: &[u64]| v.iter().copied().min().unwrap_or(0);
    let max = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
    Ok(json!({
        "clusters": clusters, "controllers": controllers,
        "watch_min": min(&c.watches), "watch_max": max(&c.watches),
        "list_min": min(&c.lists), "list_max": max(&c.lists),
    }))
}

/// Parent: one run of B6.
pub fn run(quick: bool) -> Scenario {
    let (clusters, controllers) = sizes(quick);
    let mut s = Scenario::new(
        "B6",
        format!("{controllers} controllers watching ConfigMaps in {clusters} clusters"),
        "exactly 1 watch per cluster per type",
    );
    let mut args = vec!["b6".to_string(), "mcr".to_string()];
    if quick {
        args.push("--quick".into());
    }
    match child::run_one(&args) {
        Ok(v) => {
            let get = |k: &str| v.get(k).and_then(Value::as_f64);
            s.metric("configmap watches per cluster (min)", get("watch_min"), "");
            s.metric("configmap watches per cluster (max)", get("watch_max"), "");
            s.metric("configmap lists per cluster (max)", get("list_max"), "");
            s.goal_met = Some(get("watch_min") == Some(1.0) && get("watch_max") == Some(1.0));
            s.runs.push(v);
        }
        Err(err) => s.error = Some(format!("{err:#}")),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn five_controllers_share_one_configmap_watch_per_cluster() {
        let counts = measure(4, 5).await.unwrap();
        assert_eq!(
            counts.watches,
            vec![1, 1, 1, 1],
            "watch requests per cluster"
        );
        assert!(
            counts.lists.iter().all(|&n| n <= 1),
            "lists: {:?}",
            counts.lists
        );
    }
}
