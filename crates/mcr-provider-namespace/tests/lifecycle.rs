//! Namespaces become clusters and leave the fleet again.

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use mcr_core::{Error, Provider};
use mcr_envtest::TestCluster;
use mcr_provider_namespace::Options;
use support::{DEADLINE, Running, create_namespace, eventually, init_tracing, test_opts};

#[tokio::test]
async fn namespaces_are_listed_added_and_removed() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    create_namespace(&host, "team-a", &[]).await;
    create_namespace(&host, "team-b", &[]).await;
    let run = Running::start(env, test_opts());

    // Existing namespaces, without the excluded system namespaces.
    // Engaged (the registry), then active in the provider once synced.
    eventually("initial namespaces", DEADLINE, || {
        run.names() == ["default", "team-a", "team-b"]
            && run.provider.names() == run.registry.names()
    })
    .await;
    assert_eq!(
        run.provider.get(&"team-a".into()).await.unwrap().name(),
        "team-a"
    );

    // A new namespace joins.
    create_namespace(&host, "team-c", &[]).await;
    eventually("team-c engaged", DEADLINE, || {
        run.names().contains(&"team-c".into())
    })
    .await;

    // A deleted namespace leaves: the fleet shrinks and lookups say ClusterNotFound.
    let team_b = run.registry.get(&"team-b".into()).unwrap();
    let team_b_cms = team_b.cache().informer::<ConfigMap>();
    team_b_cms.wait_for_sync(support::SYNC).await.unwrap();
    Api::<Namespace>::all(host.clone())
        .delete("team-b", &DeleteParams::default())
        .await
        .unwrap();
    eventually("team-b disengaged", DEADLINE, || {
        run.names() == ["default", "team-a", "team-c"]
    })
    .await;
    let err = run.provider.get(&"team-b".into()).await.unwrap_err();
    assert!(
        matches!(err, Error::ClusterNotFound(ref n) if n == "team-b"),
        "{err}"
    );
    // Its cache stopped with it.
    eventually("team-b cache stopped", DEADLINE, || team_b_cms.is_stopped()).await;

    run.stop().await;
}

#[tokio::test]
async fn terminating_namespace_leaves_before_it_is_gone() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    // A finalizer keeps the namespace in Terminating after deletion.
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("held".into()),
            finalizers: Some(vec!["example.com/hold".into()]),
            ..Default::default()
        },
        ..Default::default()
    };
    let namespaces = Api::<Namespace>::all(host.clone());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let run = Running::start(env, test_opts());
    run.wait_for("held").await;

    namespaces
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    eventually("held disengaged", DEADLINE, || {
        !run.names().contains(&"held".into())
    })
    .await;
    let still_there = namespaces.get("held").await.unwrap();
    assert!(still_there.metadata.deletion_timestamp.is_some());
    assert!(run.provider.get(&"held".into()).await.is_err());

    run.stop().await;
}

#[tokio::test]
async fn label_selector_and_exclusions() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    create_namespace(&host, "tenant-a", &[("tenant", "true")]).await;
    create_namespace(&host, "tenant-skip", &[("tenant", "true")]).await;
    create_namespace(&host, "plain", &[]).await;
    let run = Running::start(
        env,
        Options {
            label_selector: Some("tenant=true".into()),
            excluded: vec!["tenant-skip".into()],
            ..test_opts()
        },
    );
    eventually("tenant-a engaged", DEADLINE, || run.names() == ["tenant-a"]).await;
    create_namespace(&host, "plain-2", &[]).await;
    create_namespace(&host, "tenant-b", &[("tenant", "true")]).await;
    eventually("tenant-b engaged", DEADLINE, || {
        run.names() == ["tenant-a", "tenant-b"]
    })
    .await;
    assert_eq!(run.names(), ["tenant-a", "tenant-b"]);
    run.stop().await;
}

#[tokio::test]
async fn stopping_the_provider_disengages_everything() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    create_namespace(&env.client(), "team-a", &[]).await;
    let run = Running::start(env, test_opts());
    run.wait_for("team-a").await;
    let registry = run.registry.clone();
    let provider = run.provider.clone();
    run.stop().await;
    eventually("all disengaged", DEADLINE, || registry.names().is_empty()).await;
    assert!(provider.names().is_empty());
}
