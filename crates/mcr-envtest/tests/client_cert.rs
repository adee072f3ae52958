//! x509 client-certificate authentication: chain checked against the cluster's CA, validity
//! checked on every request.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use mcr_test_support::{DEADLINE, api_code};

async fn client_from(yaml: &str) -> kube::Client {
    let kc = Kubeconfig::from_yaml(yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn list_code(client: &kube::Client) -> Option<u16> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.list(&ListParams::default()).await {
        Ok(_) => Some(200),
        Err(err) => api_code(&err),
    }
}

#[tokio::test]
async fn client_certificate_authenticates_until_not_after_then_401_on_the_same_connection() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let cluster = TestCluster::start_https("x509").await.unwrap();
    let (yaml, not_after) = cluster
        .client_certificate_kubeconfig("alice", &["system:masters"], Duration::from_secs(2))
        .unwrap();
    assert!(!yaml.contains("token"), "no bearer token in the kubeconfig");
    let client = client_from(&yaml).await;
    assert_eq!(list_code(&client).await, Some(200), "valid certificate");
    // The pooled connection stays open: the check is per request, as kube-apiserver's.
    eventually_async(
        "the certificate to be refused after its NotAfter",
        DEADLINE,
        || {
            let client = client.clone();
            async move { list_code(&client).await == Some(401) }
        },
    )
    .await;
    assert!(
        SystemTime::now() >= not_after,
        "refused only after NotAfter"
    );
}

#[tokio::test]
async fn certificates_of_another_clusters_ca_are_refused() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let a = TestCluster::start_https("ca-a").await.unwrap();
    let b = TestCluster::start_https("ca-b").await.unwrap();
    let cert = b
        .client_certificate("mallory", &["system:masters"], Duration::from_secs(600))
        .unwrap();
    // a's kubeconfig (a's CA and server), b's client certificate.
    let (yaml, _) = a
        .client_certificate_kubeconfig("alice", &[], Duration::from_secs(600))
        .unwrap();
    let mut kc = Kubeconfig::from_yaml(&yaml).unwrap();
    let user = kc.auth_infos[0].auth_info.as_mut().unwrap();
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    user.client_certificate_data = Some(b64(&cert.cert_pem));
    user.client_key_data = Some(b64(&cert.key_pem).into());
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    assert_eq!(a.request_count("unauthorized", "requests"), 0);
    assert_eq!(list_code(&client).await, Some(401));
    assert_eq!(
        a.request_count("unauthorized", "requests"),
        1,
        "the 401 is counted"
    );
    // a's own certificate works.
    assert_eq!(list_code(&client_from(&yaml).await).await, Some(200));
    assert_eq!(a.request_count("unauthorized", "requests"), 1);
}
