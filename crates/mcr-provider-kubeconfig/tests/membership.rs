//! What keeps a Secret's cluster in the fleet: deleting the Secret (or marking it for deletion)
//! removes it; a Secret without kubeconfig data is ignored until the data arrives.

mod common;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::{Namespaces, SecretState};

use common::*;

#[tokio::test]
async fn deletion_and_deletion_timestamp_shrink_the_fleet() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "a",
        "true",
        Some(kubeconfig_of(&fleet.clusters()[0]).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "default",
        "b",
        "true",
        Some(kubeconfig_of(&fleet.clusters()[1]).as_bytes()),
        &[],
    )
    .await;
    eventually("both engaged", DEADLINE, || run.names() == ["a", "b"]).await;

    delete_secret(&host.client(), "default", "a").await;
    eventually("a removed", DEADLINE, || run.names() == ["b"]).await;
    assert!(run.state("default", "a").is_none());

    // A finalizer keeps the Secret around with a deletionTimestamp: the cluster goes already.
    let api = Api::<Secret>::namespaced(host.client(), "default");
    let mut b = api.get("b").await.unwrap();
    b.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.replace("b", &PostParams::default(), &b).await.unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    assert!(
        api.get("b")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    eventually("b removed while terminating", DEADLINE, || {
        run.names().is_empty()
    })
    .await;
    run.stop().await;
}

#[tokio::test]
async fn missing_or_empty_key_is_ignored_until_added() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(3).await;
    let kc = |i: usize| kubeconfig_of(&fleet.clusters()[i]);
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "unlabelled",
        "false",
        Some(kc(2).as_bytes()),
        &[],
    )
    .await;
    put_secret(&host, "default", "missing", "true", None, &[]).await;
    put_secret(&host, "default", "empty", "true", Some(b""), &[]).await;
    put_secret(
        &host,
        "default",
        "good",
        "true",
        Some(kc(2).as_bytes()),
        &[],
    )
    .await;
    eventually("good engaged", DEADLINE, || run.names() == ["good"]).await;
    eventually("missing and empty reported", DEADLINE, || {
        run.state("default", "missing") == Some(SecretState::MissingKey)
            && run.state("default", "empty") == Some(SecretState::MissingKey)
    })
    .await;
    assert!(
        run.state("default", "unlabelled").is_none(),
        "label value must be \"true\""
    );

    put_secret(
        &host,
        "default",
        "missing",
        "true",
        Some(kc(0).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "default",
        "empty",
        "true",
        Some(kc(1).as_bytes()),
        &[],
    )
    .await;
    eventually("keys added: engaged", DEADLINE, || {
        run.names() == ["empty", "good", "missing"]
    })
    .await;
    run.stop().await;
}
