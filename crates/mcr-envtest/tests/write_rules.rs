//! Write rules the differential check (`cargo xtask fidelity`) found kube-apiserver to have,
//! through kube-rs: who owns `spec.replicas` after a scale write, Service validation, defaults
//! and kept allocations, a Namespace's finalizers, Pod deletion and eviction, a TokenRequest's
//! field manager, and the 422 for a finalizer added while deleting. The same expectations hold
//! on the emulator and, with `MCR_ENVTEST=real`, on kube-apiserver.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service, ServiceAccount};
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;
use mcr_test_support::{api_code, configmap};
use serde_json::{Value, json};

/// The managers whose entries own `spec.replicas`, as `manager/subresource`.
fn replicas_owners(d: &Deployment) -> Vec<String> {
    let mut owners: Vec<String> = d
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| {
            e.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.pointer("/f:spec/f:replicas").is_some())
        })
        .map(|e| {
            format!(
                "{}/{}",
                e.manager.as_deref().unwrap_or(""),
                e.subresource.as_deref().unwrap_or("")
            )
        })
        .collect();
    owners.sort();
    owners
}

#[tokio::test]
async fn scale_writes_own_replicas_as_kube_apiserver_tracks_them() {
    let cluster = TestCluster::start("scale-owners").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}},
        },
    }))
    .unwrap();
    let pp = |m: &str| PatchParams {
        field_manager: Some(m.into()),
        ..PatchParams::default()
    };
    let created = deployments
        .create(
            &PostParams {
                field_manager: Some("maker".into()),
                ..PostParams::default()
            },
            &d,
        )
        .await
        .unwrap();
    assert_eq!(replicas_owners(&created), ["maker/"]);

    // A scale write that changes the count takes it, under the scale subresource.
    deployments
        .patch_scale(
            "web",
            &pp("scaler"),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    let scaled = deployments.get("web").await.unwrap();
    assert_eq!(replicas_owners(&scaled), ["scaler/scale"]);

    // A count of 0 is left out of the Scale: nobody owns it any more.
    deployments
        .patch_scale(
            "web",
            &pp("scaler"),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    let zero = deployments.get("web").await.unwrap();
    assert_eq!(zero.spec.replicas, Some(0));
    assert!(
        replicas_owners(&zero).is_empty(),
        "{:?}",
        replicas_owners(&zero)
    );

    // A scale write to a count nobody owns records nothing.
    deployments
        .patch_scale(
            "web",
            &pp("scaler"),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    let untracked = deployments.get("web").await.unwrap();
    assert!(replicas_owners(&untracked).is_empty());

    // So an apply of another count conflicts with no one.
    let applied = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1},
    });
    let after = deployments
        .patch("web", &pp("applier"), &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(after.spec.replicas, Some(1));
}

#[tokio::test]
async fn services_are_validated_defaulted_and_keep_their_allocations() {
    let cluster = TestCluster::start("service-rules").await.unwrap();
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let svc = |ty: &str, affinity: &str| -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"type": ty, "sessionAffinity": affinity, "ports": [{"port": 80}]},
        }))
        .unwrap()
    };
    let bogus = services
        .create(&PostParams::default(), &svc("Bogus", "None"))
        .await
        .unwrap_err();
    assert_eq!(api_code(&bogus), Some(422), "{bogus}");
    assert!(
        bogus
            .to_string()
            .contains("spec.type: Unsupported value: \"Bogus\""),
        "{bogus}"
    );

    let created = services
        .create(&PostParams::default(), &svc("ClusterIP", "ClientIP"))
        .await
        .unwrap();
    let spec = created.spec.clone().unwrap();
    let ip = spec.cluster_ip.clone().expect("a cluster IP");
    let timeout = spec
        .session_affinity_config
        .and_then(|c| c.client_ip)
        .and_then(|c| c.timeout_seconds);
    assert_eq!(timeout, Some(10800));

    // A replace without the allocations keeps them; `None` affinity drops its config.
    let mut replaced = svc("ClusterIP", "None");
    replaced.metadata.resource_version = created.metadata.resource_version.clone();
    let updated = services
        .replace("web", &PostParams::default(), &replaced)
        .await
        .unwrap();
    let spec = updated.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some(ip.as_str()));
    assert_eq!(spec.ip_families, Some(vec!["IPv4".to_string()]));
    assert!(spec.session_affinity_config.is_none());

    // A strategic patch merges a Service's ports on `port`.
    let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
    let patched = services
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().ports.unwrap().len(), 1);

    // Deleting answers with the Service itself.
    let gone = services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let gone = gone.left().expect("the Service, not a Status");
    assert_eq!(gone.metadata.name.as_deref(), Some("web"));
}

