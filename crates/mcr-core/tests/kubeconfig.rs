//! Clients built from kubeconfigs talk to real (emulated) clusters over HTTPS.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{ExecConfig, ExecInteractiveMode, Kubeconfig};
use mcr_core::kubeconfig::{
    self, ClientOptions, Error, ExecPolicy, ExecRule, Policy, client_for_context,
    cluster_for_context, connection_hash,
};
use mcr_envtest::{Partition, TestCluster};

/// Generous guard so a broken test fails instead of hanging CI.
const GUARD: Duration = Duration::from_secs(30);

async fn namespace_names(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let list = tokio::time::timeout(
        GUARD,
        Api::<Namespace>::all(client).list(&ListParams::default()),
    )
    .await
    .expect("request did not finish within the guard")?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|ns| ns.metadata.name)
        .collect())
}

async fn expect_err(
    kc: &Kubeconfig,
    context: Option<&str>,
    opts: &ClientOptions,
    policy: &Policy,
) -> Error {
    match client_for_context(kc, context, opts, policy).await {
        Ok(_) => panic!("expected client_for_context to fail"),
        Err(e) => e,
    }
}

/// Builds a client (which must work) and expects the server to answer 401.
async fn expect_unauthorized(kc: &kube::config::Kubeconfig, policy: &Policy) {
    let client = client_for_context(kc, None, &ClientOptions::default(), policy)
        .await
        .unwrap();
    let err = namespace_names(client).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(status) if status.code == 401),
        "expected 401, got {err:?}"
    );
}

#[tokio::test]
async fn client_for_context_lists_namespaces() {
    let cluster = TestCluster::start_https("member-1").await.unwrap();
    let kc = cluster.kubeconfig().unwrap();
    let opts = ClientOptions::default();

    let client = client_for_context(&kc, None, &opts, &Policy::default())
        .await
        .unwrap();
    let names = namespace_names(client).await.unwrap();
    assert!(names.iter().any(|n| n == "default"), "{names:?}");
    assert!(names.iter().any(|n| n == "kube-system"), "{names:?}");

    // by name, from YAML bytes, with options set
    let kc2 = kubeconfig::parse(cluster.kubeconfig_yaml().unwrap().as_bytes()).unwrap();
    let opts = ClientOptions {
        connect_timeout: Some(Duration::from_secs(10)),
        user_agent: Some("mcr-test/1".into()),
        ..ClientOptions::default()
    };
    let client = client_for_context(&kc2, Some("member-1"), &opts, &Policy::default())
        .await
        .unwrap();
    assert!(
        namespace_names(client)
            .await
            .unwrap()
            .contains(&"kube-public".to_string())
    );
}

#[tokio::test]
async fn the_kubeconfig_token_is_what_authenticates() {
    let cluster = TestCluster::start_https("member-2").await.unwrap();
    let mut kc = cluster.kubeconfig().unwrap();
    let user = kc.auth_infos[0].auth_info.as_mut().unwrap();
    user.token = Some("not-the-token".to_string().into());
    expect_unauthorized(&kc, &Policy::default()).await;
}

#[tokio::test]
async fn cluster_for_context_carries_name_and_hash() {
    let cluster = TestCluster::start_https("member-3").await.unwrap();
    let kc = cluster.kubeconfig().unwrap();
    let member = cluster_for_context(
        "fleet-a/member-3",
        &kc,
        None,
        &ClientOptions::default(),
        &Policy::default(),
    )
    .await
    .unwrap();
    assert_eq!(member.name().as_str(), "fleet-a/member-3");
    let expected = connection_hash(&kc, None).unwrap();
    assert_eq!(member.connection_hash(), Some(expected.as_str()));
    assert!(
        namespace_names(member.client())
            .await
            .unwrap()
            .contains(&"default".to_string())
    );
}

