//! The webhook's own test helpers, used by all of its test binaries: a CA and a rotating
//! serving certificate on disk, an HTTPS client that keeps its connection and reports the
//! certificate it saw, a running webhook server, a round-robin frontend, and the ConfigMap
//! webhooks the tests register. The manager over a fleet ([`Env`]), deadlines and tracing
//! come from `mcr-test-support`, re-exported here.
#![allow(dead_code, missing_docs, unused_imports)]

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use mcr_webhook::{
    Denied, Webhooks,
    testing::{ReviewClient, ReviewError},
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use mcr_test_support::{Env, WAIT, init_tracing};

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
        self.issue_into(self.dir.path(), cn)
    }

    /// Like [`issue`](Self::issue), into `dir/tls.crt` and `dir/tls.key`: another CA's
    /// directory, to switch a server to a certificate this CA signs.
    pub fn issue_into(&self, dir: &Path, cn: &str) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        write_atomically(&dir.join("tls.key"), key.serialize_pem().as_bytes());
        write_atomically(&dir.join("tls.crt"), cert.pem().as_bytes());
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

/// One HTTPS/1.1 connection to the webhook server, trusting only the test CA
/// ([`ReviewClient`], failing the test on any error).
pub struct Conn(pub ReviewClient);

pub async fn connect(addr: SocketAddr, ca_pem: &str) -> Conn {
    connect_as(addr, ca_pem, None).await.unwrap()
}

/// Connects presenting `client` (certificate PEM, key PEM) when given; `Err` if the TLS
/// handshake fails.
pub async fn connect_as(
    addr: SocketAddr,
    ca_pem: &str,
    client: Option<&(String, String)>,
) -> Result<Conn, ReviewError> {
    let client = client.map(|(cert, key)| (cert.as_bytes(), key.as_bytes()));
    ReviewClient::connect_as(addr, ca_pem.as_bytes(), client)
        .await
        .map(Conn)
}

impl Conn {
    /// The leaf certificate the server presented.
    pub fn peer(&self) -> &[u8] {
        self.0.peer_certificate()
    }

    /// POSTs `body` as JSON to `path`; returns the status and the JSON body (Null if not
    /// JSON).
    pub async fn post(&mut self, path: &str, body: impl Into<Bytes>) -> (u16, Value) {
        let answer = self
            .0
            .request("POST", path, "application/json", body.into());
        answer.await.unwrap()
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

/// ConfigMap `default/{name}` with `data.size = size` and the label `{label}: yes` (what
/// the tests' webhook configurations select, so the cluster's own ConfigMaps are not sent).
pub fn labelled(name: &str, label: &str, size: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("default".into());
    cm.metadata.labels = Some([(label.to_string(), "yes".to_string())].into());
    cm.data = Some([("size".to_string(), size.to_string())].into());
    cm
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
    if !mcr_envtest::backend().is_real() {
        mcr_webhook::testing::install_admission_types(client)
            .await
            .unwrap();
    }
}

/// One address in front of webhook servers, as a Service is: each new connection goes to the
/// next backend, round robin; a backend taken out of the list gets no new connections (open
/// ones stay until either side closes). Counts the connections it relays.
pub struct Frontend {
    pub addr: SocketAddr,
    backends: Arc<parking_lot::Mutex<Vec<SocketAddr>>>,
    /// Connections accepted so far, and those still open.
    counts: Arc<(AtomicUsize, AtomicUsize)>,
    task: tokio::task::JoinHandle<()>,
}

impl Frontend {
    pub async fn start() -> Frontend {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let backends: Arc<parking_lot::Mutex<Vec<SocketAddr>>> = Arc::default();
        let counts: Arc<(AtomicUsize, AtomicUsize)> = Arc::default();
        let (list, relayed) = (backends.clone(), counts.clone());
        let task = tokio::spawn(async move {
            let mut next = 0usize;
            while let Ok((mut client, _)) = listener.accept().await {
                let backend = {
                    let list = list.lock();
                    next += 1;
                    (!list.is_empty()).then(|| list[next % list.len()])
                };
                relayed.0.fetch_add(1, Ordering::SeqCst);
                relayed.1.fetch_add(1, Ordering::SeqCst);
                let relayed = relayed.clone();
                tokio::spawn(async move {
                    if let Some(backend) = backend
                        && let Ok(mut server) = tokio::net::TcpStream::connect(backend).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                    relayed.1.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Frontend {
            addr,
            backends,
            counts,
            task,
        }
    }

    /// Where new connections go from now on.
    pub fn set(&self, backends: &[SocketAddr]) {
        *self.backends.lock() = backends.to_vec();
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.counts.0.load(Ordering::SeqCst)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.counts.1.load(Ordering::SeqCst)
    }
}

impl Drop for Frontend {
    fn drop(&mut self) {
        self.task.abort();
    }
}
