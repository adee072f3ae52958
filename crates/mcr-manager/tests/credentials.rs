//! Credentials that expire, as the manager reports them: a member whose client certificate
//! is renewed in place, renewal failing before and past expiry, then recovering, read over
//! HTTP from `/clusters`, `/metrics` and `/readyz`, and from the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use mcr_core::credentials::{
    self, CredentialHandle, Credentials, Renew, RenewableClient, RenewalOptions,
};
use mcr_core::{BoxError, BoxFuture, Cluster, providers::clusters::ClustersProvider};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use mcr_manager::Manager;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use mcr_test_support::{Logs, WAIT};

/// Mints client certificates from the member's CA unless told to fail.
struct Minter {
    cluster: TestCluster,
    valid_for: Duration,
    failing: AtomicBool,
}

impl Renew for Minter {
    fn renew(&self) -> BoxFuture<'_, Result<Credentials, BoxError>> {
        Box::pin(async move {
            if self.failing.load(Ordering::SeqCst) {
                return Err("the credential source is unavailable (test)".into());
            }
            let cert = self.cluster.client_certificate(
                "controller",
                &["system:masters"],
                self.valid_for,
            )?;
            Ok(Credentials::client_certificate(
                cert.cert_pem.as_bytes(),
                cert.key_pem.as_bytes(),
            )?)
        })
    }
}

/// A renewable client for `member` with a certificate valid for `valid_for`, and the
/// certificate's key (to check it never shows).
async fn renewable(
    member: &TestCluster,
    valid_for: Duration,
) -> (kube::Client, CredentialHandle, String) {
    let kc = member.kubeconfig().unwrap();
    let (config, _) =
        credentials::from_kubeconfig(&kc, None, &Default::default(), &Default::default())
            .await
            .unwrap();
    let cert = member
        .client_certificate("controller", &["system:masters"], valid_for)
        .unwrap();
    let creds =
        Credentials::client_certificate(cert.cert_pem.as_bytes(), cert.key_pem.as_bytes()).unwrap();
    let (client, handle) = RenewableClient::build(config, creds).unwrap();
    (client, handle, cert.key_pem)
}

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// The `/clusters` line of cluster `name`.
async fn line(addr: std::net::SocketAddr, name: &str) -> String {
    let body = get(addr, "/clusters").await;
    body.lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_default()
        .to_string()
}

/// Polls `/clusters` until the line of `name` satisfies `cond`; returns it.
async fn wait_line(
    addr: std::net::SocketAddr,
    name: &str,
    what: &str,
    cond: impl Fn(&str) -> bool,
) -> String {
    let cond = &cond;
    eventually_async(what, WAIT, || async move { cond(&line(addr, name).await) }).await;
    line(addr, name).await
}

async fn list_ok(client: &kube::Client) -> bool {
    let api: Api<Namespace> = Api::all(client.clone());
    api.list(&ListParams::default()).await.is_ok()
}

#[tokio::test]
async fn expiring_and_expired_credentials_reach_clusters_metrics_and_logs() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let logs = Logs::install("warn");
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start_https("lapsing").await.unwrap();
    // Renewal starts at 5 % of a 10 s lifetime and fails from the start: the credentials are
    // "expiring" for about 9 s, then expired.
    let (client, handle, key) = renewable(&member, Duration::from_secs(10)).await;
    let provider = Arc::new(ClustersProvider::new());
    provider
        .add(Cluster::new("lapsing", client.clone()).with_credentials(handle.clone()))
        .await
        .unwrap();
    let mgr = Manager::builder(host.client())
        .provider(provider.clone())
        .metrics_address(([127, 0, 0, 1], 0).into())
        .build();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, t) = (mgr.clone(), token.clone());
        async move { mgr.run_until(t).await.unwrap() }
    });
    mcr_envtest::wait::eventually("endpoint bound", WAIT, || mgr.http_addr().is_some()).await;
    let addr = mgr.http_addr().unwrap();

    let valid = wait_line(addr, "lapsing", "the member engaged", |l| {
        l.contains("credentials=valid")
    })
    .await;
    assert!(valid.contains(" expires_in="), "{valid}");
    assert!(!valid.contains("renewal_failures"), "{valid}");

    let source = Arc::new(Minter {
        cluster: member.clone(),
        valid_for: Duration::from_secs(10),
        failing: AtomicBool::new(true),
    });
    let opts = RenewalOptions {
        fraction: 0.05,
        jitter: 0.0,
        retry_initial: Duration::from_millis(100),
        retry_max: Duration::from_millis(400),
        ..RenewalOptions::default()
    };
    credentials::spawn_renewal(
        "lapsing".into(),
        handle.clone(),
        source.clone(),
        opts,
        token.child_token(),
    );

    let expiring = wait_line(addr, "lapsing", "renewal failing before expiry", |l| {
        l.contains("credentials=expiring")
    })
    .await;
    assert!(
        expiring.contains("last_error=\"the credential source is unavailable (test)\""),
        "{expiring}"
    );
    assert!(expiring.contains(" renewal_failures="), "{expiring}");
    let metrics = get(addr, "/metrics").await;
    assert!(
        metrics.contains("mcr_cluster_credentials_renewal_failing{cluster=\"lapsing\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mcr_cluster_credentials_expiry_timestamp_seconds{cluster=\"lapsing\"}")
    );

    let expired = wait_line(addr, "lapsing", "the credentials to expire", |l| {
        l.contains("credentials=expired")
    })
    .await;
    assert!(expired.contains(" expired_for="), "{expired}");
    let status = mgr
        .cluster_statuses()
        .into_iter()
        .find(|s| s.name.as_str() == "lapsing")
        .unwrap();
    assert!(!status.is_healthy(), "an expired member is unhealthy");
    assert_eq!(status.credential_state(), Some("expired"));
    let metrics = get(addr, "/metrics").await;
    assert!(
        metrics.contains("mcr_cluster_credentials_expired{cluster=\"lapsing\"} 1"),
        "{metrics}"
    );
    // One member's credentials do not take the pod out of service.
    let ready = get(addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    eventually_async("the server to refuse the lapsed certificate", WAIT, || {
        let client = client.clone();
        async move { !list_ok(&client).await }
    })
    .await;
    let logged = logs.text();
    assert!(
        logged
            .lines()
            .any(|l| l.contains("credentials expired and renewal is failing")
                && l.contains("cluster=lapsing")),
        "{logged}"
    );

    source.failing.store(false, Ordering::SeqCst);
    let recovered = wait_line(addr, "lapsing", "renewal to recover", |l| {
        l.contains("credentials=valid")
    })
    .await;
    assert!(!recovered.contains("last_error"), "{recovered}");
    let metrics = get(addr, "/metrics").await;
    assert!(metrics.contains("mcr_cluster_credentials_expired{cluster=\"lapsing\"} 0"));
    assert!(metrics.contains("mcr_cluster_credentials_renewal_failing{cluster=\"lapsing\"} 0"));
    assert!(list_ok(&client).await, "healthy again");

    // The key never shows anywhere.
    let key_body: String = key.lines().filter(|l| !l.starts_with("-----")).collect();
    let clusters = get(addr, "/clusters").await;
    for shown in [&clusters, &metrics, &logs.text()] {
        assert!(!shown.contains(&key_body[..40]), "key material shown");
        assert!(!shown.contains("PRIVATE KEY"), "key material shown");
    }
    token.cancel();
    run.await.unwrap();
}
