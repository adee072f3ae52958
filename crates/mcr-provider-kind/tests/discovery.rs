//! Join, leave, prefix filtering and recreation, through a fake `kind` over emulated HTTPS
//! clusters.

mod common;

use common::{FakeKind, KindRun, Running, WAIT};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::{eventually, eventually_async};
use mcr_provider_kind::Options;

async fn create_configmap(client: kube::Client, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &cm).await.unwrap();
}

/// True when the engaged client of `name` reaches the server that holds ConfigMap `marker`.
async fn reaches(running: &Running, name: &str, marker: &str) -> bool {
    let Ok(cluster) = running.registry.get(&name.into()) else {
        return false;
    };
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    matches!(api.get_opt(marker).await, Ok(Some(_)))
}

#[tokio::test]
async fn clusters_join_and_leave_with_the_kind_list() {
    let kind = FakeKind::new();
    let a = TestCluster::start_https("a").await.unwrap();
    let b = TestCluster::start_https("b").await.unwrap();
    create_configmap(a.client(), "only-in-a").await;
    kind.set("fleet-a", &a);
    let running = Running::start(kind.options());

    eventually("fleet-a to join", WAIT, || running.names() == ["fleet-a"]).await;
    assert!(
        reaches(&running, "fleet-a", "only-in-a").await,
        "the engaged client talks to the cluster kind printed"
    );

    kind.set("fleet-b", &b);
    eventually("fleet-b to join", WAIT, || {
        running.names() == ["fleet-a", "fleet-b"]
    })
    .await;

    // Refreshes of an unchanged kubeconfig keep the running instance.
    let id = running.id("fleet-a");
    let fetched = kind.count("get kubeconfig --name fleet-a");
    eventually("two refreshes of fleet-a", WAIT, || {
        kind.count("get kubeconfig --name fleet-a") >= fetched + 2
    })
    .await;
    assert_eq!(
        running.id("fleet-a"),
        id,
        "unchanged kubeconfig, same instance"
    );

    kind.remove("fleet-a");
    eventually("fleet-a to leave", WAIT, || running.names() == ["fleet-b"]).await;
    assert_eq!(
        running.provider.names(),
        ["fleet-b"],
        "the provider forgot it too"
    );
    assert!(running.failed().is_empty(), "{:?}", running.failed());
    running.stop().await;
}

#[tokio::test]
async fn only_clusters_with_the_prefix_join() {
    let kind = FakeKind::new();
    let a = TestCluster::start_https("a").await.unwrap();
    let dev = TestCluster::start_https("dev").await.unwrap();
    kind.set("fleet-a", &a);
    kind.set("dev", &dev);
    let running = Running::start(Options {
        prefix: Some("fleet-".into()),
        ..kind.options()
    });

    eventually("fleet-a to join", WAIT, || running.names() == ["fleet-a"]).await;
    let lists = kind.count("get clusters");
    eventually("three more lists", WAIT, || {
        kind.count("get clusters") >= lists + 3
    })
    .await;
    assert_eq!(running.names(), ["fleet-a"]);
    assert_eq!(
        kind.count("get kubeconfig --name dev"),
        0,
        "a cluster outside the prefix is never asked for its kubeconfig"
    );
    running.stop().await;
}

#[tokio::test]
async fn internal_kubeconfigs_are_requested_with_internal() {
    let kind = FakeKind::new();
    let a = TestCluster::start_https("a").await.unwrap();
    kind.set("fleet-a", &a);
    let running = Running::start(Options {
        internal: true,
        ..kind.options()
    });
    eventually("fleet-a to join", WAIT, || running.names() == ["fleet-a"]).await;
    assert!(kind.count("get kubeconfig --name fleet-a --internal") >= 1);
    assert_eq!(kind.count("get kubeconfig --name fleet-a"), 0);
    running.stop().await;
}

#[tokio::test]
async fn a_recreated_cluster_replaces_the_old_one() {
    let kind = FakeKind::new();
    let old = TestCluster::start_https("old").await.unwrap();
    create_configmap(old.client(), "only-in-old").await;
    kind.set("fleet-a", &old);
    let running = Running::start(kind.options());
    eventually("fleet-a to join", WAIT, || running.names() == ["fleet-a"]).await;
    let first = running.id("fleet-a");

    // `kind delete cluster --name fleet-a && kind create cluster --name fleet-a`: same name,
    // new server, CA and credentials.
    let new = TestCluster::start_https("new").await.unwrap();
    create_configmap(new.client(), "only-in-new").await;
    kind.set("fleet-a", &new);
    drop(old);

    eventually("a new instance of fleet-a", WAIT, || {
        running.id("fleet-a").is_some_and(|id| Some(id) != first)
    })
    .await;
    eventually_async("fleet-a to reach the new server", WAIT, || {
        reaches(&running, "fleet-a", "only-in-new")
    })
    .await;
    assert_eq!(running.names(), ["fleet-a"]);
    running.stop().await;
}