#[tokio::test]
async fn only_finalize_changes_a_namespaces_finalizers() {
    let cluster = TestCluster::start("ns-finalizers").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let finalizers = |ns: &Namespace| ns.spec.as_ref().and_then(|s| s.finalizers.clone());
    let applied = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}});
    let pp = PatchParams::apply("me");
    let created = namespaces
        .patch("fin", &pp, &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(finalizers(&created), Some(vec!["kubernetes".to_string()]));
    let patch = json!({"spec": {"finalizers": []}});
    let patched = namespaces
        .patch("fin", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(finalizers(&patched), Some(vec!["kubernetes".to_string()]));
}

#[tokio::test]
async fn pods_are_marked_before_they_go_and_evictions_say_why() {
    let cluster = TestCluster::start("pod-deletes").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let pod = |name: &str, finalizers: Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "finalizers": finalizers},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap()
    };
    pods.create(&PostParams::default(), &pod("gone", json!([])))
        .await
        .unwrap();
    let zero = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let p = pods.delete("gone", &zero).await.unwrap();
    let p = p.left().expect("the Pod, not a Status");
    assert!(p.metadata.deletion_timestamp.is_some(), "marked: {p:?}");
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(0));

    // An update keeps what admission set on create.
    let created = pods
        .create(
            &PostParams::default(),
            &pod("held", json!(["example.com/hold"])),
        )
        .await
        .unwrap();
    let mut replaced = pod("held", json!(["example.com/hold"]));
    replaced.metadata.resource_version = created.metadata.resource_version.clone();
    let updated = pods
        .replace("held", &PostParams::default(), &replaced)
        .await
        .unwrap();
    let spec = updated.spec.unwrap();
    assert_eq!(spec.priority, Some(0));
    assert_eq!(spec.tolerations.map(|t| t.len()), Some(2));

    let evict = EvictParams {
        delete_options: Some(zero.clone()),
        ..EvictParams::default()
    };
    pods.evict("held", &evict).await.unwrap();
    let held = pods.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let condition = held
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("a DisruptionTarget condition");
    assert_eq!(condition.reason.as_deref(), Some("EvictionByEvictionAPI"));

    // No finalizer may join while it is deleted.
    let add = json!({"metadata": {"finalizers": ["example.com/hold", "example.com/late"]}});
    let err = pods
        .patch("held", &PatchParams::default(), &Patch::Merge(&add))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422));
    assert!(
        err.to_string()
            .contains("found new finalizers []string{\"example.com/late\"}"),
        "{err}"
    );
    let release = json!({"metadata": {"finalizers": null}});
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_token_request_records_its_manager_and_a_service_account_delete_returns_it() {
    let cluster = TestCluster::start("token-manager").await.unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), "default");
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    accounts.create(&PostParams::default(), &sa).await.unwrap();
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": ["a"]}})).unwrap();
    let pp = PostParams {
        field_manager: Some("issuer".into()),
        ..PostParams::default()
    };
    let token = accounts
        .create_token_request("robot", &pp, &request)
        .await
        .unwrap();
    let entries = token.metadata.managed_fields.unwrap_or_default();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].manager.as_deref(), Some("issuer"));
    assert_eq!(entries[0].subresource.as_deref(), Some("token"));
    let fields = &entries[0].fields_v1.as_ref().unwrap().0;
    assert!(
        fields.pointer("/f:spec/f:expirationSeconds").is_some(),
        "{fields}"
    );
    let gone = accounts
        .delete("robot", &DeleteParams::default())
        .await
        .unwrap();
    let gone = gone.left().expect("the ServiceAccount, not a Status");
    assert_eq!(gone.metadata.name.as_deref(), Some("robot"));
    // A ConfigMap's delete still answers with a Status.
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    cms.create(&PostParams::default(), &configmap("c", &[], "v"))
        .await
        .unwrap();
    assert!(
        cms.delete("c", &DeleteParams::default())
            .await
            .unwrap()
            .is_right()
    );
}

