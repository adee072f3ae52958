//! Shared by the example's tests: the `Cluster` CRD they install on the management cluster.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use mcr_provider_capi::CapiVersion;
use serde_json::json;

/// A schemaless `clusters.cluster.x-k8s.io` CRD serving v1beta2 (no status subresource, so a
/// test sets `status` when it creates a `Cluster`), installed with `admin` unless already
/// there (a real management cluster); returns once `Cluster`s are served in `namespace`.
pub async fn install_cluster_crd(admin: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "clusters.cluster.x-k8s.io"},
        "spec": {
            "group": "cluster.x-k8s.io", "scope": "Namespaced",
            "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster", "listKind": "ClusterList"},
            "versions": [{"name": "v1beta2", "served": true, "storage": true, "schema": schema}],
        },
    }))?;
    // Already installed (a real management cluster) is fine.
    let _ = Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &crd)
        .await;
    let clusters = clusters(admin, namespace);
    example_support::wait_for("the Cluster CRD to be served", || async {
        clusters.list(&ListParams::default()).await.is_ok()
    })
    .await
}

/// The v1beta2 `Cluster`s of `namespace`.
pub fn clusters(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &CapiVersion::V1Beta2.api_resource(),
    )
}

/// A v1beta2 `Cluster` named `name` whose control plane is initialized (ready).
pub fn ready_cluster(name: &str) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": name},
        "status": {"initialization": {"controlPlaneInitialized": true}},
    }))?)
}
