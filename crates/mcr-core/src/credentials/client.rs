//! A kube client whose credentials can be swapped in place: [`RenewableClient`] and its
//! [`CredentialHandle`].

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use futures::TryFutureExt as _;
use http::{Request, Response, header};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::{Client as HyperClient, ResponseFuture, connect::HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::{Body, ConfigExt};
use parking_lot::{Mutex, RwLock};
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use tower::ServiceBuilder;

use super::body::Compact;
use super::material::Secret;
use super::renew::State;
use super::{CredentialStatus, Credentials, Error};
use crate::Cluster;

type Connector = TimeoutConnector<HttpsConnector<HttpConnector>>;
type Http = HyperClient<Connector, Body>;

/// The read buffer of each HTTP/1 connection, fixed. hyper's default buffer adapts: starting
/// at 8 KiB, it doubles (up to ~400 KiB) while a large response keeps filling it, and a
/// buffer that is not shared is reused as it is. A member's watch runs on the connection its
/// initial list used, so a large list could leave a large buffer behind for as long as the
/// watch lasts. Fixed at 8 KiB, large responses are read 8 KiB at a time. It also bounds a
/// response's head (status line and headers) to 8 KiB, as common reverse proxies do by
/// default; a larger head fails the request with an error. An API server's heads stay well
/// below it: it truncates the warnings of one response to 4 Ki characters, and its other
/// headers are short.
const READ_BUF_SIZE: usize = 8 * 1024;

/// Builds kube clients whose credentials are renewed in place.
///
/// The client is kube's own [`kube::Client`] over a transport mcr builds: a hyper client with
/// a rustls connector whose client certificate comes from a swappable slot
/// ([`ResolvesClientCert`]), and a bearer token set on each request from another slot.
/// [`CredentialHandle::replace`] swaps both and starts a new connection pool, so new requests
/// open new connections with the new credentials while running requests (watches) finish on
/// their old connection, which then closes. Informers keep running and resume from their
/// resourceVersion: nothing is relisted. kube's retry of 429/503/504 and proxies are not part
/// of this transport (a config with a `proxy_url` is refused); `tls_server_name`, timeouts,
/// impersonation and extra headers are honoured. Each HTTP/1.1 connection reads through a
/// fixed 8 KiB buffer (hyper's adaptive one grows with large lists and stays grown under the
/// watch that follows), which bounds a response head to 8 KiB: a larger one fails the request.
///
/// ```no_run
/// use mcr_core::credentials::{Credentials, RenewableClient};
/// # async fn f(config: kube::Config, cert: &[u8], key: &[u8]) -> Result<(), mcr_core::credentials::Error> {
/// let creds = Credentials::client_certificate(cert, key)?;
/// let (client, handle) = RenewableClient::build(config, creds)?;
/// let cluster = mcr_core::Cluster::new("member-1", client).with_credentials(handle);
/// # let _ = cluster; Ok(()) }
/// ```
pub struct RenewableClient;

impl RenewableClient {
    /// A client for `config`'s server, CA, TLS and header settings, authenticated with
    /// `credentials` (any credentials in `config.auth_info` are ignored). Idle pooled
    /// connections are closed after 90 s (the default of
    /// [`ClientOptions::pool_idle_timeout`](crate::kubeconfig::ClientOptions::pool_idle_timeout)),
    /// and requests go over HTTP/1.1 (see
    /// [`ClientOptions::http2`](crate::kubeconfig::ClientOptions::http2)).
    pub fn build(
        config: kube::Config,
        credentials: Credentials,
    ) -> Result<(kube::Client, CredentialHandle), Error> {
        Self::build_with(
            config,
            credentials,
            &crate::kubeconfig::ClientOptions::default(),
        )
    }

    /// [`build`](Self::build), with the connection settings of `opts` (the pool's idle
    /// timeout, HTTP/2); its other settings are already applied to `config`.
    pub(crate) fn build_with(
        mut config: kube::Config,
        credentials: Credentials,
        opts: &crate::kubeconfig::ClientOptions,
    ) -> Result<(kube::Client, CredentialHandle), Error> {
        let pool_idle_timeout = opts.pool_idle();
        config.auth_info = kube::config::AuthInfo {
            impersonate: config.auth_info.impersonate.take(),
            impersonate_groups: config.auth_info.impersonate_groups.take(),
            ..kube::config::AuthInfo::default()
        };
        if config.proxy_url.is_some() {
            return Err(Error::Client(
                "proxies are not supported for renewable clients".into(),
            ));
        }
        crate::kubeconfig::check_server_url(&config.cluster_url).map_err(Error::Client)?;
        let cert = Arc::new(CertSlot::default());
        let mut tls = config
            .rustls_client_config()
            .map_err(|e| Error::Client(e.to_string()))?;
        tls.client_auth_cert_resolver = cert.clone();
        // A resumed TLS session keeps the identity of the handshake it resumes: new
        // connections must present the current certificate, so every connection does a full
        // handshake (connections are long-lived; this costs little).
        tls.resumption = rustls::client::Resumption::disabled();
        let mut https = HttpConnector::new();
        https.enforce_http(false);
        let mut builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        if let Some(name) = &config.tls_server_name {
            let name = rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|_| Error::Client("tls-server-name is not a valid name".into()))?;
            builder =
                builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
        }
        // With HTTP/2 offered (ALPN `h2`, then `http/1.1`), a server that takes it carries
        // every request and watch of the member on one connection.
        let https = if opts.http2 {
            builder.enable_all_versions().wrap_connector(https)
        } else {
            builder.enable_http1().wrap_connector(https)
        };
        let mut connector = TimeoutConnector::new(https);
        connector.set_connect_timeout(config.connect_timeout);
        connector.set_read_timeout(config.read_timeout);
        connector.set_write_timeout(config.write_timeout);
        let new_pool = move || -> Http {
            HyperClient::builder(TokioExecutor::new())
                .http1_read_buf_exact_size(READ_BUF_SIZE)
                // Without a timer hyper drops expired idle connections only when the pool is
                // next used, so a member keeps every connection it ever opened at once.
                .pool_timer(TokioTimer::new())
                .pool_idle_timeout(pool_idle_timeout)
                .build(connector.clone())
        };
        let inner = Arc::new(Inner {
            http: RwLock::new(new_pool()),
            new_pool: Box::new(new_pool),
            token: RwLock::new(None),
            cert,
            state: Mutex::new(State::default()),
            endpoint: Mutex::new(None),
            fingerprint: Mutex::new(None),
        });
        let handle = CredentialHandle { inner };
        handle.install(credentials);
        let service = ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .layer(
                config
                    .extra_headers_layer()
                    .map_err(|e| Error::Client(e.to_string()))?,
            )
            .service(Transport(handle.inner.clone()));
        Ok((kube::Client::new(service, config.default_namespace), handle))
    }
}

