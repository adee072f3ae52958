//! Conformance-style tests, patches: server-side apply and strategic merge (including the
//! status subresource).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;
use serde_json::json;

#[tokio::test]
async fn server_side_apply() {
    let cluster = TestCluster::start("ssa").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let apply = |value: &str| {
        Patch::Apply(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "applied" },
            "data": { "value": value },
        }))
    };
    let created = cms
        .patch("applied", &PatchParams::apply("mgr"), &apply("1"))
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["value"], "1");
    let managers: Vec<_> = created
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&"mgr".to_string()), "{managers:?}");

    let updated = cms
        .patch("applied", &PatchParams::apply("mgr").force(), &apply("2"))
        .await
        .unwrap();
    assert_eq!(updated.data.as_ref().unwrap()["value"], "2");
    assert_eq!(
        cms.get("applied").await.unwrap().data.unwrap()["value"],
        "2"
    );
    if let Some(counts) = mcr_test_support::request_counts(&cluster) {
        assert_eq!(counts.get("patch", "configmaps"), 2);
    }
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [
                    { "name": "main", "image": "main:1" },
                    { "name": "sidecar", "image": "sidecar:1" },
                ] },
            },
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn strategic_merge_on_deployment_and_status() {
    let cluster = TestCluster::start("strategic").await.unwrap();
    let deploys: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();

    // Containers merge by name: one image changes, the other container stays.
    let patch = Patch::Strategic(json!({
        "spec": { "template": { "spec": { "containers": [ { "name": "main", "image": "main:2" } ] } } }
    }));
    let patched = deploys
        .patch("web", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let containers = patched.spec.template.spec.unwrap().containers;
    let images: Vec<_> = containers
        .iter()
        .map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(images, [("main", "main:2"), ("sidecar", "sidecar:1")]);

    let status = Patch::Merge(json!({ "status": { "replicas": 1, "readyReplicas": 1 } }));
    deploys
        .patch_status("web", &PatchParams::default(), &status)
        .await
        .unwrap();
    let got = deploys.get_status("web").await.unwrap();
    assert_eq!(got.status.unwrap().ready_replicas, Some(1));
    if let Some(counts) = mcr_test_support::request_counts(&cluster) {
        assert_eq!(counts.get("patch", "deployments/status"), 1);
        assert_eq!(counts.get("get", "deployments/status"), 1);
    }
}
