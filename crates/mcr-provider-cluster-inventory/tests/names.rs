//! Who owns a cluster name, and what a policy refusal does: a name claimed by two profiles
//! belongs to the oldest (`creationTimestamp`, then `namespace/name`) after every restart,
//! whatever the list order, and the younger one is never engaged under it meanwhile; a
//! kubeconfig the policy refuses (here a `proxy-url`) is reported and not retried.

mod common;

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use mcr_core::{Aware, Cluster, ClusterName};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::{eventually, eventually_async};
use mcr_provider_cluster_inventory::{
    ClusterInventoryProvider, Naming, Options, ProfileRef, ProfileState, Strategy,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use common::*;

fn secret_opts() -> Options {
    fast(Options::new(Strategy::Secret {
        consumer: CONSUMER.into(),
    }))
}

/// A subscriber that keeps every cluster engaged under a name, in order.
#[derive(Default)]
struct Recorder {
    engaged: Mutex<Vec<(ClusterName, Cluster)>>,
}

impl Aware for Recorder {
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        let entry = (name.clone(), cluster.clone());
        self.engaged.lock().unwrap().push(entry);
        let _ = token;
        Ok(())
    }
}

/// The `animal` of the `marker` ConfigMap a cluster's client reads.
async fn marker(cluster: &Cluster) -> Option<String> {
    let cm = Api::<ConfigMap>::namespaced(cluster.client(), "default")
        .get_opt("marker")
        .await
        .ok()??;
    cm.data?.get("animal").cloned()
}

fn created(obj: &kube::api::DynamicObject) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    obj.metadata
        .creation_timestamp
        .clone()
        .expect("set by the server")
}

/// Creates profile `default/name` named `cluster` by the clusterset property, strictly younger
/// (`creationTimestamp` has a one-second resolution) than `older` if given: re-created until
/// its timestamp is later.
async fn create_profile(hub: &TestCluster, name: &str, cluster: &str, older: Option<&str>) {
    let api = profiles(hub, "default");
    let older = match older {
        Some(o) => Some(created(&api.get(o).await.unwrap())),
        None => None,
    };
    let named = json!({"properties": [{"name": "cluster.clusterset.k8s.io", "value": cluster}]});
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        put_profile(hub, "default", name, status(true, named.clone())).await;
        let mine = created(&api.get(name).await.unwrap());
        if older.as_ref().is_none_or(|o| *o < mine) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "clock does not move"
        );
        api.delete(name, &DeleteParams::default()).await.unwrap();
        eventually_async("deleted", DEADLINE, || async {
            api.get_opt(name).await.unwrap().is_none()
        })
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// `z-old` is older but lists after `a-young`: it owns `eu-1` on every start, `a-young` is
/// reported in conflict naming it, and no instance of `a-young`'s member is ever engaged.
#[tokio::test]
async fn the_oldest_profile_owns_a_clusterset_name_whatever_the_list_order() {
    init_tracing();
    let hub = hub().await;
    let old_member = TestCluster::start_https("old").await.unwrap();
    let young_member = TestCluster::start_https("young").await.unwrap();
    for (member, animal) in [(&old_member, "old"), (&young_member, "young")] {
        Api::<ConfigMap>::namespaced(member.client(), "default")
            .create(
                &PostParams::default(),
                &mcr_test_support::animal_configmap("marker", animal),
            )
            .await
            .unwrap();
    }
    put_secret(
        &hub,
        "default",
        "z-old",
        CONSUMER,
        "z-old",
        Some(&kubeconfig_of(&old_member)),
    )
    .await;
    put_secret(
        &hub,
        "default",
        "a-young",
        CONSUMER,
        "a-young",
        Some(&kubeconfig_of(&young_member)),
    )
    .await;
    create_profile(&hub, "z-old", "eu-1", None).await;
    create_profile(&hub, "a-young", "eu-1", Some("z-old")).await;

    for restart in 0..2 {
        let recorder = Arc::new(Recorder::default());
        let provider = ClusterInventoryProvider::new(
            hub.client(),
            Options {
                naming: Naming::ClusterSetProperty,
                ..secret_opts()
            },
        )
        .unwrap();
        let run = mcr_test_support::Running::spawn_with(provider, recorder.clone());
        eventually("z-old engaged and a-young in conflict", DEADLINE, || {
            let state = |name| {
                run.provider
                    .status(&ProfileRef::new("default", name))
                    .map(|s| s.state)
            };
            matches!(state("z-old"), Some(ProfileState::Engaged { .. }))
                && state("a-young")
                    == Some(ProfileState::Conflict {
                        owner: ProfileRef::new("default", "z-old"),
                    })
        })
        .await;
        let engaged: Vec<(ClusterName, Cluster)> = recorder.engaged.lock().unwrap().clone();
        for (name, cluster) in engaged {
            assert_eq!(name.as_str(), "eu-1");
            assert_eq!(
                marker(&cluster).await.as_deref(),
                Some("old"),
                "start {restart}: only the oldest profile's member is ever engaged as eu-1"
            );
        }
        run.stop().await;
    }
}