/// The swappable credentials of a client built by [`RenewableClient`]; cheap to clone.
///
/// ```no_run
/// # fn f(handle: mcr_core::credentials::CredentialHandle, fresh: mcr_core::credentials::Credentials) {
/// handle.replace(fresh); // new requests use it at once; pooled connections are retired
/// println!("{:?}", handle.status().expires_at);
/// # }
/// ```
#[derive(Clone)]
pub struct CredentialHandle {
    inner: Arc<Inner>,
}

impl Cluster {
    /// Attaches the [`CredentialHandle`] of a client built by [`RenewableClient`], so
    /// the credentials can be renewed in place and their status read from the cluster. Keeps the id.
    ///
    /// ```no_run
    /// # fn f(client: kube::Client, handle: mcr_core::credentials::CredentialHandle) {
    /// let c = mcr_core::Cluster::new("a", client).with_credentials(handle);
    /// assert!(c.credentials().is_some());
    /// # }
    /// ```
    pub fn with_credentials(self, handle: CredentialHandle) -> Cluster {
        self.with_attachment(Arc::new(handle))
    }

    /// The renewable credentials of this cluster's client, if it has them (see
    /// [`with_credentials`](Cluster::with_credentials)).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// let expired = c.credentials().is_some_and(|h| h.status().is_expired());
    /// # let _ = expired; }
    /// ```
    pub fn credentials(&self) -> Option<&CredentialHandle> {
        self.attachment()
    }
}

