//! The built-in kinds beyond ConfigMaps: every one kube-apiserver serves, through kube-rs.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::core::WatchEvent;
use kube::discovery::{Discovery, Scope};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use mcr_test_support::{DEADLINE, api_code};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
    }))
    .unwrap()
}

#[tokio::test]
async fn pods_create_get_patch_watch_delete() {
    let cluster = TestCluster::start("pods").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let got = pods.get("web").await.unwrap();
    assert_eq!(
        got.spec.unwrap().containers[0].image.as_deref(),
        Some("busybox")
    );

    let mut events = pods
        .watch(&WatchParams::default().fields("metadata.name=web"), &rv)
        .await
        .unwrap()
        .boxed();
    let patch = json!({ "metadata": { "labels": { "tier": "front" } } });
    pods.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let seen = tokio::time::timeout(DEADLINE, async {
        loop {
            match events.try_next().await.unwrap() {
                Some(WatchEvent::Modified(p)) => break p,
                Some(_) => continue,
                None => panic!("the watch ended before the patch was seen"),
            }
        }
    })
    .await
    .expect("the patch shows up in the watch");
    assert_eq!(seen.metadata.labels.unwrap()["tier"], "front");

    let listed = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually_async("the pod to be gone", DEADLINE, || async {
        matches!(pods.get_opt("web").await, Ok(None))
    })
    .await;
}

#[tokio::test]
async fn node_is_cordoned_by_a_patch() {
    let cluster = TestCluster::start("nodes").await.unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    let node: Node = serde_json::from_value(json!({ "metadata": { "name": "worker-1" } })).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let cordon = json!({ "spec": { "unschedulable": true } });
    let patched = nodes
        .patch(
            "worker-1",
            &PatchParams::default(),
            &Patch::Strategic(&cordon),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().unschedulable, Some(true));
    nodes
        .delete("worker-1", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn rbac_networking_and_batch_objects_round_trip() {
    let cluster = TestCluster::start("kinds").await.unwrap();
    let client = cluster.client();

    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": "mcr-test-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] }],
    }))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.unwrap();
    let got = roles.get("mcr-test-reader").await.unwrap();
    assert_eq!(got.rules.unwrap()[0].verbs, ["get", "list"]);

    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "default");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "readers" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mcr-test-reader" },
        "subjects": [{ "kind": "ServiceAccount", "name": "default", "namespace": "default" }],
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    assert_eq!(
        bindings
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), "default");
    let policy: NetworkPolicy = serde_json::from_value(json!({
        "metadata": { "name": "deny-all" },
        "spec": { "podSelector": {}, "policyTypes": ["Ingress"] },
    }))
    .unwrap();
    let created = policies
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    // A namespaced kind is 404 without a namespace and a cluster-scoped one with it.
    let wrong: Api<Service> = Api::all(client.clone());
    let err = wrong.get("kubernetes").await.unwrap_err();
    assert_eq!(api_code(&err), Some(404), "{err}");

    let jobs: Api<Job> = Api::namespaced(client, "default");
    assert!(
        jobs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn discovery_finds_the_builtin_groups() {
    let cluster = TestCluster::start("discovery-builtins").await.unwrap();
    let discovery = Discovery::new(cluster.client()).run().await.unwrap();
    let expect = [
        ("", "Pod", Scope::Namespaced),
        ("", "Service", Scope::Namespaced),
        ("", "Node", Scope::Cluster),
        ("", "PersistentVolume", Scope::Cluster),
        ("apps", "StatefulSet", Scope::Namespaced),
        ("apps", "DaemonSet", Scope::Namespaced),
        ("batch", "Job", Scope::Namespaced),
        ("batch", "CronJob", Scope::Namespaced),
        ("rbac.authorization.k8s.io", "ClusterRole", Scope::Cluster),
        (
            "rbac.authorization.k8s.io",
            "RoleBinding",
            Scope::Namespaced,
        ),
        ("networking.k8s.io", "Ingress", Scope::Namespaced),
        ("networking.k8s.io", "IngressClass", Scope::Cluster),
        ("policy", "PodDisruptionBudget", Scope::Namespaced),
        ("autoscaling", "HorizontalPodAutoscaler", Scope::Namespaced),
        ("storage.k8s.io", "StorageClass", Scope::Cluster),
        ("scheduling.k8s.io", "PriorityClass", Scope::Cluster),
        (
            "certificates.k8s.io",
            "CertificateSigningRequest",
            Scope::Cluster,
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            Scope::Cluster,
        ),
        ("discovery.k8s.io", "EndpointSlice", Scope::Namespaced),
    ];
    for (group, kind, scope) in expect {
        let g = discovery
            .get(group)
            .unwrap_or_else(|| panic!("group {group:?} is not discovered"));
        let (ar, caps) = g
            .recommended_kind(kind)
            .unwrap_or_else(|| panic!("{kind} is not discovered in {group:?}"));
        assert_eq!(caps.scope, scope, "{kind}");
        assert!(ar.plural.ends_with('s'), "{kind}: {}", ar.plural);
    }
    let (_, pods) = discovery.get("").unwrap().recommended_kind("Pod").unwrap();
    let subresources: Vec<&str> = pods
        .subresources
        .iter()
        .map(|(r, _)| r.plural.as_str())
        .collect();
    for sub in ["status", "binding", "eviction", "ephemeralcontainers"] {
        assert!(
            subresources.iter().any(|s| s.ends_with(sub)),
            "pods/{sub} missing from {subresources:?}"
        );
    }
}

#[tokio::test]
async fn aggregated_discovery_matches_the_legacy_documents() {
    let cluster = TestCluster::start("discovery-aggregated").await.unwrap();
    let legacy = Discovery::new(cluster.client()).run().await.unwrap();
    let aggregated = Discovery::new(cluster.client())
        .run_aggregated()
        .await
        .unwrap();
    let summary = |d: &Discovery| {
        let mut rows: Vec<String> = Vec::new();
        for group in d.groups() {
            for (ar, caps) in group.recommended_resources() {
                let mut subs: Vec<String> = caps
                    .subresources
                    .iter()
                    .map(|(r, c)| format!("{}:{:?}", r.plural, c.operations))
                    .collect();
                subs.sort();
                let mut ops = caps.operations.clone();
                ops.sort();
                rows.push(format!(
                    "{}/{} {} {:?} {:?} {subs:?}",
                    ar.group, ar.version, ar.plural, caps.scope, ops
                ));
            }
        }
        rows.sort();
        rows
    };
    let (a, b) = (summary(&legacy), summary(&aggregated));
    assert!(a.iter().any(|r| r.starts_with("batch/v1 jobs")), "{a:#?}");
    assert!(
        a.iter()
            .any(|r| r.starts_with("apiregistration.k8s.io/v1 apiservices")),
        "{a:#?}"
    );
    assert_eq!(a, b);
}

/// A 422 lists each invalid field in `details.causes`, and an invalid object is 422 even when
/// its name is taken (validation before the existence check), as on kube-apiserver.
#[tokio::test]
async fn invalid_objects_are_422_with_causes_before_409() {
    let cluster = TestCluster::start("invalid-causes").await.unwrap();
    let client = cluster.client();
    let post = |body: serde_json::Value| {
        let client = client.clone();
        async move {
            let req = http::Request::post("/api/v1/namespaces/default/configmaps")
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(&body).unwrap().into())
                .unwrap();
            let res = client.send(req).await.unwrap();
            let code = res.status().as_u16();
            let bytes = res.into_body().collect_bytes().await.unwrap();
            (
                code,
                serde_json::from_slice::<serde_json::Value>(&bytes).unwrap(),
            )
        }
    };
    let cm = |name: &str, key: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {key: "x"}});
    assert_eq!(post(cm("taken", "a")).await.0, 201);
    let (code, status) = post(cm("taken", "a b")).await;
    assert_eq!(code, 422, "an invalid object with a taken name: {status}");
    let cause = &status["details"]["causes"][0];
    assert_eq!(
        (cause["field"].as_str(), cause["reason"].as_str()),
        (Some("data[a b]"), Some("FieldValueInvalid")),
        "{status}"
    );
    let (code, status) = post(cm("Bad_Name", "a")).await;
    assert_eq!(code, 422, "{status}");
    let cause = &status["details"]["causes"][0];
    assert_eq!(
        (cause["field"].as_str(), cause["reason"].as_str()),
        (Some("metadata.name"), Some("FieldValueInvalid")),
        "{status}"
    );
}

