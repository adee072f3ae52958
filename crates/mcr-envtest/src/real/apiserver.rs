//! Starting one `kube-apiserver` and waiting until it serves.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

    /// Starts the process and waits (bounded) until `/readyz` is ok and the system namespaces
    /// exist. `direct` must be a config for `https://127.0.0.1:<port>`.
    pub(crate) async fn start(&self, direct: &kube::Config) -> Result<Guarded, Error> {
        let started = Instant::now();
        let log = self.dir.join("kube-apiserver.log");
        let what = format!("kube-apiserver of {}", self.name);
        let mut process = Guarded::spawn(&what, &self.binary, &self.args, &log, None)?;
        let client = kube::Client::try_from(direct.clone()).map_err(Error::Client)?;
        let deadline = started + READY_TIMEOUT;
        loop {
            if let Some(status) = process.exited() {
                return Err(self.failed(format!("exited during start ({status})"), &process));
            }
            if ready(&client).await {
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
async fn ready(client: &kube::Client) -> bool {
    let get = |path: String| async move {
        let request = http::Request::get(path).body(Vec::new()).ok()?;
        tokio::time::timeout(Duration::from_secs(10), client.request_text(request))
            .await
            .ok()?
            .ok()
    };
    if get("/readyz".into()).await.as_deref() != Some("ok") {
        return false;
    }
    for ns in SYSTEM_NAMESPACES {
        if get(format!("/api/v1/namespaces/{ns}")).await.is_none() {
            return false;
        }
    }
    true
}
