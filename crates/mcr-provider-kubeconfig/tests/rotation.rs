//! A Secret rotation that changes only the credentials renews the running cluster in place: same
//! instance, no relist (request counters), informers keep working.

mod common;

use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::{ClusterName, Provider};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::Namespaces;

use common::*;

#[tokio::test]
async fn credential_only_rotation_renews_in_place_without_relist() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start_https("member").await.unwrap();
    let minted = |user: &str| minted_kubeconfig(&member, user);
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
    // Engaged (the registry), then active in the provider once synced.
    eventually("engaged and active", DEADLINE, || {
        run.names() == ["one"] && run.provider.names() == run.registry.names()
    })
    .await;
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
    wait_renewals(&cluster, 1, "the credentials renewed in place").await;
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
    wait_renewals(&cluster, 2, "the token renewed in place").await;
    assert_eq!(run.id("one"), Some(id), "same instance");
    assert_watch_kept(&member, &informer, lists).await;

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
