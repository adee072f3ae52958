//! Credentials renewed in place against HTTPS envtest clusters with x509 client-certificate
//! authentication: no relist, no failing request, failures retried, expiry reported.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams};
use mcr_core::Cluster;
use mcr_core::credentials::{
    self, CredentialHandle, Credentials, Renew, RenewableClient, RenewalOptions,
};
use mcr_core::{BoxError, BoxFuture};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use support::{DEADLINE, create, eventually};
use tokio_util::sync::CancellationToken;

/// Mints client certificates from the cluster's CA, like Gardener's adminkubeconfig.
struct Minter {
    cluster: TestCluster,
    valid_for: Duration,
    failing: AtomicBool,
    calls: AtomicU64,
}

impl Renew for Minter {
    fn renew(&self) -> BoxFuture<'_, Result<Credentials, BoxError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
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

fn minter(cluster: &TestCluster, valid_for: Duration, failing: bool) -> Arc<Minter> {
    Arc::new(Minter {
        cluster: cluster.clone(),
        valid_for,
        failing: AtomicBool::new(failing),
        calls: AtomicU64::new(0),
    })
}

/// A renewable client for `cluster` (its CA and server) authenticated by a fresh certificate.
async fn renewable(cluster: &TestCluster, valid_for: Duration) -> (kube::Client, CredentialHandle) {
    let kc = cluster.kubeconfig().unwrap();
    let (config, _token) =
        credentials::from_kubeconfig(&kc, None, &Default::default(), &Default::default())
            .await
            .unwrap();
    let cert = cluster
        .client_certificate("controller", &["system:masters"], valid_for)
        .unwrap();
    let creds =
        Credentials::client_certificate(cert.cert_pem.as_bytes(), cert.key_pem.as_bytes()).unwrap();
    assert!(
        creds.expires_at().is_some(),
        "NotAfter read from the certificate"
    );
    RenewableClient::build(config, creds).unwrap()
}

async fn list_code(client: &kube::Client) -> u16 {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.list(&ListParams::default()).await {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(_) => 0,
    }
}

fn fast(fraction: f64) -> RenewalOptions {
    RenewalOptions {
        fraction,
        jitter: 0.05,
        retry_initial: Duration::from_millis(100),
        retry_max: Duration::from_millis(400),
        ..RenewalOptions::default()
    }
}

#[tokio::test]
async fn certificates_renewed_in_place_without_relist_or_failed_requests() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let server = TestCluster::start_https("renew").await.unwrap();
    let admin = server.https_client().await.unwrap();
    let (client, handle) = renewable(&server, Duration::from_secs(4)).await;
    let cluster = Cluster::new("renew", client.clone()).with_credentials(handle.clone());
    let id = cluster.id();
    let token = CancellationToken::new();
    cluster.cache().start(token.child_token());
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    let lists = server.request_count("list", "configmaps");
    let watches = server.request_count("watch", "configmaps");

    let source = minter(&server, Duration::from_secs(4), false);
    let renewal = credentials::spawn_renewal(
        cluster.name().clone(),
        handle.clone(),
        source.clone(),
        fast(0.5),
        token.child_token(),
    );

