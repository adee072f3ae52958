//! A Secret rotation that changes only the credentials renews the running cluster in place: same
//! instance, no relist (request counters), informers keep working.

mod common;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use mcr_core::{ClusterName, Provider};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::Namespaces;
use std::time::Duration;

use common::*;

#[tokio::test]
async fn credential_only_rotation_renews_in_place_without_relist() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start_https("member").await.unwrap();
    let minted = |user: &str| {
        member
            .client_certificate_kubeconfig(user, &["system:masters"], Duration::from_secs(600))
            .unwrap()
            .0
    };
    put_secret(
        &host,
        "default",
        "one",
        "true",
        Some(minted("a").as_bytes()),
        &[],
    )
    .await;
    let run = Running::start(&host, opts(Namespaces::default()));
    eventually("engaged", DEADLINE, || run.names() == ["one"]).await;
    let cluster = run.provider.get(&ClusterName::new("one")).await.unwrap();
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    let lists = member.request_count("list", "configmaps");
    let id = cluster.id();

    // New client certificate, same server and CA.
    put_secret(
        &host,
        "default",
        "one",
        "true",
        Some(minted("b").as_bytes()),
        &[],
    )
    .await;
    eventually("the credentials renewed in place", DEADLINE, || {
        cluster
            .credentials()
            .is_some_and(|c| c.status().renewals == 1)
    })
    .await;
    // Then a bearer token (still only credentials).
    let token_kc = kubeconfig_of(&member);
    put_secret(
        &host,
        "default",
        "one",
        "true",
        Some(token_kc.as_bytes()),
        &[],
    )
    .await;
    eventually("the token renewed in place", DEADLINE, || {
        cluster
            .credentials()
            .is_some_and(|c| c.status().renewals == 2)
    })
    .await;
    assert_eq!(run.id("one"), Some(id), "same instance");
    Api::<ConfigMap>::namespaced(member.client(), "default")
        .create(&PostParams::default(), &configmap("after", "owl"))
        .await
        .unwrap();
    eventually("the informer keeps working", DEADLINE, || {
        informer.get(Some("default"), "after").is_some()
    })
    .await;
    assert_eq!(
        member.request_count("list", "configmaps"),
        lists,
        "no relist"
    );

    // A different server is a new cluster.
    let other = TestCluster::start_https("other").await.unwrap();
    put_secret(
        &host,
        "default",
        "one",
        "true",
        Some(kubeconfig_of(&other).as_bytes()),
        &[],
    )
    .await;
    eventually("replaced for a new server", DEADLINE, || {
        run.id("one").is_some_and(|new| new != id)
    })
    .await;
    run.stop().await;
}
