//! Secrets are untrusted input: a broken kubeconfig waits for its Secret to change and an
//! unreachable one is retried, without affecting the other clusters, and exec plugins or local
//! file references are refused unless the operator opted in.

mod common;

use std::time::Duration;

use mcr_core::kubeconfig::{ClientOptions, Policy};
use mcr_core::{MemberState, Provider};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::{Namespaces, SecretState};

use common::*;

#[tokio::test]
async fn invalid_waits_for_a_change_unreachable_is_retried_both_isolated() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "bad",
        "true",
        Some(b"clusters: [not: valid"),
        &[],
    )
    .await;
    m2.stop().await;
    put_secret(
        &host,
        "default",
        "down",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "default",
        "good",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("good engaged", DEADLINE, || run.names() == ["good"]).await;
    eventually("bad invalid and down failing", DEADLINE, || {
        matches!(
            run.state("default", "bad"),
            Some(SecretState::Invalid { .. })
        ) && matches!(
            run.state("default", "down"),
            Some(SecretState::Failed { .. })
        )
    })
    .await;
    let Some(SecretState::Failed { reason, .. }) = run.state("default", "down") else {
        unreachable!()
    };
    assert!(reason.contains("\"down\""), "names the cluster: {reason}");
    let Some(SecretState::Invalid { reason }) = run.state("default", "bad") else {
        unreachable!()
    };
    assert!(reason.contains("default/bad"), "names the Secret: {reason}");
    // The table reports its cluster failed, not tried again until the Secret changes.
    let statuses = run.provider.member_statuses();
    let bad = statuses.iter().find(|s| s.name.as_str() == "bad");
    assert!(
        matches!(bad.map(|s| &s.state), Some(MemberState::Failed { reason, retry_in: None }) if reason.contains("default/bad")),
        "{statuses:?}"
    );
    assert!(!reason.contains(m2.token()), "no credentials in errors");

    // The unreachable server comes back: picked up by the retry, no Secret change needed.
    m2.restart().await.unwrap();
    eventually("down engaged after restart", DEADLINE, || {
        run.names() == ["down", "good"]
    })
    .await;
    // Fixing the invalid kubeconfig engages it too.
    put_secret(
        &host,
        "default",
        "bad",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[],
    )
    .await;
    eventually("bad engaged after fix", DEADLINE, || {
        run.names() == ["bad", "down", "good"]
    })
    .await;
    run.stop().await;
}

fn exec_kubeconfig(tc: &TestCluster) -> String {
    let kc = tc.kubeconfig().unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    let ca = cluster.certificate_authority_data.unwrap();
    let server = cluster.server.unwrap();
    format!(
        r#"apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", certificate-authority-data: "{ca}"}}}}]
users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "echo {{}}"], interactiveMode: Never}}}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"#
    )
}

#[tokio::test]
async fn exec_stanza_is_refused_by_default() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "exec",
        "true",
        Some(exec_kubeconfig(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("refused", DEADLINE, || {
        matches!(
            run.state("default", "exec"),
            Some(SecretState::PolicyDenied { .. })
        )
    })
    .await;
    assert!(run.names().is_empty());
    // Replacing it with a plain kubeconfig engages it.
    put_secret(
        &host,
        "default",
        "exec",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("engaged", DEADLINE, || run.names() == ["exec"]).await;
    run.stop().await;
}

/// A kubeconfig that reads a local file (here this process's own "service-account token") and
/// points at a server of its choosing: refused by default, so a hostile Secret cannot make the
/// controller send its own credentials away.
fn token_file_kubeconfig(tc: &TestCluster, token_file: &std::path::Path) -> String {
    let kc = tc.kubeconfig().unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    let ca = cluster.certificate_authority_data.unwrap();
    let server = cluster.server.unwrap();
    let token_file = token_file.display();
    format!(
        r#"apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", certificate-authority-data: "{ca}"}}}}]
users: [{{name: u, user: {{tokenFile: "{token_file}"}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"#
    )
}

#[tokio::test]
async fn local_file_references_are_refused_by_default() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, m1.token()).unwrap();
    // Replacing the client options (to tune a timeout) must not weaken the policy: the file
    // policy is part of `Options::policy`, not of the client options.
    let mut options = opts(Namespaces::default());
    options.members.client_options = ClientOptions {
        read_timeout: Some(Duration::from_secs(60)),
        connect_timeout: Some(Duration::from_secs(5)),
        ..ClientOptions::default()
    };
    let run = Running::start(&host, options);
    put_secret(
        &host,
        "default",
        "files",
        "true",
        Some(token_file_kubeconfig(m1, &token_file).as_bytes()),
        &[],
    )
    .await;
    eventually("refused", DEADLINE, || {
        matches!(
            run.state("default", "files"),
            Some(SecretState::PolicyDenied { ref reason }) if reason.contains("tokenFile") || reason.contains("local file")
        )
    })
    .await;
    assert!(run.names().is_empty());
    run.stop().await;
}

const MARKER: &str = "LEAKED-SECRET-MARKER-5521";

/// A kubeconfig whose `gcp` auth-provider command first gives a token about to expire, then
/// fails printing `MARKER` (also in its arguments). kube would run it at the first request and
/// put the command line and output in its error; mcr refuses it even from a trusted source.
#[cfg(unix)]
fn failing_refresh_kubeconfig(tc: &TestCluster, dir: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let kc = tc.kubeconfig().unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    let ca = cluster.certificate_authority_data.unwrap();
    let server = cluster.server.unwrap();
    let runs = dir.join("runs");
    let script = dir.join("gcloud.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> '{runs}'\nif [ \"$(wc -l < '{runs}')\" -gt 1 ]; then echo \"out {MARKER}\"; exit 3; fi\n\
             exp=$(date -u -d '+20 seconds' +%Y-%m-%dT%H:%M:%SZ)\nprintf '{{\"token\":\"{token}\",\"expiry\":\"%s\"}}\\n' \"$exp\"\n",
            runs = runs.display(),
            token = tc.token()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        r#"apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", certificate-authority-data: "{ca}"}}}}]
users: [{{name: u, user: {{auth-provider: {{name: gcp, config: {{cmd-path: "{script}", cmd-args: "--secret {MARKER}", token-key: "{{.token}}", expiry-key: "{{.expiry}}"}}}}}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"#,
        script = script.display()
    )
}

#[cfg(unix)]
#[tokio::test]
async fn an_auth_provider_command_is_refused_even_when_trusted() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let dir = tempfile::tempdir().unwrap();
    let mut options = opts(Namespaces::default());
    options.members.policy = Policy::trusted();
    let run = Running::start(&host, options);
    let kc = failing_refresh_kubeconfig(m1, dir.path());
    put_secret(
        &host,
        "default",
        "refresh",
        "true",
        Some(kc.as_bytes()),
        &[],
    )
    .await;
    eventually("refused", DEADLINE, || {
        matches!(
            run.state("default", "refresh"),
            Some(SecretState::PolicyDenied { .. })
        )
    })
    .await;
    let Some(SecretState::PolicyDenied { reason }) = run.state("default", "refresh") else {
        unreachable!()
    };
    assert!(reason.contains("cmd-path"), "{reason}");
    assert!(
        !reason.contains(MARKER),
        "the status leaks the command: {reason}"
    );
    assert!(!dir.path().join("runs").exists(), "the command never runs");
    assert!(run.names().is_empty());
    run.stop().await;
}