    // Requests and writes keep flowing through three renewals (past the first NotAfter).
    let mut failed = 0;
    let mut written = 0;
    while handle.status().renewals < 3 {
        written += 1;
        create(&admin, &format!("cm-{written}"), "renew").await;
        if list_code(&client).await != 200 {
            failed += 1;
        }
        let name = format!("cm-{written}");
        eventually("the write to reach the informer", DEADLINE, || {
            informer.get(Some("default"), &name).is_some()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(written < 1000, "renewals never happened");
    }
    assert_eq!(failed, 0, "no request failed for expired credentials");

    // Cut every connection: the watch reconnects with the current certificate (the first one
    // has expired) and resumes from its resourceVersion.
    server.stop().await;
    server.restart().await.unwrap();
    create(&admin, "after-restart", "renew").await;
    eventually("the event after the reconnect", DEADLINE, || {
        informer.get(Some("default"), "after-restart").is_some()
    })
    .await;
    assert!(
        server.request_count("watch", "configmaps") > watches,
        "the watch reconnected"
    );
    assert_eq!(
        server.request_count("list", "configmaps"),
        lists,
        "no relist after renewals and the reconnect"
    );
    assert_eq!(informer.list().len(), written + 1);
    assert_eq!(cluster.id(), id, "same cluster instance");
    let status = cluster.credentials().unwrap().status();
    assert!(status.renewals >= 3 && !status.is_expired() && !status.is_renewal_failing());
    token.cancel();
    renewal.await.unwrap();
}

#[tokio::test]
async fn renewal_failing_then_recovering_before_expiry() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let server = TestCluster::start_https("flaky").await.unwrap();
    let (client, handle) = renewable(&server, Duration::from_secs(8)).await;
    let source = minter(&server, Duration::from_secs(8), true);
    let token = CancellationToken::new();
    let renewal = credentials::spawn_renewal(
        "flaky".into(),
        handle.clone(),
        source.clone(),
        fast(0.2),
        token.clone(),
    );
    eventually("renewal to fail twice", DEADLINE, || {
        handle.status().consecutive_failures >= 2
    })
    .await;
    let failing = handle.status();
    assert!(failing.is_renewal_failing() && !failing.is_expired());
    assert_eq!(
        list_code(&client).await,
        200,
        "still valid while renewal fails"
    );

    source.failing.store(false, Ordering::SeqCst);
    eventually("renewal to recover", DEADLINE, || {
        let s = handle.status();
        s.renewals >= 1 && !s.is_renewal_failing()
    })
    .await;
    assert!(
        handle.status().expires_at > failing.expires_at,
        "a new expiry"
    );
    assert_eq!(list_code(&client).await, 200);
    token.cancel();
    renewal.await.unwrap();
}

#[tokio::test]
async fn renewal_failing_past_expiry_reports_unhealthy_then_recovers() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let server = TestCluster::start_https("lapsed").await.unwrap();
    let admin = server.https_client().await.unwrap();
    let (client, handle) = renewable(&server, Duration::from_secs(2)).await;
    let cluster = Cluster::new("lapsed", client.clone()).with_credentials(handle.clone());
    let token = CancellationToken::new();
    cluster.cache().start(token.child_token());
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();

    let source = minter(&server, Duration::from_secs(30), true);
    let renewal = credentials::spawn_renewal(
        "lapsed".into(),
        handle.clone(),
        source.clone(),
        fast(0.5),
        token.child_token(),
    );
    eventually("the credentials to expire", DEADLINE, || {
        cluster.credentials().unwrap().status().is_expired()
    })
    .await;
    assert!(handle.status().is_renewal_failing());
    eventually_async(
        "the server to refuse the expired certificate",
        DEADLINE,
        || {
            let client = client.clone();
            async move { list_code(&client).await == 401 }
        },
    )
    .await;

    source.failing.store(false, Ordering::SeqCst);
    eventually("renewal to recover", DEADLINE, || {
        let s = handle.status();
        !s.is_expired() && !s.is_renewal_failing() && s.renewals >= 1
    })
    .await;
    assert_eq!(list_code(&client).await, 200, "healthy again");
    create(&admin, "after-recovery", "lapsed").await;
    eventually("the informer to keep working", DEADLINE, || {
        informer.get(Some("default"), "after-recovery").is_some()
    })
    .await;
    token.cancel();
    renewal.await.unwrap();
}

#[tokio::test]
async fn bearer_tokens_are_swapped_in_place() {
    let server = TestCluster::start_https("tokens").await.unwrap();
    let kc = server.kubeconfig().unwrap();
    let (config, creds) =
        credentials::from_kubeconfig(&kc, None, &Default::default(), &Default::default())
            .await
            .unwrap();
    assert_eq!(creds.kind(), "token");
    let (client, handle) = RenewableClient::build(config, creds).unwrap();
    assert_eq!(list_code(&client).await, 200);
    handle.replace(Credentials::bearer("not-the-token").unwrap());
    assert_eq!(
        list_code(&client).await,
        401,
        "the new token is used at once"
    );
    handle.replace(Credentials::bearer(server.token()).unwrap());
    assert_eq!(list_code(&client).await, 200);
    assert_eq!(handle.status().renewals, 2);
}
