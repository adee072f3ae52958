//! The scripted demo: an emulated hub with the ClusterProfile CRD and two HTTPS members whose
//! credentials come from a credential plugin (this program in `credential-plugin` mode).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use mcr_envtest::TestCluster;
use mcr_provider_cluster_inventory::{
    AccessProviders, ClusterProfile, EXEC_EXTENSION, Options, Strategy,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{ANNOTATION, LABEL};

/// The minimal ClusterProfile CRD the tests use too.
pub const CRD: &str = include_str!(
    "../../../crates/mcr-provider-cluster-inventory/testdata/clusterprofiles-crd.json"
);

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

/// The profile a cluster manager would publish for `member`: healthy, reachable through the
/// access provider `demo-tokens`, with the plugin's cluster config naming the member.
fn profile(member: &TestCluster) -> Result<DynamicObject> {
    let kc = member.kubeconfig().context("members serve HTTPS")?;
    let ca = kc.clusters[0]
        .cluster
        .as_ref()
        .and_then(|c| c.certificate_authority_data.clone());
    Ok(serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": member.name(), "labels": {"x-k8s.io/cluster-manager": "demo"}},
        "spec": {"displayName": member.name(), "clusterManager": {"name": "demo"}},
        "status": {
            "conditions": [{"type": "ControlPlaneHealthy", "status": "True", "reason": "Demo"}],
            "accessProviders": [{"name": "demo-tokens", "cluster": {
                "server": member.url(),
                "certificate-authority-data": ca,
                "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": member.name()}}],
            }}],
        },
    }))?)
}

/// Starts the hub and members, writes the members' tokens and the provider file, runs the
/// controller until each member's labelled ConfigMap is stamped, then deletes one profile and
/// checks its cluster is let go.
pub async fn run() -> Result<()> {
    let hub = TestCluster::start("hub").await?;
    let crd: CustomResourceDefinition = serde_json::from_str(CRD)?;
    Api::<CustomResourceDefinition>::all(hub.client())
        .create(&PostParams::default(), &crd)
        .await?;
    let profiles: Api<DynamicObject> =
        Api::namespaced_with(hub.client(), "default", &ClusterProfile::api_resource());
    until("ClusterProfiles served", async || {
        Ok(profiles.list(&ListParams::default()).await.is_ok())
    })
    .await?;
    let members = [
        TestCluster::start_https("member-1").await?,
        TestCluster::start_https("member-2").await?,
    ];

    // What an operator ships: the tokens the plugin reads, and the provider file.
    let dir = tempfile::tempdir()?;
    let tokens = dir.path().join("tokens");
    std::fs::create_dir(&tokens)?;
    for member in &members {
        std::fs::write(tokens.join(member.name()), member.token())?;
    }
    let program = std::env::current_exe()?;
    let file = json!({"providers": [{
        "name": "demo-tokens",
        "execConfig": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": program,
            "args": ["credential-plugin", "--token-dir", tokens],
            "provideClusterInfo": true,
        },
    }]});
    let file_path = dir.path().join("clusterprofile-provider-file.json");
    std::fs::write(&file_path, serde_json::to_vec_pretty(&file)?)?;
    // The members listen on 127.0.0.1: the plugin's tokens go there and nowhere else.
    let providers = AccessProviders::from_file(&file_path)?.servers(["127.0.0.1"]);

    let opts = Options {
        label_selector: Some("x-k8s.io/cluster-manager=demo".into()),
        ..Options::new(Strategy::AccessProviders(Arc::new(providers)))
    };
    let mgr = crate::manager(hub.client(), opts)?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });

    for member in &members {
        profiles
            .create(&PostParams::default(), &profile(member)?)
            .await?;
        let cms: Api<ConfigMap> = Api::namespaced(member.client(), "default");
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "demo", "labels": {LABEL: "true"}},
        }))?;
        cms.create(&PostParams::default(), &cm).await?;
        let expected = format!("default/{}", member.name());
        until("the ConfigMap to be stamped", async || {
            let cm = cms.get("demo").await?;
            Ok(cm.annotations().get(ANNOTATION) == Some(&expected))
        })
        .await?;
        println!(
            "{}: ConfigMap demo stamped by cluster {expected}",
            member.name()
        );
    }

    profiles
        .delete("member-2", &DeleteParams::default())
        .await?;
    until("member-2 to leave", async || {
        Ok(mgr.cluster("default/member-2").await.is_err())
    })
    .await?;
    println!("member-2: profile deleted, cluster disengaged");

    token.cancel();
    running.await??;
    Ok(())
}
