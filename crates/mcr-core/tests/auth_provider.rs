//! Legacy `auth-provider` entries, even in trusted kubeconfigs, never make mcr run a command
//! or refresh a token inside kube: a command kube ran (`gcp`'s `cmd-path`) kept a blocking
//! thread after the build timed out, and its refresh at request time ran unbounded while
//! holding kube's token lock. Their stored tokens are used as plain bearer tokens; an entry
//! that needs a command is refused with a message naming the context and the way out.

#![cfg(unix)]

use std::path::Path;
use std::time::Duration;

use kube::config::{AuthProviderConfig, Kubeconfig};
use mcr_core::kubeconfig::{ClientOptions, Error, Policy, client_for_context, cluster_for_context};

/// The error of a build that must fail (clients and clusters have no `Debug`).
fn failed<T>(built: Result<T, Error>) -> Error {
    match built {
        Ok(_) => panic!("the client was built"),
        Err(err) => err,
    }
}
use mcr_envtest::TestCluster;

const MARKER: &str = "LEAKED-SECRET-MARKER-4417";

fn with_auth_provider(mut kc: Kubeconfig, name: &str, config: &[(&str, String)]) -> Kubeconfig {
    let user = kc.auth_infos[0].auth_info.as_mut().unwrap();
    user.token = None;
    user.auth_provider = Some(AuthProviderConfig {
        name: name.into(),
        config: config
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        other: Default::default(),
    });
    kc
}

/// A `gcp` auth-provider whose command records that it ran, then hangs.
fn hanging_command(dir: &Path, kc: Kubeconfig) -> Kubeconfig {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("gcloud.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ >> '{runs}'\nexec sleep 30\n",
            runs = dir.join("runs").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    with_auth_provider(
        kc,
        "gcp",
        &[
            ("cmd-path", script.display().to_string()),
            ("cmd-args", format!("--secret {MARKER}")),
            ("token-key", "{.token}".into()),
        ],
    )
}

#[tokio::test]
async fn auth_provider_commands_never_run_even_when_trusted() {
    let cluster = TestCluster::start_https("gcp-cmd").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = hanging_command(dir.path(), cluster.kubeconfig().unwrap());
    let opts = ClientOptions {
        exec_timeout: Some(Duration::from_secs(1)),
        ..ClientOptions::default()
    };
    let policy = Policy::trusted();
    let errors = [
        failed(client_for_context(&kc, None, &opts, &policy).await),
        failed(cluster_for_context("gcp-cmd", &kc, None, &opts, &policy).await),
    ];
    assert!(
        !dir.path().join("runs").exists(),
        "the auth-provider command ran"
    );
    for err in errors {
        assert_eq!(
            err.to_string(),
            "context \"gcp-cmd\": auth-provider \"gcp\" needs a command (cmd-path), which mcr \
             does not run: use an exec credential plugin instead (for GKE: \
             gke-gcloud-auth-plugin)"
        );
        assert!(
            err.is_policy_denial(),
            "not retried until the kubeconfig changes"
        );
    }
}

#[tokio::test]
async fn auth_provider_tokens_are_used_as_static_bearer_tokens() {
    let cluster = TestCluster::start_https("static").await.unwrap();
    let opts = ClientOptions::default();
    let token = cluster.token().to_string();
    let in_an_hour = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).to_string();
    let cases = [
        (
            "oidc",
            vec![
                ("id-token", token.clone()),
                ("idp-issuer-url", "https://issuer.invalid".into()),
            ],
        ),
        (
            "gcp",
            vec![("access-token", token.clone()), ("expiry", in_an_hour)],
        ),
        ("gcp", vec![("id-token", token.clone())]),
    ];
    for (name, config) in cases {
        let kc = with_auth_provider(cluster.kubeconfig().unwrap(), name, &config);
        let client = client_for_context(&kc, None, &opts, &Policy::trusted())
            .await
            .unwrap();
        client.apiserver_version().await.unwrap();
        let member = cluster_for_context("static", &kc, None, &opts, &Policy::trusted())
            .await
            .unwrap();
        member.client().apiserver_version().await.unwrap();
    }
    // A `gcp` entry whose token expired and that has no command has nothing to send.
    let expired = with_auth_provider(
        cluster.kubeconfig().unwrap(),
        "gcp",
        &[
            ("access-token", token.clone()),
            ("expiry", "2001-01-01T00:00:00Z".into()),
        ],
    );
    let err = failed(client_for_context(&expired, None, &opts, &Policy::trusted()).await);
    assert!(err.to_string().contains("expired"), "{err}");
    assert!(!err.to_string().contains(&token), "{err}");
}