/// Writes an exec plugin printing an ExecCredential with `token`; every run appends a line
/// to `<dir>/runs`.
fn write_plugin(dir: &Path, token: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("get-token.sh");
    let runs = dir.join("runs");
    let body = format!(
        "#!/bin/sh\necho run >> '{}'\ncat <<'EOF'\n{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}\nEOF\n",
        runs.display()
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn plugin_runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// The cluster's kubeconfig with the static token replaced by the exec plugin `script`.
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

#[cfg(unix)]
#[tokio::test]
async fn exec_plugins_follow_the_policy() {
    let cluster = TestCluster::start_https("member-4").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = write_plugin(dir.path(), cluster.token());
    let kc = with_exec(cluster.kubeconfig().unwrap(), &script);
    let opts = ClientOptions::default();

    // refused by default, before anything runs; the error names context and basename only
    let err = expect_err(&kc, None, &opts, &Policy::default()).await;
    assert!(
        matches!(&err, Error::ExecNotAllowed { context, command, .. } if context == "member-4" && command == "get-token.sh"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(!msg.contains(&dir.path().display().to_string()), "{msg}");
    assert!(!msg.contains(cluster.token()), "{msg}");
    let err = expect_err(
        &kc,
        None,
        &opts,
        &ExecPolicy::allow(ExecRule::command("kubectl").any_server()).into(),
    )
    .await;
    assert!(matches!(err, Error::ExecNotAllowed { .. }), "{err:?}");
    assert_eq!(plugin_runs(dir.path()), 0, "a refused plugin must not run");

    // allowed: the plugin's token authenticates
    let client = client_for_context(&kc, None, &opts, &Policy::trusted())
        .await
        .unwrap();
    assert!(
        namespace_names(client)
            .await
            .unwrap()
            .contains(&"default".to_string())
    );
    assert!(plugin_runs(dir.path()) >= 1);

    let by_path: Policy =
        ExecPolicy::allow(ExecRule::command(script.to_str().unwrap()).servers(["127.0.0.1"]))
            .into();
    let client = client_for_context(&kc, None, &opts, &by_path)
        .await
        .unwrap();
    assert!(
        namespace_names(client)
            .await
            .unwrap()
            .contains(&"default".to_string())
    );

    let by_name: Policy = ExecPolicy::allow(ExecRule::command("get-token.sh").any_server()).into();
    let client = client_for_context(&kc, None, &opts, &by_name)
        .await
        .unwrap();
    assert!(
        namespace_names(client)
            .await
            .unwrap()
            .contains(&"default".to_string())
    );
}

#[cfg(unix)]
#[tokio::test]
async fn exec_plugin_with_a_wrong_token_is_rejected_by_the_server() {
    let cluster = TestCluster::start_https("member-5").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = write_plugin(dir.path(), "wrong-token");
    let kc = with_exec(cluster.kubeconfig().unwrap(), &script);
    expect_unauthorized(&kc, &Policy::trusted()).await;
}

#[tokio::test]
async fn read_timeout_bounds_a_hanging_cluster() {
    let cluster = TestCluster::start_https("member-6").await.unwrap();
    let kc = cluster.kubeconfig().unwrap();
    let opts = ClientOptions {
        read_timeout: Some(Duration::from_millis(500)),
        ..ClientOptions::default()
    };
    let client = client_for_context(&kc, None, &opts, &Policy::default())
        .await
        .unwrap();
    namespace_names(client.clone()).await.unwrap();

    cluster.partition(Partition::Hang);
    // `namespace_names` panics if the request is still pending after the 30 s guard.
    let err = namespace_names(client.clone()).await.unwrap_err();
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "expected a transport error, got {err:?}"
    );

    cluster.heal();
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        match namespace_names(client.clone()).await {
            Ok(names) => {
                assert!(names.contains(&"default".to_string()));
                break;
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "not healed yet");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("cluster did not answer after heal: {e}"),
        }
    }
}

#[tokio::test]
async fn read_resolves_relative_files_and_the_default_policy_refuses_them() {
    let cluster = TestCluster::start_https("member-7").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), cluster.token()).unwrap();
    let mut kc = cluster.kubeconfig().unwrap();
    let user = kc.auth_infos[0].auth_info.as_mut().unwrap();
    user.token = None;
    user.token_file = Some("token".into());
    // JSON is YAML
    let path = dir.path().join("config");
    std::fs::write(&path, serde_json::to_string(&kc).unwrap()).unwrap();

    let kc = kubeconfig::read(&path).unwrap();
    let trusted = Policy::default().allow_file_references(true);
    let client = client_for_context(&kc, None, &ClientOptions::default(), &trusted)
        .await
        .unwrap();
    assert!(
        namespace_names(client)
            .await
            .unwrap()
            .contains(&"default".to_string())
    );

    let err = expect_err(&kc, None, &ClientOptions::default(), &Policy::default()).await;
    assert!(
        matches!(&err, Error::FileReferenceNotAllowed { field, .. } if field == "tokenFile"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_server_url_without_a_scheme_is_refused_when_the_client_is_built() {
    for server in ["10.0.0.5:6443", "ftp://10.0.0.5:6443", "https:///api"] {
        let kc = kubeconfig::parse(
            format!(
                r#"
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: abc}}}}]
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]
current-context: ctx
"#
            )
            .as_bytes(),
        )
        .unwrap();
        let err = expect_err(&kc, None, &ClientOptions::default(), &Policy::default()).await;
        assert!(
            matches!(&err, Error::InvalidConfig { context, reason } if context == "ctx" && reason.contains("server URL")),
            "{server}: {err:?}"
        );
    }
}

