//! A credential plugin that never exits holds up neither its Secret's member nor shutdown.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use mcr_core::kubeconfig::Policy;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::{Namespaces, SecretState};

/// `tc`'s server and CA with a user whose plugin touches `marker`, then never exits.
fn hanging_exec_kubeconfig(tc: &TestCluster, marker: &Path) -> String {
    let kc = tc.kubeconfig().unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    let ca = cluster.certificate_authority_data.unwrap();
    let server = cluster.server.unwrap();
    format!(
        r#"apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", certificate-authority-data: "{ca}"}}}}]
users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch '{}'; exec sleep 100000"], interactiveMode: Never}}}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"#,
        marker.display()
    )
}

#[cfg(unix)]
#[tokio::test]
async fn a_hanging_exec_plugin_fails_its_build_and_never_blocks_the_member_or_shutdown() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("plugin-started");
    let hung = hanging_exec_kubeconfig(m1, &marker);

    let mut options = opts(Namespaces::default());
    options.members.policy = Policy::trusted();
    options.members.client_options.exec_timeout = Some(Duration::from_secs(1));
    let run = Running::start(&host, options);
    put_secret(&host, "default", "m1", "true", Some(hung.as_bytes()), &[]).await;
    eventually("the hung build fails", DEADLINE, || {
        matches!(
            run.state("default", "m1"),
            Some(SecretState::Failed { ref reason, .. }) if reason.contains("did not finish")
        )
    })
    .await;
    // The member still follows its Secret.
    put_secret(
        &host,
        "default",
        "m1",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("engaged", DEADLINE, || run.names() == ["m1"]).await;
    run.stop().await;

    // Shutdown does not wait for a hanging plugin, even with the default 30 s exec timeout.
    std::fs::remove_file(&marker).unwrap();
    let mut options = opts(Namespaces::default());
    options.members.policy = Policy::trusted();
    let run = Running::start(&host, options);
    put_secret(&host, "default", "m1", "true", Some(hung.as_bytes()), &[]).await;
    eventually("the plugin runs", DEADLINE, || marker.exists()).await;
    tokio::time::timeout(Duration::from_secs(10), run.stop())
        .await
        .expect("the provider stopped while a plugin was hanging");
}
