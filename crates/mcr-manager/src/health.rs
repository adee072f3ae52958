//! The manager's HTTP endpoint: `/metrics`, `/healthz`, `/readyz`, `/clusters`, and the
//! user's own checks and handlers ([`Endpoints`]).

use std::{collections::HashMap, convert::Infallible, fmt::Display, sync::Arc, time::Duration};

use futures::future::{BoxFuture, join_all};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{net::TcpListener, sync::Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::Manager;

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    res
}

/// One line of `/clusters`: `<name> synced|unsynced` (`<host>` for the host cluster; control
/// characters and `\` escaped, so no name can start a line of its own), then for credentials
/// renewed in place `credentials=valid|expiring|expired`, `expires_in=<s>s` or
/// `expired_for=<s>s`, and while renewal fails `renewal_failures=<n> last_error="<reason>"`
/// (the redacted reason, never credentials); for a member the provider or a runnable reports
/// pending or failed `member=pending|failed`, and when failed `retry_in=<s>s` (if it is retried) and
/// `reason="<reason>"`; in sharded mode `owner=<replica>` (and `member=elsewhere` for a
/// member another replica owns).
fn cluster_line(s: &crate::ClusterStatus) -> String {
    let sync = if s.synced { "synced" } else { "unsynced" };
    let mut line = escaped(s.name.as_str());
    line.push(' ');
    line.push_str(sync);
    if let (Some(c), Some(state)) = (&s.credentials, s.credential_state()) {
        line.push_str(" credentials=");
        line.push_str(state);
        if let Some(at) = c.expires_at {
            let now = std::time::SystemTime::now();
            match at.duration_since(now) {
                Ok(left) => line.push_str(&format!(" expires_in={}s", left.as_secs())),
                Err(e) => line.push_str(&format!(" expired_for={}s", e.duration().as_secs())),
            }
        }
        if c.is_renewal_failing() {
            line.push_str(&format!(" renewal_failures={}", c.consecutive_failures));
            if let Some(err) = &c.last_error {
                line.push_str(&format!(" last_error={err:?}"));
            }
        }
    }
    if let Some(owner) = &s.owner {
        line.push_str(" owner=");
        line.push_str(&escaped(owner));
    }
    if let Some(member) = &s.member {
        line.push_str(" member=");
        line.push_str(member.as_str());
        if let mcr_core::MemberState::Failed { reason, retry_in } = member {
            if let Some(retry_in) = retry_in {
                line.push_str(&format!(" retry_in={}s", retry_in.as_secs()));
            }
            line.push_str(&format!(" reason={reason:?}"));
        }
    }
    line.push('\n');
    line
}

/// `name` with control characters and `\` escaped (`\n`, `\u{1b}`, `\\`); other text,
/// non-ASCII included, as is. Member names cannot hold control characters
/// ([`ClusterName::member_name_error`](mcr_core::ClusterName::member_name_error)), but a
/// provider may report one it refused.
fn escaped(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_control() || c == '\\' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The paths the manager serves itself; [`Endpoints::handler`] cannot take them.
const RESERVED: [&str; 5] = ["/metrics", "/clusters", "/healthz", "/livez", "/readyz"];

/// A named check: `Ok` or the reason it failed.
type CheckFn = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// A user handler: the request head in, the response out.
type HandlerFn =
    Arc<dyn Fn(http::request::Parts) -> BoxFuture<'static, Response<String>> + Send + Sync>;

/// The user's own health and readiness checks and extra HTTP handlers, served next to the
/// manager's (set through [`ManagerBuilder::health_check`](crate::ManagerBuilder::health_check),
/// [`ready_check`](crate::ManagerBuilder::ready_check) and
/// [`http_handler`](crate::ManagerBuilder::http_handler)).
#[derive(Clone, Default)]
pub(crate) struct Endpoints {
    health: Vec<(String, CheckFn)>,
    ready: Vec<(String, CheckFn)>,
    handlers: HashMap<String, HandlerFn>,
}

impl Endpoints {
    /// Wraps a user check.
    fn check<F, Fut, E>(check: F) -> CheckFn
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        Arc::new(move || {
            let fut = check();
            Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
        })
    }

    pub(crate) fn add_health<F, Fut, E>(&mut self, name: String, check: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        self.health.push((name, Self::check(check)));
    }

    pub(crate) fn add_ready<F, Fut, E>(&mut self, name: String, check: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        self.ready.push((name, Self::check(check)));
    }

    /// Adds a handler for `path`; refuses (logged) the manager's own paths.
    pub(crate) fn handler<F, Fut>(&mut self, path: String, handler: F)
    where
        F: Fn(http::request::Parts) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response<String>> + Send + 'static,
    {
        if RESERVED.contains(&path.as_str()) {
            tracing::error!(path = %path, "http_handler: the manager serves this path itself; handler ignored");
            return;
        }
        self.handlers
            .insert(path, Arc::new(move |parts| Box::pin(handler(parts))));
    }
}

/// Runs `checks` at once, each bounded by `timeout`; the names and reasons of those that
/// failed (empty: all passed).
async fn failing(checks: &[(String, CheckFn)], timeout: Duration) -> Vec<String> {
    let runs = checks.iter().map(|(name, check)| async move {
        match tokio::time::timeout(timeout, check()).await {
            Ok(Ok(())) => None,
            Ok(Err(reason)) => Some(format!("check {name:?} failed: {reason}")),
            Err(_) => Some(format!("check {name:?} did not answer within {timeout:?}")),
        }
    });
    join_all(runs).await.into_iter().flatten().collect()
}

