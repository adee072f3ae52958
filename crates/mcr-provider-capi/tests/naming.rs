//! Custom names: two Clusters mapping to one name conflict; the oldest keeps it (whatever the
//! list order, after every restart), the next oldest takes over when it goes away. Custom
//! Secret location.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use mcr_core::ClusterName;
use mcr_core::scope::Namespaces;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_capi::{CapiProvider, CapiVersion, ClusterState, ObjectRef, Options};

const V: CapiVersion = CapiVersion::V1Beta2;

#[tokio::test]
async fn same_name_conflicts_and_hands_over() {
    init_tracing();
    let host = management().await;
    let wa = TestCluster::start_https("wa").await.unwrap();
    let wb = TestCluster::start_https("wb").await.unwrap();
    create_namespace(&host.client(), "a", &[]).await;
    create_namespace(&host.client(), "b", &[]).await;
    create_cluster(&host, V, "a", "prod", true, &[]).await;
    put_secret(&host, "a", "prod", Some(kubeconfig_of(&wa).as_bytes()), &[]).await;

    let run = Running::start(
        &host,
        Options {
            name: Some(Arc::new(|c: &ObjectRef| ClusterName::from(c.name.clone()))),
            ..opts(V, Namespaces::List(vec!["a".into(), "b".into()]))
        },
    );
    eventually("a/prod engaged as prod", WAIT, || run.has("prod")).await;
    let first = run.id("prod");

    create_cluster(&host, V, "b", "prod", true, &[]).await;
    put_secret(&host, "b", "prod", Some(kubeconfig_of(&wb).as_bytes()), &[]).await;
    eventually("b/prod in conflict", WAIT, || {
        run.state("b", "prod")
            == Some(ClusterState::Conflict {
                owner: ObjectRef::new("a", "prod"),
            })
    })
    .await;
    assert_eq!(run.id("prod"), first, "the first owner keeps the name");

    delete_cluster(&host, V, "a", "prod").await;
    eventually("b/prod takes over", WAIT, || {
        run.has("prod")
            && run.id("prod") != first
            && matches!(run.state("b", "prod"), Some(ClusterState::Engaged { .. }))
    })
    .await;
    assert_eq!(run.names(), ["prod"]);
    run.stop().await;
}

/// Whether `owner/prod` is engaged as `prod` and every `other/prod` is in conflict with it.
fn owns(run: &Running, owner: &str, others: &[&str]) -> bool {
    let conflict = ClusterState::Conflict {
        owner: ObjectRef::new(owner, "prod"),
    };
    matches!(run.state(owner, "prod"), Some(ClusterState::Engaged { .. }))
        && others
            .iter()
            .all(|ns| run.state(ns, "prod").as_ref() == Some(&conflict))
}

/// `prod` in each of `namespaces`, oldest first (each a second younger than the last), all
/// pointing at `w`; the options name each `Cluster` `prod`.
async fn same_names(host: &TestCluster, w: &TestCluster, namespaces: &[&str]) -> Options {
    let kubeconfig = kubeconfig_of(w);
    let mut older = None;
    for ns in namespaces {
        create_namespace(&host.client(), ns, &[]).await;
        if let Some(older) = older {
            after_created(host, V, older, "prod").await;
        }
        create_cluster(host, V, ns, "prod", true, &[]).await;
        put_secret(host, ns, "prod", Some(kubeconfig.as_bytes()), &[]).await;
        older = Some(*ns);
    }
    let namespaces = namespaces.iter().map(|ns| ns.to_string()).collect();
    Options {
        name: Some(Arc::new(|c: &ObjectRef| ClusterName::from(c.name.clone()))),
        ..opts(V, Namespaces::List(namespaces))
    }
}

/// The oldest `Cluster` owns a name (by `creationTimestamp`, not by arrival or key order),
/// after a restart too; when it goes away, the next oldest takes over, not the one whose
/// `namespace/name` sorts first.
#[tokio::test]
async fn the_oldest_cluster_owns_the_name() {
    init_tracing();
    let host = management().await;
    let w = TestCluster::start_https("w").await.unwrap();
    let options = same_names(&host, &w, &["x", "c", "b"]).await;
    let run = Running::start(&host, options.clone());
    eventually("x/prod, the oldest, owns prod", WAIT, || {
        owns(&run, "x", &["b", "c"])
    })
    .await;
    assert_eq!(run.engagements("prod").len(), 1, "only x/prod was engaged");
    delete_cluster(&host, V, "x", "prod").await;
    eventually("c/prod, the oldest left, takes over", WAIT, || {
        owns(&run, "c", &["b"])
    })
    .await;
    run.stop().await;

    // A restart: a fresh provider lists every namespace again, b's first.
    let run = Running::start(&host, options);
    eventually("c/prod owns prod after a restart", WAIT, || {
        owns(&run, "c", &["b"])
    })
    .await;
    assert_eq!(run.engagements("prod").len(), 1, "b/prod was never engaged");
    run.stop().await;
}

/// During the initial list, the younger `Cluster`'s namespace lists first and the owner's
/// later: the name waits for every `Cluster` watch to list, so the younger one is never
/// engaged under it, not even for a moment.
#[tokio::test]
async fn a_younger_cluster_is_never_engaged_before_the_older_is_listed() {
    init_tracing();
    let host = management().await;
    let w = TestCluster::start_https("w").await.unwrap();
    let options = same_names(&host, &w, &["b", "a"]).await;
    let recorder = Arc::new(Recorder::default());
    // b's Clusters list last: held until something was engaged, or for 5 s.
    let path = format!(
        "/apis/cluster.x-k8s.io/{}/namespaces/b/clusters",
        V.as_str()
    );
    let client = mcr_test_support::listing_last(host.client(), path, Duration::from_secs(5), {
        let recorder = recorder.clone();
        move || !recorder.log.lock().unwrap().is_empty()
    });
    let run = Running::spawn_with(CapiProvider::new(client, options), recorder);
    eventually("b/prod, the older, owns prod", WAIT, || {
        owns(&run, "b", &["a"])
    })
    .await;
    assert_eq!(run.engagements("prod").len(), 1, "a/prod was never engaged");
    run.stop().await;
}

#[tokio::test]
async fn custom_secret_location_and_key() {
    init_tracing();
    let host = management().await;
    create_namespace(&host.client(), "fleet", &[]).await;
    let w = TestCluster::start_https("w").await.unwrap();
    create_cluster(&host, V, "fleet", "c", true, &[]).await;
    // Stored under another name: the Secret written for Cluster "c-admin" is the one to use.
    put_secret(
        &host,
        "fleet",
        "c-admin",
        Some(kubeconfig_of(&w).as_bytes()),
        &[],
    )
    .await;

    let run = Running::start(
        &host,
        Options {
            secret: Some(Arc::new(|c: &ObjectRef| {
                ObjectRef::new(&c.namespace, format!("{}-admin-kubeconfig", c.name))
            })),
            ..opts(V, Namespaces::One("fleet".into()))
        },
    );
    eventually("engaged from the custom Secret", WAIT, || {
        run.has("fleet/c")
    })
    .await;
    run.stop().await;
}