/// A Secret kubeconfig naming a `proxy-url` is refused by the default policy, like an exec
/// plugin: reported and not retried (the profile keeps no retry timer).
#[tokio::test]
async fn a_kubeconfig_proxy_is_refused_by_policy_and_not_retried() {
    init_tracing();
    let hub = hub().await;
    let run = Running::start(&hub, secret_opts());
    let proxy = r#"
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", proxy-url: "http://127.0.0.1:3128"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"#;
    put_profile(&hub, "default", "proxied", status(true, json!({}))).await;
    put_secret(&hub, "default", "proxied", CONSUMER, "proxied", Some(proxy)).await;
    eventually("the proxy is refused", DEADLINE, || {
        matches!(run.state("default", "proxied"), Some(ProfileState::PolicyDenied { reason })
            if reason.contains("proxy-url") && reason.contains("default/proxied"))
    })
    .await;
    assert!(run.names().is_empty());
    run.stop().await;
}

/// The owner of a clusterset name is deleted and the next claimant cannot be resolved (no
/// Secret): the deleted profile's cluster is stopped, not kept under a name the remaining
/// profile owns without saying how to reach it.
#[tokio::test]
async fn a_name_passing_to_an_unresolvable_profile_stops_the_previous_cluster() {
    init_tracing();
    let hub = hub().await;
    let member = TestCluster::start_https("old").await.unwrap();
    let kc = kubeconfig_of(&member);
    put_secret(&hub, "default", "z-old", CONSUMER, "z-old", Some(&kc)).await;
    create_profile(&hub, "z-old", "eu-1", None).await;
    create_profile(&hub, "a-young", "eu-1", Some("z-old")).await;
    let opts = Options {
        naming: Naming::ClusterSetProperty,
        ..secret_opts()
    };
    let run = Running::start(&hub, opts);
    eventually("z-old engaged as eu-1", DEADLINE, || {
        matches!(
            run.state("default", "z-old"),
            Some(ProfileState::Engaged { .. })
        )
    })
    .await;
    let token = mcr_test_support::active_token(&run.registry, "eu-1").unwrap();

    delete_profile(&hub, "default", "z-old").await;
    eventually("a-young owns eu-1, unresolvable", DEADLINE, || {
        matches!(
            run.state("default", "a-young"),
            Some(ProfileState::Invalid { ref reason }) if reason.contains("no Secret")
        ) && run.state("default", "z-old").is_none()
    })
    .await;
    tokio::time::timeout(DEADLINE, token.cancelled())
        .await
        .expect("the deleted profile's cluster is stopped");
    assert!(run.names().is_empty(), "{:?}", run.names());
    run.stop().await;
}
