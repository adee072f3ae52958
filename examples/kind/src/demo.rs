//! The scripted demo, without kind or Docker: emulated HTTPS clusters behind a stand-in `kind`.
//! Two `fleet-*` clusters and a `dev` cluster exist; `fleet-3` is created, `fleet-1` deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::Manager;
use mcr_provider_kind::Options;
use tokio_util::sync::CancellationToken;

use crate::{ANNOTATION, LABEL};

const DEADLINE: Duration = Duration::from_secs(30);

/// Creates the labelled ConfigMap `default/demo` and waits for the controller's stamp.
async fn wait_stamped(cluster: &TestCluster) -> Result<String> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.https_client().await?, "default");
    let labelled = ConfigMap {
        metadata: ObjectMeta {
            name: Some("demo".into()),
            labels: Some(BTreeMap::from([(LABEL.to_owned(), "true".to_owned())])),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &labelled).await?;
    let start = tokio::time::Instant::now();
    loop {
        let cm = api.get("demo").await?;
        if let Some(stamp) = cm.annotations().get(ANNOTATION) {
            return Ok(stamp.clone());
        }
        if start.elapsed() > DEADLINE {
            bail!(
                "default/demo in {} was not reconciled within 30s",
                cluster.name()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the manager's engaged clusters are exactly `names`.
async fn wait_engaged(mgr: &Manager, names: &[&str]) -> Result<()> {
    let start = tokio::time::Instant::now();
    loop {
        let engaged = mgr.engaged_clusters();
        if engaged.iter().map(|n| n.as_str()).eq(names.iter().copied()) {
            return Ok(());
        }
        if start.elapsed() > DEADLINE {
            bail!("engaged clusters are {engaged:?}, expected {names:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the demo and checks its effects; fails if one does not happen.
pub async fn run() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let kubeconfigs = dir.path().join("clusters");
    let mut fleet = Fleet::builder()
        .clusters(2)
        .name_prefix("fleet")
        .kubeconfig_dir(&kubeconfigs)
        .start()
        .await?;
    let dev = TestCluster::start_https("dev").await?;
    dev.write_kubeconfig(&kubeconfigs.join("dev.kubeconfig"))?;
    let kind = crate::fake_kind::write(&dir.path().join("kind"), &kubeconfigs)?;
    println!(
        "embedded kind clusters: {}, dev (stand-in kind at {})",
        fleet.names().join(", "),
        kind.display()
    );

    let host = TestCluster::start("host").await?;
    let opts = Options {
        prefix: Some("fleet-".into()),
        kind_bin: Some(kind),
        poll_interval: Duration::from_millis(200),
        ..Options::default()
    };
    let mgr = crate::manager(host.client(), opts)?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });

    let result = async {
        wait_engaged(&mgr, &["fleet-1", "fleet-2"]).await?;
        println!("fleet-1 and fleet-2 joined; dev does not match the prefix fleet-");
        fleet.add("fleet-3").await?;
        wait_engaged(&mgr, &["fleet-1", "fleet-2", "fleet-3"]).await?;
        println!("fleet-3 joined (`kind create cluster --name fleet-3`)");
        for cluster in fleet.clusters() {
            let stamp = wait_stamped(cluster).await?;
            println!(
                "{}: default/demo stamped {ANNOTATION}={stamp}",
                cluster.name()
            );
        }
        // `kind delete cluster` removes it from kind's list; the stand-in lists kubeconfig files.
        std::fs::remove_file(kubeconfigs.join("fleet-1.kubeconfig"))?;
        wait_engaged(&mgr, &["fleet-2", "fleet-3"]).await?;
        println!("fleet-1 left (`kind delete cluster --name fleet-1`)");
        anyhow::Ok(())
    }
    .await;
    token.cancel();
    running.await??;
    result?;
    println!("done: every fleet cluster's labelled ConfigMap was reconciled");
    Ok(())
}
