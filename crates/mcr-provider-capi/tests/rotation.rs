//! A kubeconfig Secret rotation that changes only the credentials renews the workload cluster
//! in place: same instance, one engagement, no relist (request counters), informers keep
//! working. A new server is a new instance.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::scope::Namespaces;
use mcr_core::{ClusterName, Provider};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_capi::CapiVersion;

const V: CapiVersion = CapiVersion::V1Beta2;

#[tokio::test]
async fn credential_only_rotation_renews_in_place_without_relist() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    init_tracing();
    let host = management().await;
    create_namespace(&host.client(), "fleet", &[]).await;
    let member = TestCluster::start_https("w1").await.unwrap();
    let minted = |user: &str| minted_kubeconfig(&member, user);
    create_cluster(&host, V, "fleet", "c", true, &[]).await;
    put_secret(&host, "fleet", "c", Some(minted("a").as_bytes()), &[]).await;
    let run = Running::start(&host, opts(V, Namespaces::One("fleet".into())));
    eventually("engaged", WAIT, || run.has("fleet/c")).await;
    let cluster = run
        .provider
        .get(&ClusterName::new("fleet/c"))
        .await
        .unwrap();
    let id = cluster.id();
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(WAIT).await.unwrap();
    let lists = member.request_count("list", "configmaps");

    // A new client certificate, then a bearer token: same server and CA.
    put_secret(&host, "fleet", "c", Some(minted("b").as_bytes()), &[]).await;
    wait_renewals(&cluster, 1, "the certificate renewed in place").await;
    put_secret(
        &host,
        "fleet",
        "c",
        Some(kubeconfig_of(&member).as_bytes()),
        &[],
    )
    .await;
    wait_renewals(&cluster, 2, "the token renewed in place").await;
    assert_eq!(run.id("fleet/c"), Some(id), "same instance");
    assert_eq!(run.engagements("fleet/c"), [id], "engaged once");
    assert_watch_kept(&member, &informer, lists).await;

    // A different server is a new instance.
    let other = TestCluster::start_https("w2").await.unwrap();
    put_secret(
        &host,
        "fleet",
        "c",
        Some(kubeconfig_of(&other).as_bytes()),
        &[],
    )
    .await;
    eventually("replaced for a new server", WAIT, || {
        run.id("fleet/c").is_some_and(|new| new != id)
    })
    .await;
    run.stop().await;
}
