//! [`Server`]: HTTPS on rustls, accepting up to a cap of connections (each served by
//! [`connection`](crate::connection), which bounds its every phase) and routing each request to
//! its webhook and its cluster, with a bounded body and handler time, and a panic answered with
//! a 500 for that request only.

use std::{net::SocketAddr, panic::AssertUnwindSafe, sync::Arc, time::Duration};

use bytes::Bytes;
use futures::FutureExt;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use mcr_core::BoxFuture;
use mcr_manager::{BoxError, Runnable};
use parking_lot::Mutex;
use tokio::{
    net::TcpListener,
    sync::{OwnedSemaphorePermit, Semaphore},
};
use tokio_rustls::TlsAcceptor;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::{
    CertificateReloader, ClientAuth, Error, Webhooks,
    admission::{Call, Handle, not_served},
    body::{self, Budget, Scope},
    connection,
    pool::ConverterPool,
    review::uid_of,
    review::{Reply, ReviewKind},
    route,
};

/// Limits and timings of the [`Server`]: every phase of a connection has a deadline, and
/// what callers can make the server hold (handshakes, connections, HTTP/2 streams, request
/// bytes, converter threads) is capped, so that no client, trusted or not, can hold the
/// server's resources for long or grow its memory past a bound (the guide's webhooks chapter
/// gives the bound of the defaults). `#[non_exhaustive]`: start from `default()` and set
/// fields.
///
/// ```
/// let mut options = mcr_webhook::ServerOptions::default();
/// options.max_body_bytes = 1 << 20;
/// options.handler_timeout = std::time::Duration::from_secs(5);
/// options.max_connections = 512;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerOptions {
    /// The largest request body read; a larger one is refused (`status.code` 413) before the
    /// handler runs. Default 7 MiB, as controller-runtime: a review carries the object and
    /// the old object, each up to etcd's 1.5 MiB, in JSON.
    pub max_body_bytes: usize,
    /// The bytes all requests in flight on one connection may hold at once: each its header
    /// block twice, 8 KiB for its state, and its body as it is read. A request that does not
    /// fit is answered HTTP 429 at once, from its head alone (a failed call: the
    /// `failurePolicy` decides). Default 16 MiB: two reviews of the largest size. Keep it above `max_body_bytes`.
    pub max_connection_request_bytes: usize,
    /// The bytes all requests in flight in the server may hold at once, whatever their
    /// connections, counted as above; past it as above. With the limits on connections and
    /// handshakes it bounds the server's memory (see the guide). Default 64 MiB.
    pub max_request_bytes_in_flight: usize,
    /// HTTP/2: the most requests (streams) a connection may have open at once, announced to
    /// the client in its settings; a client that opens more has them refused
    /// (`REFUSED_STREAM`). Default 32 (kube-apiserver opens another connection when it needs
    /// more).
    pub max_concurrent_streams: u32,
    /// The most converters running at once, each on a thread of its own (not tokio's
    /// blocking pool, which `tokio::fs` needs); past it a conversion is refused at once
    /// (HTTP 503). A converter cut by `handler_timeout` keeps its thread until it returns, so
    /// stuck converters never hold more than this many threads. Default 8.
    pub converter_threads: usize,
    /// Time allowed for the TLS handshake. Default 10 s.
    pub handshake_timeout: Duration,
    /// The most TLS handshakes in progress at once (at least 1); a connection accepted past
    /// it cuts the oldest handshake still in progress. Counted apart from `max_connections`:
    /// a caller that opens TCP connections and never completes a handshake holds only these
    /// slots, for at most `handshake_timeout`, and to keep another caller's handshake from
    /// completing it would have to open this many connections in the few milliseconds that
    /// handshake takes. Default 128.
    pub max_handshakes: usize,
    /// Time allowed, from the end of the TLS handshake, for the first complete request head:
    /// protocol detection, an HTTP/1 head, or HTTP/2's preface, settings and first header
    /// block; on HTTP/1 also for the head of every later request. A connection still without
    /// a request by then is closed. Default 10 s.
    pub header_read_timeout: Duration,
    /// Time allowed to read the body and answer; past it the request gets a 504 (the
    /// apiserver then applies the webhook's `failurePolicy`). Default 10 s, kube-apiserver's
    /// default `timeoutSeconds` (it allows at most 30).
    pub handler_timeout: Duration,
    /// A keep-alive connection with no request in flight is closed this long after its last
    /// answer (gracefully: HTTP/2 GOAWAY). On HTTP/2 this also bounds the header block of a
    /// later request. Default 120 s: longer than the 90 s after which kube-apiserver's client
    /// drops idle connections itself, so it is the client that closes, not racing a request.
    pub idle_timeout: Duration,
    /// HTTP/2: how often the server pings the client. Default 30 s.
    pub http2_keep_alive_interval: Duration,
    /// HTTP/2: a ping not acknowledged within this closes the connection. Default 10 s.
    pub http2_keep_alive_timeout: Duration,
    /// The most connections served at once (at least 1), counted once their TLS handshake
    /// has completed (with [`client_auth`](Self::client_auth), once the caller's certificate,
    /// if any, was verified); a connection established past it is closed at once, while the
    /// open ones keep being answered. Default 1024: kube-apiserver keeps about one HTTP/2
    /// connection per webhook host, so this is the number of API server instances that may
    /// call this replica (raise it for larger fleets; mind the memory bound in the guide and
    /// the process's file-descriptor limit).
    pub max_connections: usize,
    /// How often the certificate files are re-read besides on file events. Default 30 s.
    pub certificate_poll_interval: Duration,
    /// On shutdown, how long open requests may still finish. Default 15 s.
    pub shutdown_grace: Duration,
    /// Caller authentication: each member's admission routes answer only that member's
    /// client certificate (see [`ClientAuth`]). Default `None`: any caller that reaches the
    /// server may call any route.
    pub client_auth: Option<ClientAuth>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: 7 * 1024 * 1024,
            max_connection_request_bytes: 16 * 1024 * 1024,
            max_request_bytes_in_flight: 64 * 1024 * 1024,
            max_concurrent_streams: 32,
            converter_threads: 8,
            handshake_timeout: Duration::from_secs(10),
            max_handshakes: 128,
            header_read_timeout: Duration::from_secs(10),
            handler_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            http2_keep_alive_interval: Duration::from_secs(30),
            http2_keep_alive_timeout: Duration::from_secs(10),
            max_connections: 1024,
            certificate_poll_interval: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(15),
            client_auth: None,
        }
    }
}

