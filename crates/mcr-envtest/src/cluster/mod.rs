//! One emulated cluster and its test hooks.

mod hooks;

use std::path::Path;
use std::sync::Arc;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::counters::Counters;
use crate::engine::Engine;
use crate::faults::Faults;
pub use crate::faults::{ErrorRule, Partition};
use crate::https::HttpsServer;
use crate::server::Shared;
use crate::shared_port::{Route, SharedPort};
use crate::{Backend, Error, kubeconfig, real, service, tls};

/// One emulated Kubernetes cluster: an API server state, an in-process client, and (for
/// [`start_https`](Self::start_https)) an HTTPS endpoint on `127.0.0.1` with a kubeconfig.
///
/// Cheap to clone: clones share the cluster. Every new cluster has the namespaces `default`,
/// `kube-system`, `kube-public` and `kube-node-lease`. In-process clients keep working after
/// the last `TestCluster` handle is dropped; the HTTPS listener closes with it.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, PostParams};
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// let cluster = mcr_envtest::TestCluster::start("a").await?;
/// let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("hello".into());
/// cms.create(&PostParams::default(), &cm).await?;
/// assert_eq!(cluster.request_count("create", "configmaps"), 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TestCluster {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    token: Arc<str>,
    /// The kubeconfig, for HTTPS and real clusters.
    kubeconfig_yaml: Option<String>,
    kind: Kind,
}

enum Kind {
    Emulated {
        shared: Arc<Shared>,
        https: Option<Endpoint>,
    },
    Real(Box<real::ControlPlane>),
}

/// How an emulated cluster is reached.
pub(crate) enum Transport {
    /// In-process only.
    InProcess,
    /// Over HTTPS on a port of its own.
    OwnPort,
    /// Over HTTPS on a port shared with other clusters (see [`crate::shared_port`]).
    Shared(Arc<SharedPort>),
}

/// The HTTPS endpoint of an emulated cluster.
enum Endpoint {
    /// Its own port, CA (PEM) and client-certificate CA (see `crate::x509`).
    Own {
        server: HttpsServer,
        ca_pem: String,
        client_ca: Arc<crate::x509::ClientCa>,
    },
    /// A path prefix on a shared port, under the port's CA.
    Routed(Route),
}

impl Endpoint {
    fn url(&self) -> String {
        match self {
            Endpoint::Own { server, .. } => format!("https://{}", server.addr()),
            Endpoint::Routed(route) => route.url(),
        }
    }

    fn client_ca(&self) -> (&str, &crate::x509::ClientCa) {
        match self {
            Endpoint::Own {
                ca_pem, client_ca, ..
            } => (ca_pem, client_ca),
            Endpoint::Routed(route) => (route.port().ca_pem(), route.port().client_ca()),
        }
    }
}

fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl TestCluster {
    async fn build(name: String, transport: Transport) -> Result<TestCluster, Error> {
        Self::build_on(Backend::from_env()?, name, transport).await
    }

    /// Starts a cluster on `backend`; real clusters are always served over HTTPS, on their
    /// own API server.
    pub(crate) async fn build_on(
        backend: Backend,
        name: String,
        transport: Transport,
    ) -> Result<TestCluster, Error> {
        if backend.is_real() {
            return Self::build_real(name, None).await;
        }
        let token: Arc<str> = Arc::from(new_token());
        let shared = Arc::new(Shared {
            name: name.clone(),
            engine: Engine::new(),
            faults: Faults::default(),
            counters: Counters::default(),
            subresources: Default::default(),
        });
        let https = match transport {
            Transport::InProcess => None,
            Transport::OwnPort => {
                let material = tls::generate(&name)?;
                let acceptor = tokio_rustls::TlsAcceptor::from(material.server_config.clone());
                let auth = crate::https::Auth {
                    token: token.clone(),
                    client_ca: material.client_ca.clone(),
                };
                Some(Endpoint::Own {
                    server: HttpsServer::start(shared.clone(), acceptor, auth)?,
                    ca_pem: material.ca_pem,
                    client_ca: material.client_ca,
                })
            }
            Transport::Shared(port) => Some(Endpoint::Routed(Route::new(
                port,
                shared.clone(),
                token.clone(),
            )?)),
        };
        let kubeconfig_yaml = https.as_ref().map(|endpoint| {
            let url = endpoint.url();
            tracing::info!(cluster = %name, %url, "serving over HTTPS");
            kubeconfig::render(&name, &url, endpoint.client_ca().0, &token)
        });
        Ok(TestCluster {
            inner: Arc::new(Inner {
                name,
                token,
                kubeconfig_yaml,
                kind: Kind::Emulated { shared, https },
            }),
        })
    }

    /// Starts a real control plane, its kube-apiserver reading `admission_config`.
    async fn build_real(
        name: String,
        admission_config: Option<&Path>,
    ) -> Result<TestCluster, Error> {
        let token: Arc<str> = Arc::from(new_token());
        let control = real::ControlPlane::start(&name, &token, admission_config).await?;
        let yaml = kubeconfig::render(&name, &control.url(), control.ca_pem(), &token);
        Ok(TestCluster {
            inner: Arc::new(Inner {
                name,
                token,
                kubeconfig_yaml: Some(yaml),
                kind: Kind::Real(Box::new(control)),
            }),
        })
    }

    /// Starts a real control plane whose kube-apiserver reads the `AdmissionConfiguration` in
    /// the file `admission_config` (`--admission-control-config-file`): for example a
    /// `WebhookAdmissionConfiguration` whose kubeconfig gives the client certificate the
    /// apiserver presents to admission webhooks. The file, and every file it names, must
    /// stay in place while the cluster runs (a [`restart`](Self::restart) reads them again).
    /// The emulator runs no admission plugins: with `MCR_ENVTEST` not `real`, this is
    /// [`Error::RealOnly`].
    ///
    /// ```no_run
    /// # async fn doc(dir: &std::path::Path) -> Result<(), mcr_envtest::Error> {
    /// std::fs::write(dir.join("admission.yaml"), "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins: []\n")?;
    /// let cluster = mcr_envtest::TestCluster::start_with_admission_config("member-1", &dir.join("admission.yaml")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_with_admission_config(
        name: impl Into<String>,
        admission_config: &Path,
    ) -> Result<TestCluster, Error> {
        if !Backend::from_env()?.is_real() {
            return Err(Error::RealOnly("an admission configuration"));
        }
        Self::build_real(name.into(), Some(admission_config)).await
    }

    /// The backend this cluster runs on.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// assert_eq!(cluster.backend(), mcr_envtest::backend());
    /// # Ok(()) }
    /// ```
    pub fn backend(&self) -> Backend {
        match self.inner.kind {
            Kind::Emulated { .. } => Backend::Emulator,
            Kind::Real(_) => Backend::Real,
        }
    }

    /// Starts an in-process cluster (no socket): use [`client`](Self::client). On the real
    /// backend (`MCR_ENVTEST=real`) this starts a real control plane, served over HTTPS.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// assert!(cluster.url().is_none());
    /// # Ok(()) }
    /// ```
    pub async fn start(name: impl Into<String>) -> Result<TestCluster, Error> {
        Self::build(name.into(), Transport::InProcess).await
    }

    /// Starts a cluster on the given backend whatever `MCR_ENVTEST` says, e.g. to compare the
    /// emulator with kube-apiserver (`cargo xtask fidelity`). Like [`start`](Self::start)
    /// otherwise.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// use mcr_envtest::{Backend, TestCluster};
    /// let emulated = TestCluster::start_on(Backend::Emulator, "a").await?;
    /// assert!(!emulated.backend().is_real());
    /// # Ok(()) }
    /// ```
    pub async fn start_on(backend: Backend, name: impl Into<String>) -> Result<TestCluster, Error> {
        Self::build_on(backend, name.into(), Transport::InProcess).await
    }

    /// Starts a cluster served in-process and over HTTPS on `127.0.0.1:<random port>`, with a
    /// generated CA, serving certificate, bearer token and kubeconfig. On the real backend
    /// (`MCR_ENVTEST=real`) a real control plane (see [`real`](crate::real)).
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// let client = cluster.https_client().await?;
    /// println!("{}", cluster.url().unwrap());
    /// # Ok(()) }
    /// ```
    pub async fn start_https(name: impl Into<String>) -> Result<TestCluster, Error> {
        Self::build(name.into(), Transport::OwnPort).await
    }

    /// The cluster's name.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// assert_eq!(mcr_envtest::TestCluster::start("a").await?.name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// A kube client talking to the handler in-process (no socket, no TLS). Faults apply.
    /// On the real backend, an HTTPS client through the cluster's proxy. Must be called inside
    /// a tokio runtime.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// let version = cluster.client().apiserver_version().await?;
    /// assert_eq!(version.major, "1");
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> kube::Client {
        match &self.inner.kind {
            Kind::Emulated { shared, .. } => service::client(shared.clone()),
            Kind::Real(control) => control.client(),
        }
    }

    /// The CA (PEM) and client-certificate CA of an HTTPS cluster (see `crate::x509`).
    pub(crate) fn client_ca(&self) -> Result<(&str, &crate::x509::ClientCa), Error> {
        match &self.inner.kind {
            Kind::Emulated {
                https: Some(endpoint),
                ..
            } => Ok(endpoint.client_ca()),
            Kind::Emulated { .. } => Err(Error::NotHttps(self.name().to_string())),
            Kind::Real(_) => Err(Error::Backend(format!(
                "client certificates of cluster {:?} are minted by the emulator only",
                self.name()
            ))),
        }
    }

    /// The extra subresource handlers of this cluster (see `crate::garden`); emulator only.
    pub(crate) fn subresources(&self) -> Result<&crate::garden::Subresources, Error> {
        match &self.inner.kind {
            Kind::Emulated { shared, .. } => Ok(&shared.subresources),
            Kind::Real(_) => Err(Error::Backend(format!(
                "cluster {:?}: the garden's subresources are served by the emulator only",
                self.name()
            ))),
        }
    }

    fn https(&self) -> Result<&str, Error> {
        self.inner
            .kubeconfig_yaml
            .as_deref()
            .ok_or_else(|| Error::NotHttps(self.name().to_string()))
    }

    /// A kube client built from the kubeconfig through `kube::Config::from_custom_kubeconfig`,
    /// so kube's real TLS and bearer-token path is used. HTTPS clusters only.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// let client = cluster.https_client().await?;
    /// client.apiserver_version().await?;
    /// # Ok(()) }
    /// ```
    pub async fn https_client(&self) -> Result<kube::Client, Error> {
        let kubeconfig = kubeconfig::parse(self.https()?)?;
        let options = KubeConfigOptions {
            context: Some(self.name().to_string()),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| Error::Kubeconfig(format!("kube rejected the kubeconfig: {e}")))?;
        kube::Client::try_from(config).map_err(Error::Client)
    }

    /// The kubeconfig of an HTTPS cluster: one cluster, user and context named after the
    /// cluster, current context set, CA inline, bearer token. `None` for in-process clusters.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// let kc = cluster.kubeconfig().unwrap();
    /// assert_eq!(kc.current_context.as_deref(), Some("a"));
    /// # Ok(()) }
    /// ```
    pub fn kubeconfig(&self) -> Option<Kubeconfig> {
        kubeconfig::parse(self.inner.kubeconfig_yaml.as_deref()?).ok()
    }

    /// The kubeconfig as YAML (it contains the token: handle with care).
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// assert!(cluster.kubeconfig_yaml().unwrap().contains("current-context"));
    /// # Ok(()) }
    /// ```
    pub fn kubeconfig_yaml(&self) -> Option<String> {
        self.inner.kubeconfig_yaml.clone()
    }

    /// Writes the kubeconfig to `path` (mode 0600 on Unix), creating parent directories.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// cluster.write_kubeconfig(std::path::Path::new("/tmp/a.kubeconfig"))?;
    /// # Ok(()) }
    /// ```
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), Error> {
        kubeconfig::write(path, self.https()?)
    }

    /// `https://127.0.0.1:<port>` for HTTPS and real clusters;
    /// `https://127.0.0.1:<port>/clusters/<name>` on a shared port
    /// ([`FleetBuilder::shared_port`](crate::FleetBuilder::shared_port)).
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// assert!(cluster.url().unwrap().starts_with("https://127.0.0.1:"));
    /// # Ok(()) }
    /// ```
    pub fn url(&self) -> Option<String> {
        match &self.inner.kind {
            Kind::Emulated { https, .. } => https.as_ref().map(Endpoint::url),
            Kind::Real(control) => Some(control.url()),
        }
    }

    /// The bearer token HTTPS requests must carry.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// assert!(!cluster.token().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> &str {
        &self.inner.token
    }
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token and kubeconfig stay out of debug output.
        f.debug_struct("TestCluster")
            .field("name", &self.name())
            .field("url", &self.url())
            .field("stopped", &self.is_stopped())
            .finish_non_exhaustive()
    }
}
