//! Readiness, deletion, naming and re-engagement, driven through the Secret strategy (no
//! plugin needed; the access-provider strategy is tested with a real plugin in
//! `examples/cluster-inventory`).

mod common;

use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_cluster_inventory::{ClusterProfile, Naming, Options, ProfileState, Strategy};
use serde_json::json;

use common::*;

fn secret_opts() -> Options {
    fast(Options::new(Strategy::Secret {
        consumer: CONSUMER.into(),
    }))
}

#[tokio::test]
async fn unhealthy_then_healthy_then_unhealthy_then_deleted() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let run = Running::start(&hub, secret_opts());
    put_secret(
        &hub,
        "default",
        "s1",
        CONSUMER,
        "p1",
        Some(&kubeconfig_of(&m1)),
    )
    .await;
    put_profile(&hub, "default", "p1", status(false, json!({}))).await;
    eventually("not ready", DEADLINE, || {
        run.state("default", "p1") == Some(ProfileState::NotReady { engaged: false })
    })
    .await;
    assert!(run.names().is_empty());

    put_profile(&hub, "default", "p1", status(true, json!({}))).await;
    eventually("engaged once healthy", DEADLINE, || {
        run.names() == ["default/p1"]
    })
    .await;
    let id = run.id("default/p1").unwrap();

    // Health lost: kept engaged by default.
    let rv = put_profile(&hub, "default", "p1", status(false, json!({}))).await;
    eventually("unhealthy seen", DEADLINE, || {
        run.settled_at("default", "p1", &rv)
    })
    .await;
    assert_eq!(
        run.state("default", "p1"),
        Some(ProfileState::NotReady { engaged: true })
    );
    assert_eq!(run.id("default/p1"), Some(id));

    // Healthy again with the same connection: same instance.
    let rv = put_profile(&hub, "default", "p1", status(true, json!({}))).await;
    eventually("healthy seen", DEADLINE, || {
        run.settled_at("default", "p1", &rv)
    })
    .await;
    assert_eq!(run.id("default/p1"), Some(id));

    delete_profile(&hub, "default", "p1").await;
    eventually("removed on deletion", DEADLINE, || {
        run.names().is_empty() && run.state("default", "p1").is_none()
    })
    .await;
    run.stop().await;
}

#[tokio::test]
async fn deletion_timestamp_disengages_and_health_loss_can_disengage() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let run = Running::start(
        &hub,
        Options {
            disengage_when_unhealthy: true,
            ..secret_opts()
        },
    );
    put_secret(
        &hub,
        "default",
        "s1",
        CONSUMER,
        "p1",
        Some(&kubeconfig_of(&m1)),
    )
    .await;
    put_secret(
        &hub,
        "default",
        "s2",
        CONSUMER,
        "p2",
        Some(&kubeconfig_of(&m1)),
    )
    .await;
    put_profile_with(
        &hub,
        "default",
        "p1",
        status(true, json!({})),
        json!({"finalizers": ["test.mcr/hold"]}),
    )
    .await;
    put_profile(&hub, "default", "p2", status(true, json!({}))).await;
    eventually("both engaged", DEADLINE, || {
        run.names() == ["default/p1", "default/p2"]
    })
    .await;

    // Deleting a profile with a finalizer only sets deletionTimestamp: that disengages.
    delete_profile(&hub, "default", "p1").await;
    eventually("p1 disengaged", DEADLINE, || run.names() == ["default/p2"]).await;

    put_profile(&hub, "default", "p2", status(false, json!({}))).await;
    eventually("p2 disengaged when unhealthy", DEADLINE, || {
        run.names().is_empty()
            && run.state("default", "p2") == Some(ProfileState::NotReady { engaged: false })
    })
    .await;
    put_profile(&hub, "default", "p2", status(true, json!({}))).await;
    eventually("p2 back", DEADLINE, || run.names() == ["default/p2"]).await;
    run.stop().await;
}

