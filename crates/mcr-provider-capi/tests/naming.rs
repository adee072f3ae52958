//! Custom names: two Clusters mapping to one name conflict; the first keeps it, the second
//! takes over when the first goes away. Custom Secret location.

mod common;

use std::sync::Arc;

use common::*;
use mcr_core::ClusterName;
use mcr_core::scope::Namespaces;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_capi::{CapiVersion, ClusterState, ObjectRef, Options};

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
