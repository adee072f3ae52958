//! Hostile or broken kubeconfig Secrets, through the provider as a user meets them: each one
//! fails cleanly (no panic anywhere in the process, the member stays wanted and a fixed Secret
//! engages it) with one message that names the cluster (the Secret's name) or the Secret, says
//! what failed and what to check.
//!
//! The tests share one panic counter (a process-wide panic hook), so this file holds only
//! tests that must not panic.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use mcr_core::kubeconfig::ClientOptions;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::{Namespaces, SecretState};

use common::*;

/// Panics seen anywhere in this test binary (kube's buffer worker, a member's task).
fn panics() -> &'static AtomicUsize {
    static PANICS: OnceLock<AtomicUsize> = OnceLock::new();
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            panics().fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
    PANICS.get_or_init(|| AtomicUsize::new(0))
}

/// An unsigned JWT whose payload is `claims`.
fn jwt(claims: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("{}.{}.c2ln", b64(r#"{"alg":"none"}"#), b64(claims))
}

/// The member's kubeconfig with its token replaced.
fn with_token(member: &TestCluster, token: &str) -> String {
    kubeconfig_of(member).replace(member.token(), token)
}

/// The failure reason recorded for `default/<name>`, once there is one.
async fn failed_reason(run: &Running, name: &str) -> String {
    eventually(&format!("{name} failed"), DEADLINE, || {
        matches!(run.state("default", name), Some(SecretState::Failed { .. }))
    })
    .await;
    match run.state("default", name) {
        Some(SecretState::Failed { reason, .. }) => reason,
        other => unreachable!("{other:?}"),
    }
}

/// A token whose `exp` lies beyond what `SystemTime` can hold used to panic the member's
/// worker (`UNIX_EPOCH + Duration::from_secs(exp)`): the name never engaged again. Now it is
/// a token without a known expiry, the server rejects it, and fixing the Secret engages it.
#[tokio::test]
async fn jwt_exp_beyond_system_time_fails_cleanly() {
    init_tracing();
    let before = panics().load(Ordering::SeqCst);
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let run = Running::start(&host, opts(Namespaces::default()));
    for (name, exp) in [
        ("exp-u64", u64::MAX.to_string()),
        ("exp-i64", i64::MAX.to_string()),
    ] {
        let token = jwt(&format!(r#"{{"sub":"x","exp":{exp}}}"#));
        put_secret(
            &host,
            "default",
            name,
            "true",
            Some(with_token(m1, &token).as_bytes()),
            &[],
        )
        .await;
        let reason = failed_reason(&run, name).await;
        assert!(
            reason.starts_with(&format!("cluster \"{name}\": ")),
            "{reason}"
        );
        assert!(!reason.contains(&token), "{reason}");
    }
    // The member is still wanted: a fixed Secret engages it.
    put_secret(
        &host,
        "default",
        "exp-u64",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("fixed Secret engaged", DEADLINE, || {
        run.names().contains(&"exp-u64".to_string())
    })
    .await;
    assert_eq!(panics().load(Ordering::SeqCst), before, "nothing panicked");
    run.stop().await;
}

/// `server: 127.0.0.1:<port>` (no scheme) with a token used to reach kube on the renewable
/// path, whose buffer worker then panicked on every request. Now it is refused before any
/// client is built, with a message naming the cluster and the fix.
#[tokio::test]
async fn server_without_scheme_is_refused_naming_the_cluster() {
    init_tracing();
    let before = panics().load(Ordering::SeqCst);
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let run = Running::start(&host, opts(Namespaces::default()));
    let bare = kubeconfig_of(m1).replace("https://127.0.0.1", "127.0.0.1");
    assert_ne!(bare, kubeconfig_of(m1));
    put_secret(&host, "default", "bare", "true", Some(bare.as_bytes()), &[]).await;
    let reason = failed_reason(&run, "bare").await;
    assert_eq!(
        reason,
        "cluster \"bare\": context \"member-1\": invalid client configuration: \
         the server URL has no scheme (write it as https://host:port)"
    );
    assert_eq!(panics().load(Ordering::SeqCst), before, "nothing panicked");
    run.stop().await;
}

/// A Secret that is not YAML: said once, not twice, naming the Secret; nothing is tried until
/// the Secret changes.
#[tokio::test]
async fn malformed_yaml_is_reported_once() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "garbage",
        "true",
        Some(b"garbage: [not closed"),
        &[],
    )
    .await;
    eventually("garbage invalid", DEADLINE, || {
        matches!(
            run.state("default", "garbage"),
            Some(SecretState::Invalid { .. })
        )
    })
    .await;
    let Some(SecretState::Invalid { reason }) = run.state("default", "garbage") else {
        unreachable!()
    };
    assert!(
        reason.starts_with("secret default/garbage: invalid kubeconfig: "),
        "{reason}"
    );
    assert_eq!(reason.matches("invalid kubeconfig").count(), 1, "{reason}");
    run.stop().await;
}

/// A token the member does not accept: the member was reachable and said so; the message
/// says the credentials were rejected, without a `Debug` dump of the Status.
#[tokio::test]
async fn rejected_credentials_are_not_called_unreachable() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "badtoken",
        "true",
        Some(with_token(m1, "not-the-token").as_bytes()),
        &[],
    )
    .await;
    let reason = failed_reason(&run, "badtoken").await;
    assert_eq!(
        reason,
        "cluster \"badtoken\": the API server rejected the credentials \
         (GET /version: 401 Unauthorized): check the user's token or client certificate"
    );
    run.stop().await;
}

/// A server that accepts connections and never answers: the message names the deadline that
/// ran out and its length.
#[tokio::test]
async fn silent_server_names_the_deadline() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    // Accepts, holds every connection open, never writes a byte.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            conns.push(conn);
        }
    });
    let mut options = opts(Namespaces::default());
    options.members.client_options = ClientOptions {
        connect_timeout: Some(Duration::from_secs(2)),
        ..ClientOptions::default()
    };
    let run = Running::start(&host, options);
    let silent = kubeconfig_of(m1).replace(&m1.url().unwrap(), &format!("https://{addr}"));
    put_secret(
        &host,
        "default",
        "silent",
        "true",
        Some(silent.as_bytes()),
        &[],
    )
    .await;
    let reason = failed_reason(&run, "silent").await;
    assert_eq!(
        reason,
        "cluster \"silent\": API server unreachable: connecting (TCP and TLS handshake) \
         did not finish within the connect timeout (2s): check the server address and that \
         an API server answers there"
    );
    run.stop().await;
    held.abort();
}