/// `ok`, or 503 naming every failing check.
fn verdict(failures: Vec<String>, what: &str) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if failures.is_empty() {
        return respond(StatusCode::OK, TEXT, "ok\n".to_owned());
    }
    let mut body = format!("not {what}:\n");
    for f in failures {
        body.push_str(&f);
        body.push('\n');
    }
    respond(StatusCode::SERVICE_UNAVAILABLE, TEXT, body)
}

/// Answers one request.
pub(crate) async fn route(mgr: &Manager, parts: http::request::Parts) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    let endpoints = mgr.endpoints();
    let timeout = mgr.http_options().check_timeout;
    let path = parts.uri.path().to_owned();
    if let Some(handler) = endpoints.handlers.get(&path) {
        let (head, body) = handler(parts).await.into_parts();
        return Response::from_parts(head, Full::new(Bytes::from(body)));
    }
    match path.as_str() {
        "/metrics" => {
            mgr.refresh_sync_metrics();
            respond(
                StatusCode::OK,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                mgr.metrics().encode(),
            )
        }
        "/clusters" => {
            let body: String = mgr.cluster_statuses().iter().map(cluster_line).collect();
            respond(StatusCode::OK, TEXT, body)
        }
        "/healthz" | "/livez" => verdict(failing(&endpoints.health, timeout).await, "healthy"),
        "/readyz" => {
            let mut failures = Vec::new();
            if !mgr.is_ready() {
                failures.push("host cache not synced or provider not started".to_owned());
            }
            failures.extend(failing(&endpoints.ready, timeout).await);
            verdict(failures, "ready")
        }
        _ => respond(StatusCode::NOT_FOUND, TEXT, "not found\n".to_owned()),
    }
}

/// Limits of the `/metrics`, `/healthz`, `/readyz` server (see
/// [`ManagerBuilder::http_options`](crate::ManagerBuilder::http_options)).
///
/// The server speaks HTTP/1.1. A client must send a complete request head within
/// `header_read_timeout` (this also closes idle keep-alive connections); at most
/// `max_connections` connections are served at once, further ones wait in the listen backlog
/// until a slot frees; a connection is closed gracefully after `max_connection_age`.
///
/// ```
/// use std::time::Duration;
/// let opts = mcr_manager::HttpOptions::default().header_read_timeout(Duration::from_secs(5));
/// assert_eq!(opts.max_connections, 64);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Time allowed to send a request head (default 10 s).
    pub header_read_timeout: Duration,
    /// Connections served at once (default 64, at least 1).
    pub max_connections: usize,
    /// Age after which a connection is closed once its current response is sent (default 5 min).
    pub max_connection_age: Duration,
    /// How long each user health or readiness check may take before it counts as failed
    /// (default 5 s).
    pub check_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 64,
            max_connection_age: Duration::from_secs(300),
            check_timeout: Duration::from_secs(5),
        }
    }
}

impl HttpOptions {
    /// Sets [`header_read_timeout`](Self::header_read_timeout).
    ///
    /// ```
    /// let o = mcr_manager::HttpOptions::default().header_read_timeout(std::time::Duration::from_secs(2));
    /// assert_eq!(o.header_read_timeout.as_secs(), 2);
    /// ```
    #[must_use]
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Sets [`max_connections`](Self::max_connections) (0 counts as 1).
    ///
    /// ```
    /// let o = mcr_manager::HttpOptions::default().max_connections(8);
    /// assert_eq!(o.max_connections, 8);
    /// ```
    #[must_use]
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// Sets [`max_connection_age`](Self::max_connection_age).
    ///
    /// ```
    /// let o = mcr_manager::HttpOptions::default().max_connection_age(std::time::Duration::from_secs(60));
    /// assert_eq!(o.max_connection_age.as_secs(), 60);
    /// ```
    #[must_use]
    pub fn max_connection_age(mut self, age: Duration) -> Self {
        self.max_connection_age = age;
        self
    }

    /// Sets [`check_timeout`](Self::check_timeout).
    ///
    /// ```
    /// let o = mcr_manager::HttpOptions::default().check_timeout(std::time::Duration::from_secs(1));
    /// assert_eq!(o.check_timeout.as_secs(), 1);
    /// ```
    #[must_use]
    pub fn check_timeout(mut self, timeout: Duration) -> Self {
        self.check_timeout = timeout;
        self
    }
}

/// Time a connection past its age gets to finish its response before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Serves until `token` fires.
pub(crate) async fn serve(
    listener: TcpListener,
    mgr: Manager,
    opts: HttpOptions,
    token: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    loop {
        // Take a slot before accepting: connections beyond the cap wait in the backlog.
        let permit = tokio::select! {
            () = token.cancelled() => return,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, peer) = tokio::select! {
            () = token.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(err) => {
                    // e.g. out of file descriptors: back off instead of spinning
                    warn!(error = %err, "metrics endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let mgr = mgr.clone();
        let token = token.clone();
        let opts = opts.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = service_fn(move |req: Request<Incoming>| {
                let mgr = mgr.clone();
                let (parts, _body) = req.into_parts();
                async move { Ok::<_, Infallible>(route(&mgr, parts).await) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(opts.header_read_timeout)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            let age = tokio::time::sleep(opts.max_connection_age);
            tokio::pin!(age);
            let mut closing = false;
            loop {
                tokio::select! {
                    res = conn.as_mut() => {
                        if let Err(err) = res {
                            debug!(%peer, error = %err, "metrics endpoint: connection ended");
                        }
                        return;
                    }
                    () = &mut age => {
                        if closing {
                            debug!(%peer, "metrics endpoint: connection dropped");
                            return;
                        }
                        closing = true;
                        conn.as_mut().graceful_shutdown();
                        age.as_mut().reset(tokio::time::Instant::now() + CLOSE_GRACE);
                    }
                    () = token.cancelled() => return,
                }
            }
        });
    }
}
