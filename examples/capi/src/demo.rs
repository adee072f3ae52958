//! The scripted demo: an emulated management cluster serving a minimal Cluster API `Cluster`
//! CRD, two emulated workload clusters, and their `Cluster` objects and kubeconfig Secrets.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;
use mcr_provider_capi::{CLUSTER_NAME_LABEL, CapiVersion, Options};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{ANNOTATION, LABEL};

const NAMESPACE: &str = "fleet";

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

/// A minimal `clusters.cluster.x-k8s.io` CRD serving v1beta1 and v1beta2 (no schema).
pub async fn install_crd(host: kube::Client) -> Result<()> {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "clusters.cluster.x-k8s.io"},
        "spec": {
            "group": "cluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster", "listKind": "ClusterList"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema},
                {"name": "v1beta2", "served": true, "storage": true, "schema": schema},
            ],
        },
    }))?;
    Api::<CustomResourceDefinition>::all(host)
        .create(&PostParams::default(), &crd)
        .await?;
    Ok(())
}

/// The status fields that make a Cluster ready in either version.
fn status(ready: bool) -> serde_json::Value {
    json!({
        "initialization": {"controlPlaneInitialized": ready},
        "controlPlaneReady": ready,
        "phase": if ready { "Provisioned" } else { "Provisioning" },
    })
}

/// Creates a not-ready `Cluster` for `workload` and its kubeconfig Secret.
async fn create_cluster(
    host: &kube::Client,
    version: CapiVersion,
    workload: &TestCluster,
) -> Result<()> {
    let name = workload.name();
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(host.clone(), NAMESPACE, &version.api_resource());
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("cluster.x-k8s.io/{}", version.as_str()),
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {},
        "status": status(false),
    }))?;
    until("the Cluster CRD to be served", async || {
        Ok(clusters.create(&PostParams::default(), &obj).await.is_ok())
    })
    .await?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(format!("{name}-kubeconfig")),
            labels: Some(BTreeMap::from([(
                CLUSTER_NAME_LABEL.to_owned(),
                name.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("cluster.x-k8s.io/secret".into()),
        data: Some(BTreeMap::from([(
            "value".to_owned(),
            ByteString(
                workload
                    .kubeconfig_yaml()
                    .context("workload clusters serve HTTPS")?
                    .into_bytes(),
            ),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(host.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await?;
    println!(
        "management: Cluster {NAMESPACE}/{name} (not ready) and Secret {NAMESPACE}/{name}-kubeconfig"
    );
    Ok(())
}

/// Creates the Clusters not ready, marks them ready one by one and checks each workload
/// cluster's labelled ConfigMap gets stamped, then deletes one Cluster and checks it is let go.
pub async fn run(opts: Options) -> Result<()> {
    if !opts.namespaces.contains(NAMESPACE) {
        bail!(
            "the demo's Clusters live in namespace {NAMESPACE:?}, outside {:?}",
            opts.namespaces
        );
    }
    let version = opts.version;
    let mgmt = TestCluster::start("management").await?;
    let host = mgmt.client();
    install_crd(host.clone()).await?;
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NAMESPACE.into());
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let workloads = [
        TestCluster::start_https("prod-1").await?,
        TestCluster::start_https("prod-2").await?,
    ];
    for workload in &workloads {
        create_cluster(&host, version, workload).await?;
    }

    let mgr = crate::manager(host.clone(), opts)?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });
    let result = async {
        let clusters: Api<DynamicObject> =
            Api::namespaced_with(host.clone(), NAMESPACE, &version.api_resource());
        for workload in &workloads {
            let api: Api<ConfigMap> = Api::namespaced(workload.client(), "default");
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some("demo".into());
            cm.metadata.labels = Some(BTreeMap::from([(LABEL.to_owned(), "true".to_owned())]));
            api.create(&PostParams::default(), &cm).await?;
            let patch = json!({"status": status(true)});
            clusters
                .patch(
                    workload.name(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            let expected = format!("{NAMESPACE}/{}", workload.name());
            println!("management: Cluster {expected} is ready");
            until(
                &format!("stamping default/demo in {expected}"),
                async || {
                    let cm = api.get("demo").await?;
                    Ok(cm.annotations().get(ANNOTATION) == Some(&expected))
                },
            )
            .await?;
            println!(
                "{}: default/demo stamped {ANNOTATION}={expected}",
                workload.name()
            );
        }
        clusters.delete("prod-2", &DeleteParams::default()).await?;
        until("letting fleet/prod-2 go", async || {
            Ok(!mgr
                .engaged_clusters()
                .iter()
                .any(|c| c.as_str() == "fleet/prod-2"))
        })
        .await?;
        println!("management: Cluster {NAMESPACE}/prod-2 deleted; the provider let it go");
        anyhow::Ok(())
    }
    .await;
    token.cancel();
    running.await??;
    result?;
    println!("done");
    Ok(())
}
