//! The HTTPS transport: hyper 1 (HTTP/1.1 and HTTP/2) over tokio-rustls on 127.0.0.1.
//!
//! A cluster either owns its port ([`HttpsServer`]), which can be closed and re-opened on the
//! same port synchronously (stop/restart, `Partition::Refuse`/heal, see [`crate::gate`]), or
//! shares one port with many clusters ([`crate::shared_port`]), each told apart by the path
//! prefix of its kubeconfig's server URL.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, Response, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::engine::ApiError;
use crate::gate::Gate;
use crate::server::{self, Body, Shared, response};
use crate::x509::ClientCa;

/// What authenticates a request: the cluster's bearer token or a client certificate signed by
/// its CA (checked on every request, see [`crate::x509`]).
#[derive(Clone)]
pub(crate) struct Auth {
    pub(crate) token: Arc<str>,
    pub(crate) client_ca: Arc<ClientCa>,
}

type PeerChain = Option<Arc<[CertificateDer<'static>]>>;

/// One cluster's HTTPS endpoint.
pub(crate) struct HttpsServer {
    shared: Arc<Shared>,
    acceptor: TlsAcceptor,
    auth: Auth,
    gate: Gate,
}

/// Where a connection's requests go.
#[derive(Clone)]
pub(crate) enum Target {
    /// The one cluster that owns the port.
    One { shared: Arc<Shared>, auth: Auth },
    /// The clusters of a shared port, by path prefix.
    Routed(Arc<crate::shared_port::Routes>),
}

impl Target {
    fn label(&self) -> &str {
        match self {
            Target::One { shared, .. } => &shared.name,
            Target::Routed(_) => "shared port",
        }
    }
}

impl HttpsServer {
    /// Binds 127.0.0.1 on a random port and starts serving.
    pub(crate) fn start(
        shared: Arc<Shared>,
        acceptor: TlsAcceptor,
        auth: Auth,
    ) -> io::Result<Self> {
        let gate = Gate::reserve_loopback(&shared.name)?;
        let server = Self {
            shared,
            acceptor,
            auth,
            gate,
        };
        server.bind()?;
        Ok(server)
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.gate.addr()
    }

    /// Opens the listener again on the same port (no-op if open).
    pub(crate) fn bind(&self) -> io::Result<()> {
        let target = Target::One {
            shared: self.shared.clone(),
            auth: self.auth.clone(),
        };
        open(&self.gate, self.acceptor.clone(), target)
    }

    /// Closes the listener now and cuts every open connection (the port stays reserved).
    pub(crate) fn unbind(&self) {
        self.gate.close();
    }
}

/// Opens `gate` (a no-op when open), serving every connection it accepts for `target`.
pub(crate) fn open(gate: &Gate, acceptor: TlsAcceptor, target: Target) -> io::Result<()> {
    gate.open(move |stream, cancel| {
        // As a real API server (Go sets TCP_NODELAY by default): small watch events and
        // answers go out at once instead of waiting on Nagle + delayed ACK (~40 ms).
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(cluster = %target.label(), %err, "could not set TCP_NODELAY");
        }
        tokio::spawn(connection(stream, acceptor.clone(), target.clone(), cancel));
    })
}

async fn connection(
    stream: TcpStream,
    acceptor: TlsAcceptor,
    target: Target,
    cancel: CancellationToken,
) {
    let tls = tokio::select! {
        _ = cancel.cancelled() => return,
        tls = acceptor.accept(stream) => match tls {
            Ok(tls) => tls,
            Err(err) => {
                tracing::debug!(cluster = %target.label(), %err, "TLS handshake failed");
                return;
            }
        },
    };
    let peer: PeerChain = tls.get_ref().1.peer_certificates().map(|chain| {
        chain
            .iter()
            .map(|c| c.clone().into_owned())
            .collect::<Vec<_>>()
            .into()
    });
    let service = hyper::service::service_fn(move |req| serve(target.clone(), peer.clone(), req));
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        _ = cancel.cancelled() => {}
        result = conn => {
            if let Err(err) = result {
                tracing::debug!(%err, "connection ended with an error");
            }
        }
    }
}

