//! A member whose `exec` plugin issues expiring credentials is renewed in place: mcr re-runs
//! the plugin before expiry and swaps the new credential in under the same client and cache.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{ExecConfig, ExecInteractiveMode, Kubeconfig};
use mcr_core::kubeconfig::{ClientOptions, Policy, cluster_for_context};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;

/// Writes a plugin that prints `token` valid for `lifetime_secs` and logs each run to `runs`.
fn expiring_plugin(dir: &Path, token: &str, lifetime_secs: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("short-lived.sh");
    let runs = dir.join("runs");
    let body = format!(
        "#!/bin/sh\necho run >> '{runs}'\nexp=$(date -u -d \"+{lifetime_secs} seconds\" +%Y-%m-%dT%H:%M:%SZ)\n\
         printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
         \"status\":{{\"token\":\"{token}\",\"expirationTimestamp\":\"%s\"}}}}\\n' \"$exp\"\n",
        runs = runs.display()
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn with_exec(mut kc: Kubeconfig, script: &Path) -> Kubeconfig {
    let user = kc.auth_infos[0].auth_info.as_mut().unwrap();
    user.token = None;
    user.exec = Some(ExecConfig {
        api_version: Some("client.authentication.k8s.io/v1".into()),
        command: Some(script.to_str().unwrap().to_string()),
        interactive_mode: Some(ExecInteractiveMode::Never),
        ..ExecConfig::default()
    });
    kc
}

#[tokio::test]
async fn an_expiring_plugin_credential_is_renewed_in_place() {
    let server = TestCluster::start_https("expiring").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = expiring_plugin(dir.path(), server.token(), 4);
    let kc = with_exec(server.kubeconfig().unwrap(), &script);
    let member = cluster_for_context(
        "expiring",
        &kc,
        None,
        &ClientOptions::default(),
        &Policy::trusted(),
    )
    .await
    .unwrap();
    assert_eq!(
        runs(dir.path()),
        1,
        "the plugin runs once to build the client"
    );
    let handle = member
        .credentials()
        .expect("an expiring credential is renewable");
    assert!(handle.status().expires_at.is_some());

    // The plugin runs again before each 4-second credential expires; the same client keeps
    // working with every new credential.
    let api: Api<Namespace> = Api::all(member.client());
    eventually(
        "three renewals by the plugin",
        Duration::from_secs(60),
        || handle.status().renewals >= 3,
    )
    .await;
    assert!(runs(dir.path()) >= 4, "runs: {}", runs(dir.path()));
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("the renewed credential authenticates")
        .items
        .into_iter()
        .filter_map(|ns| ns.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()), "{names:?}");
    assert_eq!(handle.status().consecutive_failures, 0);
}

#[tokio::test]
async fn a_credential_without_expiry_is_not_renewed() {
    let server = TestCluster::start_https("static").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = expiring_plugin(dir.path(), server.token(), 4);
    // The same plugin without an expirationTimestamp: a plain client, no renewal task.
    let body = std::fs::read_to_string(&script)
        .unwrap()
        .replace(r#","expirationTimestamp":"%s""#, "");
    assert!(!body.contains("expirationTimestamp"));
    std::fs::write(&script, body).unwrap();
    let kc = with_exec(server.kubeconfig().unwrap(), &script);
    let member = cluster_for_context(
        "static",
        &kc,
        None,
        &ClientOptions::default(),
        &Policy::trusted(),
    )
    .await
    .unwrap();
    assert!(member.credentials().is_none());
    let api: Api<Namespace> = Api::all(member.client());
    api.list(&ListParams::default()).await.unwrap();
    assert_eq!(runs(dir.path()), 1);
}