/// A TokenRequest names the service account (its uid) and the API server's audiences when it
/// names none; a TokenReview authenticates the token for the audiences it shares with the
/// review (the API server's when the review names none), and nothing else.
#[tokio::test]
async fn token_reviews_authenticate_the_tokens_of_token_requests() {
    use k8s_openapi::api::authentication::v1::TokenReview;
    let cluster = TestCluster::start("token-review").await.unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), "default");
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    let sa = accounts.create(&PostParams::default(), &sa).await.unwrap();
    let plain: TokenRequest = serde_json::from_value(json!({"spec": {}})).unwrap();
    let issued = accounts
        .create_token_request("robot", &PostParams::default(), &plain)
        .await
        .unwrap();
    assert_eq!(issued.metadata.uid, sa.metadata.uid);
    assert_eq!(
        issued.spec.unwrap().audiences.unwrap_or_default(),
        ["https://kubernetes.default.svc.cluster.local"]
    );
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": ["api"]}})).unwrap();
    let token = accounts
        .create_token_request("robot", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .unwrap();
    let reviews: Api<TokenReview> = Api::all(cluster.client());
    let review = |audiences: Value, token: &str| {
        serde_json::from_value::<TokenReview>(
            json!({"spec": {"token": token, "audiences": audiences}}),
        )
        .unwrap()
    };
    let ok = reviews
        .create(
            &PostParams::default(),
            &review(json!(["api", "other"]), &token),
        )
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(ok.authenticated, Some(true));
    assert_eq!(ok.audiences, Some(vec!["api".to_string()]));
    let user = ok.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:default:robot")
    );
    assert_eq!(user.uid, sa.metadata.uid);
    assert_eq!(
        user.groups.unwrap_or_default(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ]
    );
    let elsewhere = reviews
        .create(&PostParams::default(), &review(json!(null), &token))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(elsewhere.authenticated, None);
    assert_eq!(
        elsewhere.error.as_deref(),
        Some(
            "[invalid bearer token, token audiences [\"api\"] is invalid for the target audiences [\"https://kubernetes.default.svc.cluster.local\"]]"
        )
    );
    let garbage = reviews
        .create(&PostParams::default(), &review(json!(null), "not-a-token"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(garbage.error.as_deref(), Some("invalid bearer token"));
}

#[tokio::test]
async fn a_nodes_pod_cidr_is_set_once_and_its_status_has_its_go_structs() {
    use k8s_openapi::api::core::v1::Node;
    let cluster = TestCluster::start("node-rules").await.unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {"podCIDR": "10.244.0.0/24", "unschedulable": false},
    }))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    let spec = created.spec.clone().unwrap();
    assert_eq!(spec.pod_cidrs, Some(vec!["10.244.0.0/24".to_string()]));
    assert_eq!(spec.unschedulable, None, "false is not stored");
    let status = json!({"status": {"capacity": {"cpu": "4"}}});
    let with_status = nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let status = with_status.status.unwrap();
    assert_eq!(
        status.allocatable, status.capacity,
        "allocatable defaults to capacity"
    );
    assert!(status.daemon_endpoints.is_some() && status.node_info.is_some());

    let change = json!({"spec": {"podCIDR": "10.245.0.0/24", "podCIDRs": ["10.245.0.0/24"]}});
    let err = nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
    assert!(err.to_string().contains("may not change podCIDR"), "{err}");
}

#[tokio::test]
async fn a_cron_jobs_schedule_has_five_fields() {
    use k8s_openapi::api::batch::v1::CronJob;
    let cluster = TestCluster::start("cron-rules").await.unwrap();
    let cronjobs: Api<CronJob> = Api::namespaced(cluster.client(), "default");
    let cronjob = |schedule: &str| -> CronJob {
        serde_json::from_value(json!({
            "metadata": {"name": "tick"},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox:1.36"}],
                "restartPolicy": "OnFailure",
            }}}}},
        }))
        .unwrap()
    };
    let err = cronjobs
        .create(&PostParams::default(), &cronjob("not a schedule"))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
    assert!(
        err.to_string()
            .contains("expected exactly 5 fields, found 3: [not a schedule]"),
        "{err}"
    );
    cronjobs
        .create(&PostParams::default(), &cronjob("@hourly"))
        .await
        .unwrap();
}
