//! The embedded demo: a garden with two Shoots whose certificates live a few seconds.

use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use mcr_core::Provider;
use mcr_core::credentials::RenewalOptions;
use mcr_envtest::TestCluster;
use mcr_envtest::garden::Garden;
use mcr_provider_gardener::{GardenerProvider, Namespaces, Options};
use tokio_util::sync::CancellationToken;

use crate::{ANNOTATION, LABEL};

const DEADLINE: Duration = Duration::from_secs(60);
const SHOOTS: [&str; 2] = ["alpha", "beta"];

async fn stamp_and_wait(shoot: &TestCluster, cluster: &str, name: &str) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(shoot.https_client().await?, "default");
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {LABEL: "true"}}
    }))?;
    api.create(&PostParams::default(), &cm).await?;
    let start = tokio::time::Instant::now();
    loop {
        let cm = api.get(name).await?;
        if cm.annotations().get(ANNOTATION).map(String::as_str) == Some(cluster) {
            println!("{cluster}: {name} reconciled");
            return Ok(());
        }
        ensure!(
            start.elapsed() < DEADLINE,
            "{cluster}: {name} was not reconciled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the demo: engage, reconcile, renew twice in place, reconcile again, no relist.
pub async fn run() -> Result<()> {
    println!("no --garden-kubeconfig: an embedded garden, credentials valid for 4 s");
    let garden = Garden::start(Duration::from_secs(4)).await?;
    let mut shoots = Vec::new();
    for name in SHOOTS {
        let member = TestCluster::start_https(format!("shoot-{name}")).await?;
        garden.add_shoot("garden-demo", name, &member).await?;
        shoots.push((format!("garden-demo/{name}"), member));
    }
    let host = TestCluster::start("host").await?;
    let provider = GardenerProvider::new(
        garden.cluster().client(),
        Options {
            namespaces: Namespaces::One("garden-demo".into()),
            renewal: RenewalOptions {
                fraction: 0.5,
                ..RenewalOptions::default()
            },
            ..Options::default()
        },
    );
    let mgr = crate::manager(host.client(), provider.clone())?;
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });

    for (cluster, member) in &shoots {
        stamp_and_wait(member, cluster, "before-renewal").await?;
    }
    let lists: Vec<u64> = shoots
        .iter()
        .map(|(_, m)| m.request_count("list", "configmaps"))
        .collect();
    for (cluster, _) in &shoots {
        let start = tokio::time::Instant::now();
        loop {
            let member = provider.get(&cluster.as_str().into()).await?;
            let renewals = member.credentials().map_or(0, |c| c.status().renewals);
            if renewals >= 2 {
                println!("{cluster}: credentials renewed in place {renewals} times");
                break;
            }
            ensure!(start.elapsed() < DEADLINE, "{cluster}: no renewal");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for (cluster, member) in &shoots {
        stamp_and_wait(member, cluster, "after-renewal").await?;
    }
    for ((cluster, member), before) in shoots.iter().zip(lists) {
        let relists = member.request_count("list", "configmaps") - before;
        println!("{cluster}: relists after renewals: {relists}");
        ensure!(relists == 0, "{cluster} relisted");
    }
    println!(
        "kubeconfig requests to the garden: {}",
        garden.kubeconfig_requests()
    );
    stop.cancel();
    run.await??;
    Ok(())
}
