//! The scripted demo: an emulated host and two members; copy, drift, delete.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use mcr_envtest::{Fleet, TestCluster};
use tokio_util::sync::CancellationToken;

use crate::sync::SYNC_LABEL;

async fn until(what: &str, mut check: impl AsyncFnMut() -> Result<bool>) -> Result<()> {
    let start = tokio::time::Instant::now();
    while !check().await? {
        if start.elapsed() > Duration::from_secs(30) {
            bail!("{what} did not happen within 30s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn value(cm: Option<ConfigMap>) -> Option<String> {
    cm?.data?.get("color").cloned()
}

/// Runs the sync controller over an embedded fleet and walks through its three behaviours.
pub async fn run() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let host = TestCluster::start("host").await?;
    let fleet = Fleet::builder()
        .clusters(2)
        .name_prefix("member")
        .kubeconfig_dir(dir.path())
        .start()
        .await?;
    let mgr = crate::sync::manager(host.client(), dir.path().to_path_buf(), Vec::new())?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });

    let result = async {
        let source: Api<ConfigMap> = Api::namespaced(host.client(), "default");
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("settings".into()),
                labels: Some(BTreeMap::from([(SYNC_LABEL.to_owned(), "true".to_owned())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("color".to_owned(), "blue".to_owned())])),
            ..ConfigMap::default()
        };
        source.create(&PostParams::default(), &cm).await?;
        println!("host: created default/settings (color=blue, {SYNC_LABEL}=true)");
        let mut members = Vec::new();
        for member in fleet.clusters() {
            members.push((
                member.name(),
                Api::<ConfigMap>::namespaced(member.https_client().await?, "default"),
            ));
        }
        for (name, api) in &members {
            until(&format!("the copy in {name}"), async || {
                Ok(value(api.get_opt("settings").await?).as_deref() == Some("blue"))
            })
            .await?;
            println!("{name}: default/settings copied (color=blue)");
        }

        let (drifted, api) = &members[0];
        let edit = serde_json::json!({ "data": { "color": "red" } });
        api.patch("settings", &PatchParams::default(), &Patch::Merge(&edit))
            .await?;
        println!("{drifted}: someone set color=red on the copy");
        until(&format!("the drift in {drifted} reverted"), async || {
            Ok(value(api.get_opt("settings").await?).as_deref() == Some("blue"))
        })
        .await?;
        println!("{drifted}: drift reverted (color=blue again)");

        source.delete("settings", &DeleteParams::default()).await?;
        println!("host: deleted default/settings");
        for (name, api) in &members {
            until(&format!("the copy in {name} deleted"), async || {
                Ok(api.get_opt("settings").await?.is_none())
            })
            .await?;
            println!("{name}: copy deleted");
        }
        anyhow::Ok(())
    }
    .await;
    token.cancel();
    running.await??;
    result?;
    println!("done");
    Ok(())
}