/// Writes an exec plugin that never exits; every run appends a line to `<dir>/runs`.
#[cfg(unix)]
fn write_hanging_plugin(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("hang.sh");
    let body = format!(
        "#!/bin/sh\necho run >> '{}'\nexec sleep 100000\n",
        dir.join("runs").display()
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[cfg(unix)]
#[tokio::test]
async fn a_hanging_exec_plugin_is_killed_after_the_exec_timeout() {
    let cluster = TestCluster::start_https("member-8").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = with_exec(
        cluster.kubeconfig().unwrap(),
        &write_hanging_plugin(dir.path()),
    );
    let opts = ClientOptions {
        exec_timeout: Some(Duration::from_millis(500)),
        ..ClientOptions::default()
    };
    let built = tokio::time::timeout(
        GUARD,
        client_for_context(&kc, None, &opts, &Policy::trusted()),
    )
    .await
    .expect("the build did not finish within the guard");
    let err = built
        .err()
        .expect("a plugin that never exits cannot build a client");
    assert!(
        matches!(&err, Error::Client { context, reason } if context == "member-8" && reason.contains("hang.sh") && reason.contains("did not finish")),
        "{err:?}"
    );
    assert_eq!(plugin_runs(dir.path()), 1);
    assert!(!err.to_string().contains(&dir.path().display().to_string()));
}

#[cfg(unix)]
#[tokio::test]
async fn exec_plugin_yaml_output_and_expiry_are_used() {
    use std::os::unix::fs::PermissionsExt;
    let cluster = TestCluster::start_https("member-9").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A token with an expiry in YAML (client-go accepts YAML output too).
    let script = dir.path().join("yaml-token.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n[ -n \"$KUBERNETES_EXEC_INFO\" ] || exit 3\ncat <<'EOF'\napiVersion: client.authentication.k8s.io/v1\nkind: ExecCredential\nstatus:\n  token: {}\n  expirationTimestamp: \"2099-01-02T03:04:05Z\"\nEOF\n",
            cluster.token()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kc = with_exec(cluster.kubeconfig().unwrap(), &script);
    let member = cluster_for_context(
        "member-9",
        &kc,
        None,
        &ClientOptions::default(),
        &Policy::trusted(),
    )
    .await
    .unwrap();
    let expected = std::time::UNIX_EPOCH + Duration::from_secs(4_071_006_245);
    let credentials = member
        .credentials()
        .expect("an expiring plugin credential is renewable");
    assert_eq!(credentials.status().expires_at, Some(expected));
    assert!(
        namespace_names(member.client())
            .await
            .unwrap()
            .contains(&"default".to_string())
    );

    // A plugin that fails: the error gives its exit status, never its output.
    std::fs::write(&script, "#!/bin/sh\necho secret-output\nexit 7\n").unwrap();
    let err = expect_err(&kc, None, &ClientOptions::default(), &Policy::trusted()).await;
    let msg = err.to_string();
    assert!(msg.contains("yaml-token.sh") && msg.contains('7'), "{msg}");
    assert!(!msg.contains("secret-output"), "{msg}");
}
