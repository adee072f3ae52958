//! Starting one `kube-apiserver` and waiting until it serves.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::pki::Pki;
use super::process::Guarded;
use crate::Error;

/// How long an API server may take to become ready (2 slow, shared cores: minutes).
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(240);

/// The namespaces the emulator starts with; a real API server creates them shortly after
/// start, and a cluster is handed out only once they exist.
const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The static token file (`token,user,uid,"groups"`) in a control plane's directory.
pub(crate) fn token_file(dir: &Path) -> PathBuf {
    dir.join("tokens.csv")
}

/// Everything one API server process is started with (kept for restarts).
#[derive(Clone, Debug)]
pub(crate) struct ApiServerSpec {
    /// Cluster name, for messages.
    pub(crate) name: String,
    /// The `kube-apiserver` binary.
    pub(crate) binary: PathBuf,
    /// The control plane's directory (certificates, token file, log).
    pub(crate) dir: PathBuf,
    /// The secure port on 127.0.0.1.
    pub(crate) port: u16,
    /// The command-line arguments.
    pub(crate) args: Vec<String>,
}

impl ApiServerSpec {
    /// The arguments of an API server on `port` storing under `prefix` in `etcd_url`, with the
    /// token file of [`token_file`].
    pub(crate) fn new(
        name: &str,
        binary: &Path,
        dir: &Path,
        port: u16,
        etcd_url: &str,
        prefix: &str,
        pki: &Pki,
    ) -> ApiServerSpec {
        let token_file = token_file(dir);
        let file = |flag: &str, path: &Path| format!("--{flag}={}", path.display());
        let args = vec![
            "--advertise-address=127.0.0.1".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--etcd-servers={etcd_url}"),
            format!("--etcd-prefix={prefix}"),
            file("cert-dir", dir),
            file("tls-cert-file", &pki.serving_cert),
            file("tls-private-key-file", &pki.serving_key),
            file("client-ca-file", &pki.ca_file),
            file("token-auth-file", &token_file),
            "--authorization-mode=RBAC".to_string(),
            "--service-cluster-ip-range=10.0.0.0/24".to_string(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
            file("service-account-key-file", &pki.sa_public),
            file("service-account-signing-key-file", &pki.sa_private),
            // No controller-manager creates the `default` ServiceAccount Pods would need.
            "--disable-admission-plugins=ServiceAccount".to_string(),
            "--allow-privileged=true".to_string(),
            "--endpoint-reconciler-type=none".to_string(),
            "--profiling=false".to_string(),
        ];
        ApiServerSpec {
            name: name.to_string(),
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            port,
            args,
        }
    }

    /// The same server reading the `AdmissionConfiguration` in `path`, when given.
    pub(crate) fn admission_config(mut self, path: Option<&Path>) -> ApiServerSpec {
        if let Some(path) = path {
            self.args.push(format!(
                "--admission-control-config-file={}",
                path.display()
            ));
        }
        self
    }

    /// Starts the process and waits (bounded) until `/readyz` is ok and the system namespaces
    /// exist.
    pub(crate) async fn start(&self, probe: &Probe) -> Result<Guarded, Error> {
        let started = Instant::now();
        let log = self.dir.join("kube-apiserver.log");
        let what = format!("kube-apiserver of {}", self.name);
        let mut process = Guarded::spawn(&what, &self.binary, &self.args, &log, None)?;
        let deadline = started + READY_TIMEOUT;
        loop {
            if let Some(status) = process.exited() {
                return Err(self.failed(format!("exited during start ({status})"), &process));
            }
            if ready(probe).await {
                break;
            }
            if Instant::now() > deadline {
                let err = self.failed(format!("not ready within {READY_TIMEOUT:?}"), &process);
                process.stop(Duration::ZERO).await;
                return Err(err);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tracing::info!(cluster = %self.name, port = self.port, elapsed = ?started.elapsed(), "kube-apiserver is ready");
        Ok(process)
    }

    fn failed(&self, what: String, process: &Guarded) -> Error {
        Error::ControlPlane(format!(
            "kube-apiserver of cluster {:?} {what}; its log ends with:\n{}",
            self.name,
            process.log_tail()
        ))
    }
}

/// `/readyz` answers ok and every system namespace exists.
async fn ready(probe: &Probe) -> bool {
    if probe.get("/readyz").await != Some((200, "ok".to_string())) {
        return false;
    }
    for ns in SYSTEM_NAMESPACES {
        let path = format!("/api/v1/namespaces/{ns}");
        if probe.get(&path).await.map(|(code, _)| code) != Some(200) {
            return false;
        }
    }
    true
}

/// Plain HTTP/1.1 over TLS, straight to the API server. Not a kube client: its failed
/// requests would be logged as errors while the server is still starting.
pub(crate) struct Probe {
    port: u16,
    token: String,
    connector: tokio_rustls::TlsConnector,
}

impl Probe {
    /// A probe of `https://127.0.0.1:<port>` trusting `ca_der`, sending `token`.
    pub(crate) fn new(port: u16, ca_der: &[u8], token: &str) -> Result<Probe, Error> {
        let tls = |e: rustls::Error| Error::Tls(e.to_string());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(ca_der.to_vec()))
            .map_err(tls)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Probe {
            port,
            token: token.to_string(),
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// `GET path`: the status code and body, `None` on any failure (bounded to 10 s).
    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let attempt = async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
            let name = rustls::pki_types::ServerName::from(std::net::Ipv4Addr::LOCALHOST);
            let mut tls = self.connector.connect(name, tcp).await?;
            let request = format!(
                "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
                 Connection: close\r\n\r\n",
                self.token
            );
            tls.write_all(request.as_bytes()).await?;
            let mut answer = Vec::new();
            tls.read_to_end(&mut answer).await?;
            Ok::<_, std::io::Error>(answer)
        };
        let answer = tokio::time::timeout(Duration::from_secs(10), attempt)
            .await
            .ok()?
            .ok()?;
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.trim().to_string()))
    }
}