struct Inner {
    http: RwLock<Http>,
    new_pool: Box<dyn Fn() -> Http + Send + Sync>,
    token: RwLock<Option<http::HeaderValue>>,
    cert: Arc<CertSlot>,
    state: Mutex<State>,
    /// The endpoint hash of the kubeconfig the client was built from (see `endpoint_hash`).
    endpoint: Mutex<Option<String>>,
    fingerprint: Mutex<Option<String>>,
}

impl CredentialHandle {
    fn install(&self, credentials: Credentials) {
        let expires_at = credentials.expires_at();
        *self.inner.fingerprint.lock() = Some(credentials.fingerprint().to_string());
        match credentials.secret {
            Secret::Token(value) => {
                *self.inner.token.write() = Some(value);
                *self.inner.cert.0.write() = None;
            }
            Secret::Certificate(key) => {
                *self.inner.cert.0.write() = Some(key);
                *self.inner.token.write() = None;
            }
        }
        self.inner.state.lock().installed(expires_at);
    }

    /// Replaces the credentials in place: new requests carry them at once, and a new
    /// connection pool replaces the old one (connections opened with the old credentials
    /// close when their running requests end).
    pub fn replace(&self, credentials: Credentials) {
        self.install(credentials);
        *self.inner.http.write() = (self.inner.new_pool)();
    }

    /// The renewal status (expiry, renewals, failures), for health checks and metrics.
    pub fn status(&self) -> CredentialStatus {
        self.inner.state.lock().status()
    }

    pub(crate) fn set_endpoint(&self, endpoint: String) {
        *self.inner.endpoint.lock() = Some(endpoint);
    }

    pub(crate) fn endpoint(&self) -> Option<String> {
        self.inner.endpoint.lock().clone()
    }

    pub(crate) fn fingerprint(&self) -> Option<String> {
        self.inner.fingerprint.lock().clone()
    }

    pub(crate) fn record_failure(&self, at: SystemTime, error: String) {
        self.inner.state.lock().failed(at, error);
    }

    pub(crate) fn expires_at(&self) -> Option<SystemTime> {
        self.inner.state.lock().expires_at
    }

    pub(crate) fn installed_at(&self) -> SystemTime {
        self.inner.state.lock().installed_at
    }
}

impl fmt::Debug for CredentialHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialHandle")
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

/// Serves the current client certificate to every new TLS connection.
#[derive(Default)]
struct CertSlot(RwLock<Option<Arc<CertifiedKey>>>);

impl fmt::Debug for CertSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CertSlot")
    }
}

impl ResolvesClientCert for CertSlot {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.0.read().clone()
    }

    fn has_certs(&self) -> bool {
        self.0.read().is_some()
    }
}

/// The innermost service: current token on the request, current pool for the connection.
#[derive(Clone)]
struct Transport(Arc<Inner>);

impl tower::Service<Request<Body>> for Transport {
    type Response = Response<Compact>;
    type Error = hyper_util::client::legacy::Error;
    type Future =
        futures::future::MapOk<ResponseFuture, fn(Response<Incoming>) -> Response<Compact>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        if let Some(token) = self.0.token.read().clone() {
            req.headers_mut().insert(header::AUTHORIZATION, token);
        }
        let http = self.0.http.read().clone();
        http.request(req).map_ok(|res| res.map(Compact))
    }
}