/// Compares without an early exit, so the token's prefix cannot be probed by timing.
fn token_matches(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Who a request is, as a real API server with anonymous auth on sees it.
#[derive(Debug, PartialEq, Eq)]
enum Caller {
    /// The cluster's bearer token.
    Admin,
    /// No credential at all: `system:anonymous`.
    Anonymous,
    /// A credential that is not the token: 401.
    Invalid,
}

/// As kube-apiserver's authenticator chain: a client certificate signed by the cluster's CA
/// and valid now (checked on every request) authenticates first; otherwise the bearer token.
/// A presented certificate that fails verification (expired, other CA) is a 401.
fn caller(req: &Request<Incoming>, auth: &Auth, peer: &PeerChain) -> Caller {
    if let Some(chain) = peer.as_deref() {
        if auth.client_ca.verify(chain) {
            return Caller::Admin;
        }
        if req.headers().get(header::AUTHORIZATION).is_none() {
            return Caller::Invalid;
        }
    }
    match req.headers().get(header::AUTHORIZATION) {
        None => Caller::Anonymous,
        Some(value) => match value.as_bytes().strip_prefix(b"Bearer ") {
            Some(given) if token_matches(given, auth.token.as_bytes()) => Caller::Admin,
            // A service-account token a TokenRequest issued (the emulator authorizes
            // everything, so it acts as the admin).
            Some(given) if crate::engine::issued_token_is_valid(given) => Caller::Admin,
            _ => Caller::Invalid,
        },
    }
}

/// What RBAC's `system:public-info-viewer` lets `system:anonymous` read.
fn public_info(method: &http::Method, path: &str) -> bool {
    method == http::Method::GET
        && ["/version", "/healthz", "/livez", "/readyz"]
            .iter()
            .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// The 403 a real API server gives `system:anonymous` (worded as for a non-resource path).
fn anonymous_forbidden(req: &Request<Incoming>) -> ApiError {
    let verb = req.method().as_str().to_ascii_lowercase();
    ApiError::forbidden(format!(
        "forbidden: User \"system:anonymous\" cannot {verb} path \"{}\"",
        req.uri().path()
    ))
}

async fn serve(
    target: Target,
    peer: PeerChain,
    req: Request<Incoming>,
) -> Result<Response<Body>, io::Error> {
    let (shared, auth, req) = match target {
        Target::One { shared, auth } => (shared, auth, req),
        Target::Routed(routes) => match routes.resolve(req) {
            Some(routed) => routed,
            None => return Ok(response::error(&ApiError::path_not_found())),
        },
    };
    if shared.faults.admit().await.is_err() {
        // Failing the service makes hyper drop the connection, as a dead server would.
        return Err(io::Error::from(io::ErrorKind::ConnectionRefused));
    }
    match caller(&req, &auth, &peer) {
        Caller::Admin => {}
        Caller::Invalid => {
            shared.counters.record("unauthorized", "requests");
            tracing::debug!(cluster = %shared.name, "rejected a request with a wrong credential");
            return Ok(response::error(&ApiError::unauthorized()));
        }
        Caller::Anonymous if public_info(req.method(), req.uri().path()) => {}
        Caller::Anonymous => {
            tracing::debug!(cluster = %shared.name, "refused an anonymous request");
            return Ok(response::error(&anonymous_forbidden(&req)));
        }
    }
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await.map_err(io::Error::other)?.to_bytes();
    Ok(server::handle(&shared, Request::from_parts(parts, bytes)).await)
}

#[cfg(test)]
mod tests {
    use super::{public_info, token_matches};

    #[test]
    fn token_comparison() {
        assert!(token_matches(b"abc", b"abc"));
        assert!(!token_matches(b"abd", b"abc"));
        assert!(!token_matches(b"ab", b"abc"));
        assert!(!token_matches(b"", b"abc"));
    }

    #[test]
    fn anonymous_may_read_public_info_only() {
        let get = http::Method::GET;
        assert!(public_info(&get, "/version"));
        assert!(public_info(&get, "/readyz/etcd"));
        assert!(!public_info(&get, "/versions"));
        assert!(!public_info(&get, "/api"));
        assert!(!public_info(&http::Method::POST, "/healthz"));
    }
}
