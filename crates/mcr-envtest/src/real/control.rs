//! One real control plane: a `kube-apiserver` on the shared etcd, behind a fault proxy.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::apiserver::{ApiServerSpec, Probe, token_file};
use super::assets::Assets;
use super::process::{GRACE, Guarded, free_port};
use super::{etcd, pki};
use crate::Error;
use crate::faults::{Faults, Mode};
use crate::real::proxy::Proxy;

/// A running real control plane. Dropping it kills the API server at once and deletes its
/// directory.
pub(crate) struct ControlPlane {
    name: String,
    apiserver: Mutex<Option<Guarded>>,
    spec: ApiServerSpec,
    faults: Arc<Faults>,
    proxy: Proxy,
    /// Through the proxy: what clients use.
    config: kube::Config,
    /// Straight to the API server: readiness checks (also during restarts).
    probe: Probe,
    ca_pem: String,
    /// Last: deleted after the process is gone.
    _dir: tempfile::TempDir,
}

/// A kube config for `url` trusting `ca_der`, authenticating with `token`.
fn config(url: &str, ca_der: &[u8], token: &str) -> Result<kube::Config, Error> {
    let uri = url
        .parse::<http::Uri>()
        .map_err(|e| Error::ControlPlane(format!("bad URL {url}: {e}")))?;
    let mut config = kube::Config::new(uri);
    config.root_cert = Some(vec![ca_der.to_vec()]);
    // `AuthInfo::token` is a secrecy string; serde builds it without naming that crate.
    config.auth_info = serde_json::from_value(serde_json::json!({ "token": token }))
        .map_err(|_| Error::ControlPlane("could not set the bearer token".into()))?;
    Ok(config)
}

/// `name` reduced to what is safe in a file name.
fn path_safe(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect()
}

/// How many ports a start tries when kube-apiserver finds its port taken.
const PORT_ATTEMPTS: u32 = 5;

/// What kube-apiserver's log says when its port was taken.
const PORT_TAKEN: &str = "address already in use";

impl ControlPlane {
    /// Starts an API server named `name` whose admin credential is `token`, reading
    /// `admission_config` (`--admission-control-config-file`) when given.
    pub(crate) async fn start(
        name: &str,
        token: &str,
        admission_config: Option<&std::path::Path>,
    ) -> Result<ControlPlane, Error> {
        let started = Instant::now();
        let assets = Assets::find()?;
        let etcd = etcd::shared(&assets).await?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("apiserver-{}-", path_safe(name)))
            .tempdir_in(&etcd.root)?;
        let pki = pki::generate(name, dir.path())?;
        pki::write_private(
            &token_file(dir.path()),
            &format!("{token},mcr-envtest-admin,mcr-envtest-admin,\"system:masters\"\n"),
        )?;
        let prefix = format!("/mcr-envtest/{}", uuid::Uuid::new_v4().simple());
        let faults = Arc::new(Faults::default());
        // A free port is free when asked, not necessarily when kube-apiserver binds it: another
        // process (a test binary running next to this one) may take it in between. Such a
        // start is retried on a new port, a bounded number of times.
        let mut attempt = 1;
        let (spec, probe, proxy, url, config, process) = loop {
            let port = free_port()?;
            let spec = ApiServerSpec::new(
                name,
                &assets.kube_apiserver,
                dir.path(),
                port,
                &etcd.url,
                &prefix,
                &pki,
            )
            .admission_config(admission_config);
            let probe = Probe::new(port, &pki.ca_der, token)?;
            let proxy = Proxy::start(
                name,
                SocketAddr::from(([127, 0, 0, 1], port)),
                faults.clone(),
            )?;
            let url = format!("https://{}", proxy.addr());
            let config = config(&url, &pki.ca_der, token)?;
            // Fail here, not in `client()`, if this config cannot make a client.
            kube::Client::try_from(config.clone()).map_err(Error::Client)?;
            match spec.start(&probe).await {
                Ok(process) => break (spec, probe, proxy, url, config, process),
                Err(err) if attempt < PORT_ATTEMPTS && err.to_string().contains(PORT_TAKEN) => {
                    tracing::debug!(cluster = %name, port, attempt, "port taken before kube-apiserver bound it; trying another");
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        };
        tracing::info!(cluster = %name, %url, elapsed = ?started.elapsed(), "real control plane started");
        Ok(ControlPlane {
            name: name.to_string(),
            apiserver: Mutex::new(Some(process)),
            spec,
            faults,
            proxy,
            config,
            probe,
            ca_pem: pki.ca_pem,
            _dir: dir,
        })
    }

    /// `https://127.0.0.1:<proxy port>`.
    pub(crate) fn url(&self) -> String {
        format!("https://{}", self.proxy.addr())
    }

    /// The CA certificate (PEM) clients trust.
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A client through the proxy.
    pub(crate) fn client(&self) -> kube::Client {
        // `start` built a client from this very config, so this cannot fail.
        kube::Client::try_from(self.config.clone())
            .expect("the config was checked when the control plane started")
    }

    fn sync(&self, mode: Mode) {
        if let Err(err) = self.proxy.sync(mode) {
            tracing::warn!(cluster = %self.name, %err, "could not re-open the proxy listener");
        }
    }

    fn take_process(&self) -> Option<Guarded> {
        self.apiserver.lock().take()
    }

    /// Refuses connections, then stops the API server (SIGTERM, SIGKILL after a grace).
    pub(crate) async fn stop(&self) {
        self.sync(self.faults.set_stopped(true));
        if let Some(process) = self.take_process() {
            process.stop(GRACE).await;
        }
    }

    /// Starts the API server again (same port, certificates, token and data) and, once it is
    /// ready, lets clients through.
    pub(crate) async fn restart(&self) -> Result<(), Error> {
        let running = self.apiserver.lock().is_some();
        if !running {
            let process = self.spec.start(&self.probe).await?;
            let surplus = {
                let mut slot = self.apiserver.lock();
                // A concurrent restart may have won; then this process is surplus.
                if slot.is_some() {
                    Some(process)
                } else {
                    *slot = Some(process);
                    None
                }
            };
            if let Some(process) = surplus {
                process.stop(GRACE).await;
            }
        }
        self.sync(self.faults.set_stopped(false));
        Ok(())
    }

    /// The link state shared with the proxy.
    pub(crate) fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Applies a link state change made through [`faults`](Self::faults).
    pub(crate) fn apply(&self, mode: Mode) {
        self.sync(mode);
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.proxy.unbind();
        drop(self.take_process());
    }
}
