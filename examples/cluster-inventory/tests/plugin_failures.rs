//! A credential plugin that hangs, fails or prints garbage affects only its own cluster: the
//! attempt is bounded, reported with a clear per-profile error, retried with backoff, and the
//! plugin's output reaches neither errors nor logs.

#[path = "../../../crates/mcr-provider-cluster-inventory/tests/common/mod.rs"]
mod common;
mod plugin_common;

use std::sync::Arc;
use std::time::Duration;

use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_cluster_inventory::{Options, ProfileState, Strategy};
use serde_json::json;

use common::{DEADLINE, InventoryRun, Running, fast, hub, put_profile, status};
use plugin_common::*;

#[tokio::test]
async fn failing_plugins_are_isolated_bounded_and_retried() {
    // Every log line of the test binary, at debug level.
    let logs = mcr_test_support::Logs::install("debug");
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let plugin = Plugin::new(&[&m1]);
    let opts = Options {
        credential_timeout: Duration::from_secs(2),
        ..fast(Options::new(Strategy::AccessProviders(Arc::new(
            plugin.file("Ignore", "Ignore"),
        ))))
    };
    let run = Running::start(&hub, opts);
    let with = |config| status(true, access(&m1, config, None, None));
    put_profile(
        &hub,
        "default",
        "hang",
        with(json!({"clusterName": "m1", "mode": "hang", "hangSeconds": 6})),
    )
    .await;
    put_profile(
        &hub,
        "default",
        "fail",
        with(json!({"clusterName": "m1", "mode": "fail"})),
    )
    .await;
    put_profile(
        &hub,
        "default",
        "garbage",
        with(json!({"clusterName": "m1", "mode": "garbage"})),
    )
    .await;
    put_profile(&hub, "default", "good", with(json!({"clusterName": "m1"}))).await;

    eventually("good engaged, the others failing", DEADLINE, || {
        let failed = |name| {
            matches!(
                run.state("default", name),
                Some(ProfileState::Failed { .. })
            )
        };
        run.names() == ["default/good"] && failed("hang") && failed("fail") && failed("garbage")
    })
    .await;
    for name in ["hang", "fail", "garbage"] {
        let Some(ProfileState::Failed { reason, .. }) = run.state("default", name) else {
            unreachable!()
        };
        assert!(
            reason.contains(&format!("default/{name}")),
            "names the profile: {reason}"
        );
        assert!(
            !reason.contains(MARKER),
            "no plugin output in errors: {reason}"
        );
        assert!(!reason.contains(m1.token()), "no token in errors: {reason}");
    }
    let Some(ProfileState::Failed { reason, .. }) = run.state("default", "hang") else {
        unreachable!()
    };
    assert!(reason.contains("did not finish within 2s"), "{reason}");

    // Retried with backoff: fixing the profile engages it.
    put_profile(&hub, "default", "fail", with(json!({"clusterName": "m1"}))).await;
    eventually("fixed profile engaged", DEADLINE, || {
        run.names() == ["default/fail", "default/good"]
    })
    .await;
    // The failing plugin was retried (more than one run) while it failed.
    let garbage_runs = plugin
        .invocations()
        .iter()
        .filter(|c| c["config"]["mode"] == "garbage")
        .count();
    assert!(garbage_runs >= 2, "retried: {garbage_runs} runs");
    run.stop().await;

    let logs = logs.text();
    assert!(logs.contains("default/garbage"), "failures are logged");
    assert!(
        !logs.contains(MARKER),
        "plugin output never reaches the logs"
    );
    assert!(!logs.contains(m1.token()), "tokens never reach the logs");
}
