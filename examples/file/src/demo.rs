//! The scripted demo on an embedded fleet: two clusters, then a third one joins.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_envtest::{Fleet, TestCluster};
use tokio_util::sync::CancellationToken;

use crate::{ANNOTATION, LABEL};

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
        if start.elapsed() > Duration::from_secs(30) {
            bail!(
                "default/demo in {} was not reconciled within 30s",
                cluster.name()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts two emulated clusters with kubeconfig files, runs the controller over them, adds
/// a third cluster, and checks every labelled ConfigMap gets stamped.
pub async fn run() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fleet = Fleet::builder()
        .clusters(2)
        .kubeconfig_dir(dir.path())
        .start()
        .await?;
    println!(
        "embedded fleet: {} (kubeconfigs in {})",
        fleet.names().join(", "),
        dir.path().display()
    );
    let host = TestCluster::start("host").await?;
    let mgr = crate::manager(host.client(), dir.path().to_path_buf())?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });

    let result = async {
        fleet.add("cluster-3").await?;
        println!("cluster-3 joined (its kubeconfig file appeared)");
        for cluster in fleet.clusters() {
            let stamp = wait_stamped(cluster).await?;
            println!(
                "{}: default/demo stamped {ANNOTATION}={stamp}",
                cluster.name()
            );
        }
        anyhow::Ok(())
    }
    .await;
    token.cancel();
    running.await??;
    result?;
    println!("done: every cluster's labelled ConfigMap was reconciled");
    Ok(())
}