/// Component statuses are served read-only as kube-apiserver reports them without a
/// scheduler and controller-manager, so kube-runtime's event recorder can publish events about
/// a cluster-scoped object (its test does it for `componentstatuses/scheduler`): they go to
/// `default`.
#[tokio::test]
async fn an_event_recorder_publishes_events_about_a_cluster_scoped_object() {
    use k8s_openapi::api::core::v1::ComponentStatus;
    use k8s_openapi::api::events::v1::Event;
    use kube::Resource as _;
    use kube::runtime::events::{Event as Published, EventType, Recorder};
    let cluster = TestCluster::start("cluster-scoped-events").await.unwrap();
    let statuses: Api<ComponentStatus> = Api::all(cluster.client());
    let scheduler = statuses.get("scheduler").await.unwrap();
    let conditions = scheduler.conditions.clone().unwrap_or_default();
    let condition = &conditions[0];
    assert_eq!(
        (condition.type_.as_str(), condition.status.as_str()),
        ("Healthy", "False")
    );
    let mut names: Vec<String> = statuses
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    // kube-apiserver lists them in no fixed order (seen both ways on 1.36.3).
    names.sort();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    let recorder = Recorder::new(cluster.client(), "mcr-test".into());
    recorder
        .publish(
            &Published {
                type_: EventType::Normal,
                reason: "Checked".into(),
                note: Some("about a cluster-scoped object".into()),
                action: "Check".into(),
                secondary: None,
            },
            &scheduler.object_ref(&()),
        )
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    let found = events.list(&ListParams::default()).await.unwrap();
    assert!(
        found
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("Checked")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("scheduler")),
        "{:?}",
        found.items
    );
}
