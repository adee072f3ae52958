//! Shared helpers of the webhook tests: a CA and a rotating serving certificate on disk, an
//! HTTPS client that keeps its connection and reports the certificate it saw, and a manager
//! over mcr-envtest clusters.
#![allow(dead_code, missing_docs)]

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::Manager;
use mcr_webhook::{Denied, Webhooks};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub const DEADLINE: Duration = Duration::from_secs(60);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A CA, and serving certificates it signs for 127.0.0.1 / localhost, written to
/// `dir/tls.crt` and `dir/tls.key`.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "mcr-webhook test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params.self_signed(&ca_key).unwrap();
        let pki = Pki {
            dir: tempfile::tempdir().unwrap(),
            ca_pem: ca.pem(),
            issuer: Issuer::new(params, ca_key),
        };
        pki.issue("serving-1");
        pki
    }

    pub fn cert_path(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }

    pub fn key_path(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }

    /// Signs a new serving certificate with common name `cn` and swaps both files in by
    /// rename (as a Secret volume update does); returns its DER.
    pub fn issue(&self, cn: &str) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        write_atomically(&self.key_path(), key.serialize_pem().as_bytes());
        write_atomically(&self.cert_path(), cert.pem().as_bytes());
        cert.der().to_vec()
    }

    /// Signs a client certificate with common name `cn`: (certificate PEM, key PEM).
    pub fn issue_client(&self, cn: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    pub fn reloader(&self) -> mcr_webhook::CertificateReloader {
        mcr_webhook::CertificateReloader::from_files(self.cert_path(), self.key_path()).unwrap()
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// One HTTPS/1.1 connection to the webhook server, trusting only the test CA.
pub struct Conn {
    pub sender: SendRequest<Full<Bytes>>,
    /// The leaf certificate the server presented.
    pub peer: Vec<u8>,
}

pub async fn connect(addr: SocketAddr, ca_pem: &str) -> Conn {
    connect_as(addr, ca_pem, None).await.unwrap()
}

/// Connects presenting `client` (certificate PEM, key PEM) when given; `Err` if the TLS
/// handshake fails.
pub async fn connect_as(
    addr: SocketAddr,
    ca_pem: &str,
    client: Option<&(String, String)>,
) -> Result<Conn, std::io::Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = rustls_pemfile::certs(&mut cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = rustls_pemfile::private_key(&mut key.as_bytes())
                .unwrap()
                .unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = connector
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await?;
    let peer = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first().map(|c: &CertificateDer<'_>| c.to_vec()))
        .unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    Ok(Conn { sender, peer })
}

impl Conn {
    /// POSTs `body` to `path`; returns the status and the JSON body (Null if not JSON).
    pub async fn post(&mut self, path: &str, body: impl Into<Bytes>) -> (u16, Value) {
        self.request("POST", path, "application/json", body.into())
            .await
    }

    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> (u16, Value) {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("content-type", content_type)
            .body(Full::new(body))
            .unwrap();
        self.sender.ready().await.unwrap();
        let resp = self.sender.send_request(req).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

/// A fixture from tests/fixtures.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

pub fn body(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap())
}

pub struct Running {
    pub pki: Pki,
    pub addr: std::net::SocketAddr,
    pub server: Arc<mcr_webhook::Server>,
    pub token: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

pub async fn serve(webhooks: Webhooks, options: mcr_webhook::ServerOptions) -> Running {
    let pki = Pki::new();
    let server = Arc::new(
        mcr_webhook::Server::bind(
            ([127, 0, 0, 1], 0).into(),
            webhooks,
            pki.reloader(),
            options,
        )
        .await
        .unwrap(),
    );
    let token = CancellationToken::new();
    let (s, t) = (server.clone(), token.clone());
    tokio::spawn(async move { s.serve(t).await.unwrap() });
    Running {
        addr: server.local_addr(),
        pki,
        server,
        token,
    }
}

/// A host cluster, `n` members fed to a manager through `ClustersProvider`.
pub struct Env {
    pub host: TestCluster,
    pub fleet: Fleet,
    pub provider: Arc<ClustersProvider>,
    pub mgr: Manager,
    pub token: CancellationToken,
}

impl Env {
    pub async fn start(n: usize) -> Env {
        init_tracing();
        let host = TestCluster::start("host").await.unwrap();
        let fleet = Fleet::builder()
            .clusters(n)
            .name_prefix("member")
            .start()
            .await
            .unwrap();
        let provider = Arc::new(ClustersProvider::new());
        for c in fleet.clusters() {
            provider
                .add(Cluster::new(c.name(), c.client()))
                .await
                .unwrap();
        }
        let mgr = Manager::new(host.client(), Some(provider.clone()));
        Env {
            host,
            fleet,
            provider,
            mgr,
            token: CancellationToken::new(),
        }
    }

    /// Runs the manager until `self.token` fires; waits until every member is engaged.
    pub async fn run(&self) -> tokio::task::JoinHandle<Result<(), mcr_manager::Error>> {
        let mgr = self.mgr.clone();
        let token = self.token.clone();
        let handle = tokio::spawn(async move { mgr.run_until(token).await });
        let fleet = self.mgr.fleet().clone();
        let want = self.fleet.names().len();
        mcr_envtest::wait::eventually("every member engaged", DEADLINE, || {
            fleet.names().len() == want
        })
        .await;
        handle
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// The ConfigMap webhooks of these tests: `data.size` must be a number, unless the member
/// holds a ConfigMap `default/blocklist` naming the object; `data.owner` defaults to
/// `team-a` on the host and to the member's name on a member.
pub fn configmap_webhooks(webhooks: &Webhooks) {
    webhooks
        .for_::<ConfigMap>()
        .with_defaulter(|mut cm: ConfigMap, req| async move {
            let owner = if req.cluster().name().is_host() {
                "team-a".to_string()
            } else {
                req.cluster().name().to_string()
            };
            cm.data
                .get_or_insert_default()
                .entry("owner".into())
                .or_insert(owner);
            Ok(cm)
        })
        .with_validator(|req| async move {
            let Some(cm) = req.object.as_ref() else {
                return Ok(());
            };
            if let Some(size) = cm.data.as_ref().and_then(|d| d.get("size"))
                && size.parse::<u32>().is_err()
            {
                return Err(Denied::new(format!(
                    "data.size must be a number, not {size:?} (cluster {})",
                    req.cluster().name()
                )));
            }
            // Read the request's own cluster.
            let api: Api<ConfigMap> = Api::namespaced(req.cluster().client(), "default");
            let blocked = api
                .get_opt("blocklist")
                .await
                .map_err(|e| Denied::new(e.to_string()).with_code(500))?
                .and_then(|b| b.data)
                .and_then(|d| d.get("names").cloned())
                .unwrap_or_default();
            if blocked.split(',').any(|n| n == req.name) {
                return Err(Denied::new(format!(
                    "{} is blocked in {}",
                    req.name,
                    req.cluster().name()
                )));
            }
            Ok(())
        })
        .register()
        .unwrap();
}

/// The emulator does not serve admissionregistration.k8s.io: give it the two types as CRDs so
/// the writes can be checked there too (a real apiserver has them built in).
pub async fn admission_types(client: &kube::Client) {
    if mcr_envtest::backend().is_real() {
        return;
    }
    let crds: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            "customresourcedefinitions",
        ),
    );
    for (kind, plural) in [
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    ] {
        let crd: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": format!("{plural}.admissionregistration.k8s.io") },
            "spec": {
                "group": "admissionregistration.k8s.io",
                "scope": "Cluster",
                "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase() },
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }
                }]
            }
        }))
        .unwrap();
        crds.create(&kube::api::PostParams::default(), &crd)
            .await
            .unwrap();
    }
}