/// The webhook server: HTTPS (HTTP/1.1 and HTTP/2) with the certificate of a
/// [`CertificateReloader`], answering the routes of [`Webhooks`] for the host and, under
/// `/clusters/{name}`, for every member this replica engages. A review for a member it
/// cannot serve (another replica owns it, it is not engaged, no such member) fails with HTTP
/// 503, so that kube-apiserver applies the webhook's `failurePolicy`: it is never denied.
///
/// It is a [`Runnable`] that needs no leader (every replica serves, as in
/// controller-runtime): add it to the manager, or call [`serve`](Self::serve). With leader
/// election, every replica also answers the members' reviews: when a handler needs the
/// member's `Cluster`, the manager engages the members on standbys too, read-only (see
/// [`Runnable::serves_members`]), while their controllers wait for the Lease.
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_webhook::{CertificateReloader, Server, ServerOptions, Webhooks};
///
/// # async fn demo(mgr: mcr_manager::Manager, webhooks: Webhooks) -> Result<(), Box<dyn std::error::Error>> {
/// let certs = CertificateReloader::from_files("/tls/tls.crt", "/tls/tls.key")?;
/// let server = Server::bind("0.0.0.0:9443".parse()?, webhooks, certs, ServerOptions::default()).await?;
/// mgr.add(Arc::new(server))?;
/// mgr.run().await?;
/// # Ok(()) }
/// ```
///
/// Deployed with `charts/mcr-controller` (`webhook.enabled`), take the address and the
/// certificate's directory from the chart's environment instead of writing them down:
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_manager::DeploymentEnv;
/// use mcr_webhook::{CertificateReloader, Server, ServerOptions, Webhooks};
///
/// # async fn demo(client: kube::Client, webhooks: impl FnOnce(&mcr_manager::Manager) -> Webhooks) -> Result<(), Box<dyn std::error::Error>> {
/// let env = DeploymentEnv::from_env()?;
/// let webhook = env.webhook.clone();
/// let mgr = env.apply(mcr_manager::Manager::builder(client)).build();
/// if let Some(webhook) = webhook {
///     let certs = CertificateReloader::from_files(webhook.cert_path(), webhook.key_path())?;
///     let server =
///         Server::bind(webhook.address, webhooks(&mgr), certs, ServerOptions::default()).await?;
///     mgr.add(Arc::new(server))?;
/// }
/// mgr.run().await?;
/// # Ok(()) }
/// ```
pub struct Server {
    webhooks: Webhooks,
    certs: Arc<CertificateReloader>,
    options: ServerOptions,
    addr: SocketAddr,
    listener: Mutex<Option<TcpListener>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("webhooks", &self.webhooks)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Binds `addr` (port 0 picks a free port; see [`local_addr`](Self::local_addr)).
    ///
    /// ```no_run
    /// # async fn demo(webhooks: mcr_webhook::Webhooks, certs: mcr_webhook::CertificateReloader) -> Result<(), mcr_webhook::Error> {
    /// let server = mcr_webhook::Server::bind(([127, 0, 0, 1], 0).into(), webhooks, certs, Default::default()).await?;
    /// println!("https://{}", server.local_addr());
    /// # Ok(()) }
    /// ```
    pub async fn bind(
        addr: SocketAddr,
        webhooks: Webhooks,
        certs: CertificateReloader,
        options: ServerOptions,
    ) -> Result<Server, Error> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        Ok(Server {
            webhooks,
            certs: Arc::new(certs),
            options,
            addr,
            listener: Mutex::new(Some(listener)),
        })
    }

    /// The address the server listens on.
    ///
    /// ```no_run
    /// # fn demo(server: mcr_webhook::Server) { let port = server.local_addr().port(); }
    /// ```
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The certificate being served.
    ///
    /// ```no_run
    /// # fn demo(server: mcr_webhook::Server) { let n = server.certificates().generation(); }
    /// ```
    pub fn certificates(&self) -> &Arc<CertificateReloader> {
        &self.certs
    }

    /// Serves until `token` fires, then lets open requests finish (at most
    /// [`shutdown_grace`](ServerOptions::shutdown_grace)). Once per server.
    ///
    /// ```no_run
    /// # async fn demo(server: mcr_webhook::Server) -> Result<(), mcr_webhook::Error> {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// server.serve(token).await
    /// # }
    /// ```
    pub async fn serve(&self, token: CancellationToken) -> Result<(), Error> {
        let listener = self.listener.lock().take().ok_or(Error::AlreadyServing)?;
        let builder = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(Error::Tls)?;
        let builder = match &self.options.client_auth {
            Some(auth) => builder.with_client_cert_verifier(auth.verifier()?),
            None => builder.with_no_client_auth(),
        };
        let mut tls = builder.with_cert_resolver(self.certs.clone());
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let tracker = TaskTracker::new();
        let watch = token.child_token();
        tracker.spawn(
            self.certs
                .clone()
                .watch(watch.clone(), self.options.certificate_poll_interval),
        );
        let state = Arc::new(State {
            webhooks: self.webhooks.clone(),
            options: self.options.clone(),
            requests: Budget::new(self.options.max_request_bytes_in_flight, Scope::Process),
            converters: Arc::new(ConverterPool::new(self.options.converter_threads)),
            connections: Slots::new("connection", self.options.max_connections),
        });
        let handshakes = connection::Handshakes::new(self.options.max_handshakes);
        info!(addr = %self.addr, paths = ?self.webhooks.paths(), "webhook server listening");
        loop {
            let (tcp, peer) = tokio::select! {
                () = token.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Out of file descriptors and the like: back off a little, keep serving.
                        warn!(error = %err, "accepting a webhook connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            // Past the handshakes' cap, the oldest one in progress is cut; the connections
            // established are served as before.
            let handshake = handshakes.admit();
            let (acceptor, state, token) = (acceptor.clone(), state.clone(), token.clone());
            tracker.spawn(connection::serve(
                acceptor, tcp, peer, handshake, state, token,
            ));
        }
        drop(listener);
        watch.cancel();
        tracker.close();
        if tokio::time::timeout(self.options.shutdown_grace, tracker.wait())
            .await
            .is_err()
        {
            warn!("webhook requests still open after the shutdown grace period were dropped");
        }
        Ok(())
    }
}

impl Runnable for Server {
    fn name(&self) -> &str {
        "webhook-server"
    }

    fn start(
        self: Arc<Self>,
        token: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move { self.serve(token).await.map_err(BoxError::from) })
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    /// Whether a handler is handed the member's `Cluster`: then, with leader election, the
    /// manager engages the members on every replica (read-only on standbys), so that every
    /// replica behind the Service answers every member's review. Asked when the manager
    /// starts: register the webhooks before.
    fn serves_members(&self) -> bool {
        self.webhooks.needs_members()
    }
}

pub(crate) struct State {
    pub(crate) webhooks: Webhooks,
    pub(crate) options: ServerOptions,
    /// The bytes requests hold in the whole server.
    pub(crate) requests: Budget,
    /// The threads converters run on.
    pub(crate) converters: Arc<ConverterPool>,
    /// Established connections.
    pub(crate) connections: Slots,
}

/// A cap on established connections, which warns once each time it fills up.
pub(crate) struct Slots {
    what: &'static str,
    max: usize,
    free: Arc<Semaphore>,
    saturated: std::sync::atomic::AtomicBool,
}

impl Slots {
    fn new(what: &'static str, max: usize) -> Self {
        let max = max.max(1);
        Self {
            what,
            max,
            free: Arc::new(Semaphore::new(max)),
            saturated: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A slot for `peer`, or `None` (logged) when every slot is taken.
    pub(crate) fn take(&self, peer: &SocketAddr) -> Option<OwnedSemaphorePermit> {
        use std::sync::atomic::Ordering;
        match self.free.clone().try_acquire_owned() {
            Ok(slot) => {
                self.saturated.store(false, Ordering::Relaxed);
                Some(slot)
            }
            Err(_) => {
                if !self.saturated.swap(true, Ordering::Relaxed) {
                    warn!(
                        max = self.max,
                        "webhook {} cap reached: refusing new connections", self.what
                    );
                }
                debug!(%peer, "webhook connection refused: too many {}s", self.what);
                None
            }
        }
    }
}

fn plain(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Where a request goes, once its method, route and caller were checked.
struct Target {
    cluster_name: mcr_core::ClusterName,
    sub: String,
    handle: Arc<dyn Handle>,
    kind: ReviewKind,
}

/// Checks what a request asks for without its body: its method, its route, its caller.
fn target(
    state: &State,
    req: &Request<Incoming>,
    caller: Option<&str>,
) -> Result<Target, Box<Response<Full<Bytes>>>> {
    let path = req.uri().path().to_owned();
    if req.method() != Method::POST {
        return Err(Box::new(plain(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{path}: webhooks answer POST only\n"),
        )));
    }
    let (cluster_name, sub) = match route::split(&path) {
        Ok((cluster_name, sub)) => (cluster_name, sub.to_owned()),
        Err(why) => return Err(Box::new(plain(StatusCode::NOT_FOUND, format!("{why}\n")))),
    };
    let Some(handle) = state.webhooks.route(&sub) else {
        return Err(Box::new(plain(
            StatusCode::NOT_FOUND,
            format!("no webhook at {path}\n"),
        )));
    };
    let kind = handle.kind();
    if let Some(auth) = &state.options.client_auth
        && let Err(why) = auth.check(&cluster_name, kind, caller)
    {
        debug!(cluster = %cluster_name, path = %sub, "webhook caller refused: {why}");
        return Err(Box::new(plain(
            StatusCode::FORBIDDEN,
            format!("{path}: {why}\n"),
        )));
    }
    Ok(Target {
        cluster_name,
        sub,
        handle,
        kind,
    })
}

/// The answer to a request refused before its body was read.
fn refusal(kind: ReviewKind, refused: &body::Refused) -> Reply {
    match refused {
        body::Refused::TooLarge { .. } => kind.refuse(
            StatusCode::OK,
            None,
            413,
            "RequestEntityTooLarge",
            &refused.to_string(),
        ),
        body::Refused::Busy { .. } => {
            warn!("webhook request refused: {refused}");
            kind.refuse(
                StatusCode::TOO_MANY_REQUESTS,
                None,
                429,
                "TooManyRequests",
                &refused.to_string(),
            )
        }
        body::Refused::Read(_) => kind.refuse(
            StatusCode::OK,
            None,
            400,
            "BadRequest",
            &refused.to_string(),
        ),
    }
}

/// Answers a request that did not fit in the budgets as it arrived, at once and from its head
/// alone, so that nothing of it (its head, its stream's state, a task) is kept waiting for a
/// busy runtime: answered as [`respond`] would.
pub(crate) fn refuse(
    state: &State,
    req: &Request<Incoming>,
    caller: Option<&str>,
    refused: &body::Refused,
) -> Response<Full<Bytes>> {
    let target = match target(state, req, caller) {
        Ok(target) => target,
        Err(response) => return *response,
    };
    if target.handle.needs_cluster()
        && let Err(err) = state.webhooks.fleet().get(&target.cluster_name)
    {
        return reply_response(not_served(target.kind, None, &err));
    }
    reply_response(refusal(target.kind, refused))
}

/// Answers one request; `caller` is the common name of the client's verified certificate,
/// `account` what the request holds in the budgets (taken as it arrived).
pub(crate) async fn respond(
    state: &State,
    req: Request<Incoming>,
    caller: Option<&str>,
    mut account: body::Account,
) -> Response<Full<Bytes>> {
    let Target {
        cluster_name,
        sub,
        handle,
        kind,
    } = match target(state, &req, caller) {
        Ok(target) => target,
        Err(response) => return *response,
    };
    let span = info_span!("webhook", cluster = %cluster_name, path = %sub);
    let options = &state.options;
    let json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    let reply = async {
        let (head, body) = req.into_parts();
        let read = body::read(&head.headers, body, options.max_body_bytes, &mut account)
            .await
            .map(|body| (body, account));
        let cluster = state.webhooks.fleet().get(&cluster_name);
        // A review this replica cannot serve fails (503) whatever its body: it is never
        // answered "denied", which would bypass the webhook's failurePolicy.
        if handle.needs_cluster()
            && let Err(err) = &cluster
        {
            let uid = read.as_ref().ok().and_then(|(body, _)| uid_of(body));
            return not_served(kind, uid, err);
        }
        let (body, held) = match read {
            Ok(read) => read,
            Err(refused) => return refusal(kind, &refused),
        };
        if !json {
            return kind.refuse(
                StatusCode::OK,
                uid_of(&body),
                400,
                "BadRequest",
                "the request's Content-Type is not application/json",
            );
        }
        let call = Call {
            body,
            name: cluster_name.clone(),
            cluster,
            pool: state.converters.clone(),
            anonymous: state.options.client_auth.is_some() && caller.is_none(),
        };
        let answer = AssertUnwindSafe(handle.clone().handle(call))
            .catch_unwind()
            .await;
        drop(held);
        match answer {
            Ok(reply) => reply,
            Err(_) => {
                error!("the webhook handler panicked; answered 500 for this request only");
                kind.refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    None,
                    500,
                    "InternalError",
                    "the webhook handler panicked",
                )
            }
        }
    };
    let reply =
        match tokio::time::timeout(options.handler_timeout, reply.instrument(span.clone())).await {
            Ok(reply) => reply,
            Err(_) => {
                span.in_scope(
                    || warn!(timeout = ?options.handler_timeout, "the webhook handler timed out"),
                );
                kind.refuse(
                    StatusCode::GATEWAY_TIMEOUT,
                    None,
                    504,
                    "Timeout",
                    &format!(
                        "the webhook did not answer within {:?}",
                        options.handler_timeout
                    ),
                )
            }
        };
    reply_response(reply)
}

fn reply_response(reply: Reply) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = reply.status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}
