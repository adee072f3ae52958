//! Engage on ready (not before), disengage on delete and on deletionTimestamp, in v1beta2 and
//! v1beta1; options: not-ready policy, pause, predicate, watch-filter label selector.

mod common;

use std::sync::Arc;

use common::*;
use mcr_core::scope::Namespaces;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_capi::{CapiVersion, ClusterState, NotReady, Options, Paused, WATCH_FILTER_LABEL};
use serde_json::json;

async fn engage_on_ready_and_disengage_on_delete(version: CapiVersion) {
    init_tracing();
    let host = management().await;
    create_namespace(&host.client(), "fleet", &[]).await;
    let w1 = TestCluster::start_https("w1").await.unwrap();
    let w2 = TestCluster::start_https("w2").await.unwrap();
    create_cluster(&host, version, "fleet", "c1", false, &[]).await;
    create_cluster(&host, version, "fleet", "c2", true, &[]).await;
    put_secret(
        &host,
        "fleet",
        "c1",
        Some(kubeconfig_of(&w1).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "fleet",
        "c2",
        Some(kubeconfig_of(&w2).as_bytes()),
        &[],
    )
    .await;

    let run = Running::start(&host, opts(version, Namespaces::One("fleet".into())));
    eventually("c2 engaged, c1 seen as not ready", WAIT, || {
        run.has("fleet/c2") && run.state("fleet", "c1") == Some(ClusterState::NotReady)
    })
    .await;
    assert!(!run.has("fleet/c1"), "not engaged before it is ready");
    assert!(run.engagements("fleet/c1").is_empty());

    set_ready(&host, version, "fleet", "c1", true).await;
    eventually("c1 engaged once ready", WAIT, || run.has("fleet/c1")).await;
    assert!(matches!(
        run.state("fleet", "c1"),
        Some(ClusterState::Engaged { .. })
    ));
    // The engaged client talks to the workload cluster of the Secret.
    let client = run.registry.get(&"fleet/c1".into()).unwrap().client();
    client.apiserver_version().await.unwrap();

    // Deleted: disengaged, and its status is gone.
    delete_cluster(&host, version, "fleet", "c1").await;
    eventually("c1 disengaged on delete", WAIT, || !run.has("fleet/c1")).await;
    eventually("c1 status gone", WAIT, || {
        run.state("fleet", "c1").is_none()
    })
    .await;

    // A deletionTimestamp (held by a finalizer) disengages too.
    patch_cluster(
        &host,
        version,
        "fleet",
        "c2",
        json!({"metadata": {"finalizers": ["test.mcr/hold"]}}),
    )
    .await;
    delete_cluster(&host, version, "fleet", "c2").await;
    eventually("c2 disengaged on deletionTimestamp", WAIT, || {
        !run.has("fleet/c2")
    })
    .await;
    patch_cluster(
        &host,
        version,
        "fleet",
        "c2",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert_eq!(run.engagements("fleet/c2").len(), 1, "engaged exactly once");
    run.stop().await;
}

#[tokio::test]
async fn v1beta2_engages_on_ready_and_disengages_on_delete() {
    engage_on_ready_and_disengage_on_delete(CapiVersion::V1Beta2).await;
}

#[tokio::test]
async fn v1beta1_engages_on_ready_and_disengages_on_delete() {
    engage_on_ready_and_disengage_on_delete(CapiVersion::V1Beta1).await;
}

#[tokio::test]
async fn not_ready_pause_predicate_and_watch_filter_options() {
    init_tracing();
    let v = CapiVersion::V1Beta2;
    let host = management().await;
    create_namespace(&host.client(), "fleet", &[]).await;
    let w = TestCluster::start_https("w").await.unwrap();
    let filter = [(WATCH_FILTER_LABEL, "mine")];
    for name in ["flappy", "paused", "skipped"] {
        create_cluster(&host, v, "fleet", name, true, &filter).await;
        put_secret(
            &host,
            "fleet",
            name,
            Some(kubeconfig_of(&w).as_bytes()),
            &[],
        )
        .await;
    }
    create_cluster(
        &host,
        v,
        "fleet",
        "other-filter",
        true,
        &[(WATCH_FILTER_LABEL, "theirs")],
    )
    .await;
    put_secret(
        &host,
        "fleet",
        "other-filter",
        Some(kubeconfig_of(&w).as_bytes()),
        &[],
    )
    .await;
    patch_cluster(
        &host,
        v,
        "fleet",
        "paused",
        json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}}),
    )
    .await;

    let run = Running::start(
        &host,
        Options {
            label_selector: Some(format!("{WATCH_FILTER_LABEL}=mine")),
            predicate: Some(Arc::new(|c| c.metadata.name.as_deref() != Some("skipped"))),
            not_ready: NotReady::Disengage,
            paused: Paused::Disengage,
            ..opts(v, Namespaces::One("fleet".into()))
        },
    );
    eventually("flappy engaged, paused and skipped not", WAIT, || {
        run.has("fleet/flappy")
            && run.state("fleet", "paused") == Some(ClusterState::Paused)
            && run.state("fleet", "skipped") == Some(ClusterState::Filtered)
    })
    .await;
    assert_eq!(run.names(), ["fleet/flappy"]);
    assert_eq!(
        run.state("fleet", "other-filter"),
        None,
        "the server never sent it"
    );

    // NotReady::Disengage: a ready cluster that stops being ready leaves, and comes back.
    set_ready(&host, v, "fleet", "flappy", false).await;
    eventually("flappy disengaged", WAIT, || !run.has("fleet/flappy")).await;
    assert_eq!(run.state("fleet", "flappy"), Some(ClusterState::NotReady));
    set_ready(&host, v, "fleet", "flappy", true).await;
    eventually("flappy engaged again", WAIT, || run.has("fleet/flappy")).await;
    assert_eq!(run.engagements("fleet/flappy").len(), 2);

    // Unpaused (spec.paused false, annotation removed): engaged; spec.paused: disengaged.
    patch_cluster(
        &host,
        v,
        "fleet",
        "paused",
        json!({"metadata": {"annotations": null}}),
    )
    .await;
    eventually("unpaused cluster engaged", WAIT, || run.has("fleet/paused")).await;
    patch_cluster(
        &host,
        v,
        "fleet",
        "paused",
        json!({"spec": {"paused": true}}),
    )
    .await;
    eventually("paused cluster disengaged", WAIT, || {
        !run.has("fleet/paused")
    })
    .await;

    // Default policy (Keep): a cluster that stops being ready stays engaged.
    run.stop().await;
    let keep = Running::start(&host, opts(v, Namespaces::One("fleet".into())));
    eventually("flappy engaged", WAIT, || keep.has("fleet/flappy")).await;
    let id = keep.id("fleet/flappy");
    set_ready(&host, v, "fleet", "flappy", false).await;
    set_ready(&host, v, "fleet", "flappy", true).await;
    // One watch stream delivers in order: once a Cluster created after those changes is
    // engaged, both were handled. Had "not ready" disengaged flappy, its status would have
    // gone to NotReady, then Pending, then Engaged with a new instance.
    put_secret(
        &host,
        "fleet",
        "sentinel",
        Some(kubeconfig_of(&w).as_bytes()),
        &[],
    )
    .await;
    create_cluster(&host, v, "fleet", "sentinel", true, &[]).await;
    eventually("sentinel engaged", WAIT, || keep.has("fleet/sentinel")).await;
    let first = ClusterState::Engaged { id: id.unwrap() };
    assert_eq!(
        keep.state("fleet", "flappy"),
        Some(first),
        "kept engaged through not ready"
    );
    assert_eq!(keep.id("fleet/flappy"), id);
    assert_eq!(keep.engagements("fleet/flappy").len(), 1);
    keep.stop().await;
}
