//! Labelled Secrets become engaged clusters served through their own clients and caches; a
//! re-pointed Secret re-engages, an unrelated change does not.

mod common;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use mcr_core::{ClusterName, Provider, cluster_not_found};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::{KubeconfigProvider, Namespaces, SecretRef, SecretState};

use common::*;

#[tokio::test]
async fn engages_secrets_and_serves_their_clusters() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let cms = Api::<ConfigMap>::namespaced(m1.client(), "default");
    cms.create(
        &PostParams::default(),
        &animal_configmap("existing", "elephant"),
    )
    .await
    .unwrap();
    Api::<ConfigMap>::namespaced(m2.client(), "default")
        .create(&PostParams::default(), &animal_configmap("other", "lion"))
        .await
        .unwrap();
    put_secret(
        &host,
        "default",
        "one",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "default",
        "two",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[],
    )
    .await;

    let provider = KubeconfigProvider::new(host.client(), opts(Namespaces::default()));
    provider
        .index_field(&animal_index("animal-before"))
        .await
        .unwrap();
    let run = Running::start_provider(provider);
    // Engaged with the manager first (the registry), then activated once synced (the
    // provider's own names): wait for both.
    eventually("both clusters engaged and active", DEADLINE, || {
        run.names() == ["one", "two"] && run.provider.names() == run.registry.names()
    })
    .await;

    // Existing objects, through the member's own client and its cache.
    let one = run.provider.get(&ClusterName::new("one")).await.unwrap();
    let listed = Api::<ConfigMap>::namespaced(one.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("existing"))
    );
    let informer = one.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert!(informer.get(Some("default"), "existing").is_some());
    assert!(
        informer.get(Some("default"), "other").is_none(),
        "cluster one is member-1 only"
    );

    // New and updated objects.
    cms.create(&PostParams::default(), &animal_configmap("new", "zebra"))
        .await
        .unwrap();
    eventually("new configmap cached", DEADLINE, || {
        informer.get(Some("default"), "new").is_some()
    })
    .await;
    let mut existing = cms.get("existing").await.unwrap();
    existing.data = Some(BTreeMap::from([(
        "animal".to_string(),
        "hungry-elephant".to_string(),
    )]));
    cms.replace("existing", &PostParams::default(), &existing)
        .await
        .unwrap();
    eventually("update cached", DEADLINE, || {
        informer
            .get(Some("default"), "existing")
            .and_then(|c| c.data.clone())
            .and_then(|d| d.get("animal").cloned())
            == Some("hungry-elephant".to_string())
    })
    .await;

    // An index registered before the clusters appeared, and one registered after.
    let two = run.registry.get(&ClusterName::new("two")).unwrap();
    eventually("index before: per cluster", DEADLINE, || {
        one.cache()
            .list_by_index::<ConfigMap>("animal-before", "zebra")
            .map(|v| v.len())
            .ok()
            == Some(1)
            && two
                .cache()
                .list_by_index::<ConfigMap>("animal-before", "zebra")
                .map(|v| v.len())
                .ok()
                == Some(0)
            && two
                .cache()
                .list_by_index::<ConfigMap>("animal-before", "lion")
                .map(|v| v.len())
                .ok()
                == Some(1)
    })
    .await;
    run.provider
        .index_field(&animal_index("animal-after"))
        .await
        .unwrap();
    eventually("index after: per cluster", DEADLINE, || {
        one.cache()
            .list_by_index::<ConfigMap>("animal-after", "lion")
            .map(|v| v.len())
            .ok()
            == Some(0)
            && two
                .cache()
                .list_by_index::<ConfigMap>("animal-after", "lion")
                .map(|v| v.len())
                .ok()
                == Some(1)
    })
    .await;

    let err = run
        .provider
        .get(&ClusterName::new("nope"))
        .await
        .unwrap_err();
    assert!(cluster_not_found(&err).is_some());
    run.stop().await;
}

#[tokio::test]
async fn repointed_secret_reengages_annotation_change_does_not() {
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
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "a",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("engaged", DEADLINE, || run.id("a").is_some()).await;
    let first = run.id("a").unwrap();

    let rv = put_secret(
        &host,
        "default",
        "a",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[("note", "hi")],
    )
    .await;
    eventually("annotation change observed", DEADLINE, || {
        run.provider
            .status(&SecretRef::new("default", "a"))
            .is_some_and(|s| {
                s.resource_version.as_deref() == Some(rv.as_str())
                    && matches!(s.state, SecretState::Engaged { .. })
            })
    })
    .await;
    assert_eq!(
        run.id("a"),
        Some(first),
        "annotation-only change keeps the instance"
    );

    put_secret(
        &host,
        "default",
        "a",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[("note", "hi")],
    )
    .await;
    eventually("re-engaged", DEADLINE, || {
        run.id("a").is_some_and(|id| id != first)
    })
    .await;
    let a = run.registry.get(&ClusterName::new("a")).unwrap();
    let informer = a.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert!(
        informer.get(Some("default"), "only-on-2").is_some(),
        "now talks to member-2"
    );
    run.stop().await;
}
