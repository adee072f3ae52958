//! Namespace scopes: several providers share one management cluster, and one name claimed by
//! Secrets in two namespaces goes to the first until it leaves.

mod common;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use mcr_core::ClusterName;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::{Namespaces, SecretRef, SecretState};

use common::*;

#[tokio::test]
async fn namespace_scopes_split_one_management_cluster() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(3).await;
    for ns in ["ns-a", "ns-b", "ns-c"] {
        create_namespace(&host.client(), ns, &[]).await;
    }
    let scoped = Running::start(
        &host,
        opts(Namespaces::List(vec!["ns-a".into(), "ns-b".into()])),
    );
    let rest = Running::start(
        &host,
        opts(Namespaces::AllExcept(vec!["ns-a".into(), "ns-b".into()])),
    );
    let single = Running::start(&host, opts(Namespaces::One("ns-c".into())));
    for (i, ns) in ["ns-a", "ns-b", "ns-c"].iter().enumerate() {
        let kc = kubeconfig_of(&fleet.clusters()[i]);
        put_secret(
            &host,
            ns,
            &format!("in-{ns}"),
            "true",
            Some(kc.as_bytes()),
            &[],
        )
        .await;
    }
    put_secret(
        &host,
        "default",
        "in-default",
        "true",
        Some(kubeconfig_of(&fleet.clusters()[0]).as_bytes()),
        &[],
    )
    .await;
    eventually("list scope", DEADLINE, || {
        scoped.names() == ["in-ns-a", "in-ns-b"]
    })
    .await;
    eventually("all-except scope", DEADLINE, || {
        rest.names() == ["in-default", "in-ns-c"]
    })
    .await;
    eventually("single scope", DEADLINE, || single.names() == ["in-ns-c"]).await;
    assert!(scoped.state("ns-c", "in-ns-c").is_none());
    assert!(rest.state("ns-a", "in-ns-a").is_none());
    scoped.stop().await;
    rest.stop().await;
    single.stop().await;
}

#[tokio::test]
async fn same_name_in_two_namespaces_first_wins_then_hands_over() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    Api::<ConfigMap>::namespaced(m2.client(), "default")
        .create(
            &PostParams::default(),
            &animal_configmap("only-on-2", "owl"),
        )
        .await
        .unwrap();
    create_namespace(&host.client(), "ns-a", &[]).await;
    create_namespace(&host.client(), "ns-b", &[]).await;
    let run = Running::start(
        &host,
        opts(Namespaces::List(vec!["ns-a".into(), "ns-b".into()])),
    );
    put_secret(
        &host,
        "ns-a",
        "x",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("first engaged", DEADLINE, || run.id("x").is_some()).await;
    let first = run.id("x").unwrap();

    put_secret(
        &host,
        "ns-b",
        "x",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[],
    )
    .await;
    eventually("second in conflict", DEADLINE, || {
        run.state("ns-b", "x")
            == Some(SecretState::Conflict {
                owner: SecretRef::new("ns-a", "x"),
            })
    })
    .await;
    assert_eq!(run.id("x"), Some(first), "the first one keeps the name");

    delete_secret(&host.client(), "ns-a", "x").await;
    eventually("second takes over", DEADLINE, || {
        run.id("x").is_some_and(|id| id != first)
    })
    .await;
    eventually("second engaged", DEADLINE, || {
        matches!(run.state("ns-b", "x"), Some(SecretState::Engaged { .. }))
    })
    .await;
    let x = run.registry.get(&ClusterName::new("x")).unwrap();
    let informer = x.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert!(informer.get(Some("default"), "only-on-2").is_some());
    run.stop().await;
}