#[tokio::test]
async fn only_a_material_change_re_engages() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let m2 = TestCluster::start_https("m2").await.unwrap();
    let run = Running::start(&hub, secret_opts());
    put_secret(
        &hub,
        "default",
        "s1",
        CONSUMER,
        "p1",
        Some(&kubeconfig_of(&m1)),
    )
    .await;
    put_profile(&hub, "default", "p1", status(true, json!({}))).await;
    eventually("engaged", DEADLINE, || run.names() == ["default/p1"]).await;
    let id = run.id("default/p1").unwrap();

    // Properties, version, labels: the profile changes, the connection does not.
    for i in 0..3 {
        let extra = json!({"properties": [{"name": "n", "value": i.to_string()}], "version": {"kubernetes": "1.37"}});
        let rv = put_profile_with(
            &hub,
            "default",
            "p1",
            status(true, extra),
            json!({"labels": {"i": i.to_string()}}),
        )
        .await;
        eventually("update seen", DEADLINE, || {
            run.settled_at("default", "p1", &rv)
        })
        .await;
        assert_eq!(
            run.id("default/p1"),
            Some(id),
            "update {i} kept the instance"
        );
    }
    // The Secret now points at another server: re-engaged.
    put_secret(
        &hub,
        "default",
        "s1",
        CONSUMER,
        "p1",
        Some(&kubeconfig_of(&m2)),
    )
    .await;
    eventually("re-engaged", DEADLINE, || {
        run.id("default/p1").is_some_and(|new| new != id)
    })
    .await;
    run.stop().await;
}

#[tokio::test]
async fn clusters_can_be_named_by_the_clusterset_property() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let run = Running::start(
        &hub,
        Options {
            naming: Naming::ClusterSetProperty,
            ..secret_opts()
        },
    );
    let named =
        |v: &str| json!({"properties": [{"name": "cluster.clusterset.k8s.io", "value": v}]});
    let m2 = TestCluster::start_https("m2").await.unwrap();
    for (p, member) in [("a", &m1), ("b", &m2), ("unnamed", &m1)] {
        put_secret(
            &hub,
            "default",
            p,
            CONSUMER,
            p,
            Some(&kubeconfig_of(member)),
        )
        .await;
    }
    put_profile(&hub, "default", "a", status(true, named("eu-1"))).await;
    eventually("named by property", DEADLINE, || run.names() == ["eu-1"]).await;
    put_profile(&hub, "default", "b", status(true, named("eu-1"))).await;
    put_profile(&hub, "default", "unnamed", status(true, json!({}))).await;
    eventually("conflict and missing property reported", DEADLINE, || {
        matches!(run.state("default", "b"), Some(ProfileState::Conflict { owner }) if owner.name == "a")
            && matches!(run.state("default", "unnamed"), Some(ProfileState::Invalid { reason }) if reason.contains("cluster.clusterset.k8s.io"))
    })
    .await;
    // The owner goes away: the other profile (another member) takes the name over.
    let id = run.id("eu-1").unwrap();
    delete_profile(&hub, "default", "a").await;
    eventually("b takes over", DEADLINE, || {
        run.id("eu-1").is_some_and(|new| new != id)
            && matches!(
                run.state("default", "b"),
                Some(ProfileState::Engaged { .. })
            )
    })
    .await;
    run.stop().await;
}

#[tokio::test]
async fn readiness_is_overridable_and_a_malformed_profile_is_isolated() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let run = Running::start(
        &hub,
        Options {
            is_ready: std::sync::Arc::new(|p: &ClusterProfile| p.property("ready") == Some("yes")),
            ..secret_opts()
        },
    );
    for p in ["good", "bad"] {
        put_secret(&hub, "default", p, CONSUMER, p, Some(&kubeconfig_of(&m1))).await;
    }
    // ControlPlaneHealthy is False, but the custom rule only looks at the property.
    let ready = json!({"properties": [{"name": "ready", "value": "yes"}]});
    put_profile(&hub, "default", "good", status(false, ready)).await;
    put_profile(&hub, "default", "bad", json!({"conditions": "not a list"})).await;
    eventually("good engaged, bad reported", DEADLINE, || {
        run.names() == ["default/good"]
            && matches!(run.state("default", "bad"), Some(ProfileState::Invalid { reason })
                if reason.contains("default/bad is malformed"))
    })
    .await;
    run.stop().await;
}
