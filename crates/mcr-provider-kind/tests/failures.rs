//! Failures: a failing list, broken clusters among good ones, a hanging `kind`, a missing
//! `kind` binary.

mod common;

use std::time::Duration;

use common::{FakeKind, KindRun, Running, WAIT, init_tracing, nowhere};
use mcr_core::{Engagements, ProviderRunnable};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kind::{KindProvider, Options};
use tokio_util::sync::CancellationToken;

/// The reason of `name`'s failure, waited for (bounded): between two attempts it is failed,
/// during one pending.
async fn failure(running: &Running, name: &str) -> String {
    let mut reason = None;
    eventually(&format!("{name} to report its failure"), WAIT, || {
        reason = running.failure(name);
        reason.is_some()
    })
    .await;
    reason.unwrap_or_default()
}

#[tokio::test]
async fn a_failing_list_keeps_known_clusters_and_recovers() {
    let kind = FakeKind::new();
    let a = TestCluster::start_https("a").await.unwrap();
    let b = TestCluster::start_https("b").await.unwrap();
    kind.set("fleet-a", &a);
    let running = Running::start(kind.options());
    eventually("fleet-a to join", WAIT, || running.names() == ["fleet-a"]).await;
    let id = running.id("fleet-a");

    // Docker goes down: the list fails. Meanwhile a cluster is added and the known one is
    // gone from kind's state; neither is acted on while kind cannot list.
    kind.fail_list(true);
    let lists = kind.count("get clusters");
    kind.set("fleet-b", &b);
    kind.remove("fleet-a");
    eventually("three failed lists", WAIT, || {
        kind.count("get clusters") >= lists + 3
    })
    .await;
    assert_eq!(running.names(), ["fleet-a"], "known clusters are kept");
    assert_eq!(running.id("fleet-a"), id, "and keep their instance");
    assert!(!running.task.is_finished(), "a failing list is not fatal");

    kind.fail_list(false);
    eventually("the fleet to follow kind again", WAIT, || {
        running.names() == ["fleet-b"]
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn a_failing_first_list_is_retried() {
    let kind = FakeKind::new();
    let a = TestCluster::start_https("a").await.unwrap();
    kind.fail_list(true);
    kind.set("fleet-a", &a);
    let running = Running::start(kind.options());
    eventually("two failed lists", WAIT, || kind.count("get clusters") >= 2).await;
    assert!(!running.task.is_finished(), "not fatal, unlike Go");
    kind.fail_list(false);
    eventually("fleet-a to join", WAIT, || running.names() == ["fleet-a"]).await;
    running.stop().await;
}

#[tokio::test]
async fn broken_clusters_are_isolated_and_retried() {
    let kind = FakeKind::new();
    let good = TestCluster::start_https("good").await.unwrap();
    let down = TestCluster::start_https("down").await.unwrap();
    let garbage = TestCluster::start_https("garbage").await.unwrap();
    let slow = TestCluster::start_https("slow").await.unwrap();
    down.stop().await;
    kind.set("fleet-good", &good);
    // Not a kubeconfig, with something that looks like a secret in it.
    kind.set_raw("fleet-garbage", "token: s3cr3t-t0ken\n  : [ not yaml");
    // Its API server does not answer.
    kind.set("fleet-down", &down);
    // `kind get kubeconfig` hangs until killed by the command timeout.
    kind.hang("fleet-slow", true);
    let mut options = Options {
        command_timeout: Duration::from_secs(1),
        ..kind.options()
    };
    options.members.sync_timeout = Duration::from_secs(2);
    let running = Running::start(options);

    eventually("the good cluster to join", WAIT, || {
        running.names() == ["fleet-good"]
    })
    .await;
    // Each reports its own failure (between two of its attempts; pending during one).
    let garbage_err = failure(&running, "fleet-garbage").await;
    assert!(garbage_err.contains("fleet-garbage"), "{garbage_err}");
    assert!(
        !garbage_err.contains("s3cr3t"),
        "no kubeconfig content: {garbage_err}"
    );
    let down_err = failure(&running, "fleet-down").await;
    assert!(
        down_err.contains("fleet-down") && down_err.contains("unreachable"),
        "{down_err}"
    );
    assert!(
        !down_err.contains(down.token()),
        "no credential: {down_err}"
    );
    let slow_err = failure(&running, "fleet-slow").await;
    assert!(
        slow_err.contains("--name fleet-slow") && slow_err.contains("killed"),
        "{slow_err}"
    );

    // Each is retried on its own and joins once it is fixed.
    let attempts = kind.count("get kubeconfig --name fleet-garbage");
    eventually("fleet-garbage to be retried", WAIT, || {
        kind.count("get kubeconfig --name fleet-garbage") >= attempts + 2
    })
    .await;
    kind.set("fleet-garbage", &garbage);
    down.restart().await.unwrap();
    kind.set("fleet-slow", &slow);
    kind.hang("fleet-slow", false);
    eventually("every cluster to join", WAIT, || {
        running.names() == ["fleet-down", "fleet-garbage", "fleet-good", "fleet-slow"]
    })
    .await;
    eventually("the failures to clear", WAIT, || {
        running.failed().is_empty()
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn a_kubeconfig_with_an_exec_plugin_is_refused_by_default() {
    let kind = FakeKind::new();
    let a = TestCluster::start_https("a").await.unwrap();
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("exec-ran");
    let url = a.url().unwrap();
    kind.set_raw(
        "fleet-exec",
        &format!(
            r#"apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{url}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch {marker}"]}}}}}}]
contexts: [{{name: kind-fleet-exec, context: {{cluster: c, user: u}}}}]
current-context: kind-fleet-exec
"#,
            marker = marker.display()
        ),
    );
    kind.set("fleet-a", &a);
    let running = Running::start(kind.options());
    eventually("fleet-a to join and fleet-exec to fail", WAIT, || {
        running.names() == ["fleet-a"] && running.failure("fleet-exec").is_some()
    })
    .await;
    let err = failure(&running, "fleet-exec").await;
    assert!(
        err.contains("fleet-exec") && err.contains("exec policy"),
        "{err}"
    );
    assert!(!marker.exists(), "the plugin never ran");
    running.stop().await;
}

#[tokio::test]
async fn hanging_clusters_do_not_hold_up_the_others() {
    let kind = FakeKind::new();
    for i in 1..=6 {
        kind.hang(&format!("fleet-hang-{i}"), true);
    }
    // Far longer than the test's deadline: the hanging runs must not be waited for.
    let running = Running::start(Options {
        command_timeout: Duration::from_secs(600),
        ..kind.options()
    });
    eventually("every hanging cluster to be asked once", WAIT, || {
        (1..=6).all(|i| kind.count(&format!("get kubeconfig --name fleet-hang-{i}")) == 1)
    })
    .await;
    let a = TestCluster::start_https("a").await.unwrap();
    kind.set("fleet-a", &a);
    eventually("fleet-a to join", WAIT, || running.names() == ["fleet-a"]).await;
    // Stopping kills the hanging runs (the test would wait for them otherwise).
    running.stop().await;
}

#[tokio::test]
async fn a_missing_kind_binary_fails_at_start_with_install_hint() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let missing = nowhere(dir.path());
    let provider = KindProvider::new(Options {
        kind_bin: Some(missing.clone()),
        ..Options::default()
    });
    let run = provider.start(CancellationToken::new(), Engagements::new());
    let err = tokio::time::timeout(WAIT, run)
        .await
        .expect("fails at once")
        .unwrap_err();
    // The provider's error is the source of the manager-facing error: print the whole chain.
    let err = mcr_core::ErrorChain(&err).to_string();
    assert!(
        err.contains(&format!("{missing:?} does not exist")),
        "{err}"
    );
    assert!(err.contains("https://kind.sigs.k8s.io"), "{err}");

    let provider = KindProvider::new(Options {
        kind_bin: Some("mcr-test-no-such-kind".into()),
        ..Options::default()
    });
    let run = provider.start(CancellationToken::new(), Engagements::new());
    let err = tokio::time::timeout(WAIT, run)
        .await
        .expect("fails at once")
        .unwrap_err();
    // The provider's error is the source of the manager-facing error: print the whole chain.
    let err = mcr_core::ErrorChain(&err).to_string();
    assert!(
        err.contains("\"mcr-test-no-such-kind\" was not found on PATH ("),
        "{err}"
    );
    assert!(err.contains("install kind"), "{err}");
}
