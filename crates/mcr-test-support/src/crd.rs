//! CustomResourceDefinitions in tests: installing one and waiting until it is served, and the
//! Cluster API `Cluster` kind that the Cluster API provider and its example read.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use mcr_envtest::wait::eventually_async;
use serde_json::{Value, json};

use crate::WAIT;

/// Creates `crd` with `admin` and waits, up to [`WAIT`], until every version it serves answers
/// a cluster-wide list. A CRD of that name already there (a real cluster that has it installed,
/// or kept from an earlier run) is kept, and the versions it serves are waited for.
pub async fn install_crd(admin: &kube::Client, crd: &CustomResourceDefinition) {
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    let crds = Api::<CustomResourceDefinition>::all(admin.clone());
    let stored = match crds.create(&PostParams::default(), crd).await {
        Ok(stored) => stored,
        Err(kube::Error::Api(status)) if status.code == 409 => crds.get(name).await.unwrap(),
        Err(err) => panic!("creating the CRD {name}: {err}"),
    };
    let spec = &stored.spec;
    for version in spec.versions.iter().filter(|v| v.served) {
        let resource = ApiResource {
            group: spec.group.clone(),
            version: version.name.clone(),
            api_version: format!("{}/{}", spec.group, version.name),
            kind: spec.names.kind.clone(),
            plural: spec.names.plural.clone(),
        };
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
        eventually_async(&format!("{name} {} served", version.name), WAIT, || {
            let api = api.clone();
            async move { api.list(&ListParams::default()).await.is_ok() }
        })
        .await;
    }
}

/// A schemaless `clusters.cluster.x-k8s.io` CRD serving `v1beta1` and `v1beta2` (stored), with
/// no status subresource, so a test writes `status` with the object. The emulator converts
/// nothing between the versions: a test writes the fields of the version it reads.
pub fn capi_cluster_crd() -> CustomResourceDefinition {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
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
    }))
    .expect("a valid CRD")
}

/// The `status` that makes a Cluster API `Cluster` of `version` (`v1beta1` or `v1beta2`)
/// ready, or not, by the provider's default rules.
pub fn capi_ready_status(version: &str, ready: bool) -> Value {
    match version {
        "v1beta1" => json!({
            "phase": if ready { "Provisioned" } else { "Provisioning" },
            "controlPlaneReady": ready,
        }),
        _ => json!({"initialization": {"controlPlaneInitialized": ready}}),
    }
}

/// A Cluster API `Cluster` of `version` named `name`, with `spec.paused: false` and the status
/// of [`capi_ready_status`].
pub fn capi_cluster(version: &str, name: &str, ready: bool) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("cluster.x-k8s.io/{version}"),
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"paused": false},
        "status": capi_ready_status(version, ready),
    }))
    .expect("a valid Cluster")
}

/// The Cluster API `Cluster`s of `version` (`v1beta1` or `v1beta2`) in `namespace`.
pub fn capi_clusters(client: &kube::Client, namespace: &str, version: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", version, "Cluster");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "clusters");
    Api::namespaced_with(client.clone(), namespace, &resource)
}
