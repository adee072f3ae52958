//! The Secret strategy: exactly one labelled Secret per profile, watched; untrusted kubeconfigs.

mod common;

use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_cluster_inventory::{Options, ProfileState, Strategy};
use serde_json::json;

use common::*;

fn secret_opts() -> Options {
    fast(Options::new(Strategy::Secret {
        consumer: CONSUMER.into(),
    }))
}

#[tokio::test]
async fn one_labelled_secret_per_profile_is_engaged_and_watched() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let m2 = TestCluster::start_https("m2").await.unwrap();
    let run = Running::start(&hub, secret_opts());

    put_profile(&hub, "default", "p1", status(true, json!({}))).await;
    eventually("no Secret reported", DEADLINE, || {
        matches!(run.state("default", "p1"), Some(ProfileState::Invalid { reason }) if reason.contains("no Secret"))
    })
    .await;
    // A Secret for another consumer is not ours.
    put_secret(
        &hub,
        "default",
        "other",
        "someone-else",
        "p1",
        Some(&kubeconfig_of(&m1)),
    )
    .await;
    put_secret(
        &hub,
        "default",
        "s1",
        CONSUMER,
        "p1",
        Some(&kubeconfig_of(&m1)),
    )
    .await;
    eventually("p1 engaged", DEADLINE, || run.names() == ["default/p1"]).await;
    let first = run.id("default/p1").unwrap();

    // A second matching Secret is a per-profile error; the engaged cluster is kept.
    put_secret(
        &hub,
        "default",
        "s2",
        CONSUMER,
        "p1",
        Some(&kubeconfig_of(&m2)),
    )
    .await;
    eventually("two Secrets reported", DEADLINE, || {
        matches!(run.state("default", "p1"), Some(ProfileState::Invalid { reason })
            if reason.contains("2 Secrets match") && reason.contains("default/s1") && reason.contains("default/s2"))
    })
    .await;
    assert_eq!(run.id("default/p1"), Some(first));

    // The first goes away: the remaining Secret (another member) re-engages the name.
    delete_secret(&hub.client(), "default", "s1").await;
    eventually("p1 re-engaged on m2", DEADLINE, || {
        run.id("default/p1").is_some_and(|id| id != first)
            && matches!(
                run.state("default", "p1"),
                Some(ProfileState::Engaged { .. })
            )
    })
    .await;
    let second = run.id("default/p1").unwrap();
    let client = run.registry.get(&"default/p1".into()).unwrap().client();
    let version = client.apiserver_version().await.unwrap();
    assert!(!version.git_version.is_empty());

    // A Secret without the Config key.
    put_secret(&hub, "default", "s2", CONSUMER, "p1", None).await;
    eventually("missing key reported", DEADLINE, || {
        matches!(run.state("default", "p1"), Some(ProfileState::Invalid { reason }) if reason.contains("data key Config"))
    })
    .await;
    assert_eq!(run.id("default/p1"), Some(second), "kept while invalid");
    run.stop().await;
}

#[tokio::test]
async fn exec_and_file_references_in_secrets_are_refused_by_default() {
    init_tracing();
    let hub = hub().await;
    let run = Running::start(&hub, secret_opts());
    let exec = r#"
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch /tmp/pwned"]}}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"#;
    let file = r#"
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"#;
    put_profile(&hub, "default", "exec", status(true, json!({}))).await;
    put_profile(&hub, "default", "file", status(true, json!({}))).await;
    put_secret(&hub, "default", "exec", CONSUMER, "exec", Some(exec)).await;
    put_secret(&hub, "default", "file", CONSUMER, "file", Some(file)).await;
    eventually("both refused", DEADLINE, || {
        let refused = |name| {
            matches!(run.state("default", name), Some(ProfileState::PolicyDenied { reason })
                if reason.contains(&format!("default/{name}")))
        };
        refused("exec") && refused("file")
    })
    .await;
    let Some(ProfileState::PolicyDenied { reason }) = run.state("default", "exec") else {
        unreachable!()
    };
    assert!(reason.contains("sh"), "names the command: {reason}");
    assert!(run.names().is_empty());
    run.stop().await;
}
