//! One connection of the [`Server`](crate::Server): the TLS handshake, HTTP/1.1 or HTTP/2 (chosen
//! by the client's first bytes), and the deadlines that close a connection stalled in any
//! phase.
//!
//! hyper bounds an HTTP/1 request head and (with keep-alive pings) a silent HTTP/2 peer, but
//! nothing in it bounds protocol detection, an HTTP/2 header block that never ends, or an idle
//! keep-alive connection. A watchdog here does: it counts the requests the connection handed
//! to the service and closes the connection when none is in flight and
//!
//! - no request arrived within [`header_read_timeout`](crate::ServerOptions::header_read_timeout)
//!   of the handshake (a client silent after TLS, a partial HTTP/1 head, an HTTP/2 preface or
//!   header block never finished), or
//! - the last request ended [`idle_timeout`](crate::ServerOptions::idle_timeout) ago.
//!
//! Closing is graceful first (HTTP/2 GOAWAY, so a client retries on a new connection what it
//! had not sent yet), then forced after [`CLOSE_GRACE`].

use std::{
    collections::VecDeque,
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto,
};
use parking_lot::Mutex;
use tokio::{sync::watch, time::Instant};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::{
    body::{self, Budget, Scope},
    server::{State, respond},
};

/// How long a connection closed for a stall may take to close gracefully before it is
/// dropped.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// HTTP/2: the largest header block of a request (hyper's default, set here so the memory
/// bound does not move with it); kube-apiserver sends well under 1 KiB.
const MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;

/// HTTP/2: the bytes of a stream's body, and of all of a connection's, the client may send
/// before the server has read them. HTTP/2's own default, where hyper's is 1 MiB: it is what
/// a connection can make the server buffer beyond the requests it counts, so it is part of
/// the memory bound, once per connection (a review of 7 MiB still comes in at about
/// 64 KiB per round trip: 130 MB/s at 0.5 ms).
const STREAM_WINDOW_BYTES: u32 = 65_535;
const CONNECTION_WINDOW_BYTES: u32 = 65_535;

/// HTTP/2: streams reset by the client, or by the server for a protocol error, kept at once
/// before the connection is closed (hyper's defaults are 20 and 1024).
const MAX_PENDING_RESETS: usize = 64;

/// The requests of one connection, as the watchdog sees them.
#[derive(Clone, Copy, Debug)]
struct Activity {
    /// Requests handed to the service and not answered yet.
    in_flight: usize,
    /// Requests handed to the service so far.
    requests: u64,
    /// When `in_flight` last changed (or the handshake ended).
    since: Instant,
}

/// A request in flight: counted from the service call to its answer (or its drop).
struct InFlight(Arc<watch::Sender<Activity>>);

impl InFlight {
    fn start(activity: Arc<watch::Sender<Activity>>) -> InFlight {
        activity.send_modify(|a| {
            a.in_flight += 1;
            a.requests += 1;
            a.since = Instant::now();
        });
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|a| {
            a.in_flight = a.in_flight.saturating_sub(1);
            a.since = Instant::now();
        });
    }
}

/// Why the watchdog closes a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stall {
    /// No complete request within the header deadline of the handshake.
    NoRequest,
    /// No request for the idle timeout since the last one.
    Idle,
}

/// Resolves when the connection has stalled; never while a request is in flight.
async fn stalled(
    mut activity: watch::Receiver<Activity>,
    header_read_timeout: Duration,
    idle_timeout: Duration,
) -> Stall {
    loop {
        let a = *activity.borrow_and_update();
        let deadline = match (a.in_flight, a.requests) {
            (0, 0) => Some((a.since + header_read_timeout, Stall::NoRequest)),
            (0, _) => Some((a.since + idle_timeout, Stall::Idle)),
            _ => None,
        };
        let changed = async {
            if activity.changed().await.is_err() {
                // The service is gone, so is the connection: the caller's select ends first.
                std::future::pending::<()>().await;
            }
        };
        match deadline {
            None => changed.await,
            Some((at, why)) => tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(at) => return why,
            },
        }
    }
}

/// The TLS handshakes in progress, oldest first, at most `max`: past it, the oldest is cut to
/// make room for the newest. A caller that opens connections and never completes a handshake
/// then holds no slot for long: to keep another caller's handshake (a few milliseconds) from
/// completing, it would have to open `max` connections in that time.
pub(crate) struct Handshakes {
    max: usize,
    open: Mutex<VecDeque<(u64, CancellationToken)>>,
    next: AtomicU64,
    /// Whether the last admission cut a handshake (to warn once per episode).
    cutting: AtomicBool,
}

/// One handshake in progress; `cut` fires when a newer one needs its slot.
pub(crate) struct Handshake {
    id: u64,
    cut: CancellationToken,
    of: Arc<Handshakes>,
}

impl Handshakes {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: Mutex::new(VecDeque::new()),
            next: AtomicU64::new(0),
            cutting: AtomicBool::new(false),
        })
    }

    /// A slot for a new handshake, cutting the oldest one in progress if every slot is taken.
    pub(crate) fn admit(self: &Arc<Self>) -> Handshake {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let cut = CancellationToken::new();
        let mut open = self.open.lock();
        if open.len() >= self.max {
            if let Some((_, oldest)) = open.pop_front() {
                oldest.cancel();
            }
            if !self.cutting.swap(true, Ordering::Relaxed) {
                warn!(
                    max = self.max,
                    "webhook TLS handshakes in progress at their cap: cutting the oldest for each new connection"
                );
            }
        } else {
            self.cutting.store(false, Ordering::Relaxed);
        }
        open.push_back((id, cut.clone()));
        Handshake {
            id,
            cut,
            of: self.clone(),
        }
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        let mut open = self.of.open.lock();
        if let Some(i) = open.iter().position(|(id, _)| *id == self.id) {
            open.remove(i);
        }
    }
}

/// Serves one accepted TCP connection until it ends, stalls, or `token` fires: the TLS
/// handshake in `handshake`'s slot, then the connection in a slot of the established ones.
pub(crate) async fn serve(
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    handshake: Handshake,
    state: Arc<State>,
    token: CancellationToken,
) {
    let options = state.options.clone();
    let accepted = tokio::select! {
        accepted = tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)) => accepted,
        () = handshake.cut.cancelled() => {
            debug!(%peer, "webhook TLS handshake cut: newer connections needed its slot");
            return;
        }
    };
    let tls = match accepted {
        Ok(Ok(tls)) => tls,
        Ok(Err(err)) => {
            debug!(%peer, error = %err, "webhook TLS handshake failed");
            return;
        }
        Err(_) => {
            debug!(%peer, "webhook TLS handshake timed out");
            return;
        }
    };
    drop(handshake);
    // Established (and, with client authentication, its certificate verified): only now
    // does it take one of the connections' slots.
    let Some(_slot) = state.connections.take(&peer) else {
        return;
    };
    let budget = Budget::new(options.max_connection_request_bytes, Scope::Connection);
    // The caller, when the server authenticates callers (the certificate was verified in the
    // handshake).
    let caller: Option<Arc<str>> = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(crate::auth::common_name)
        .map(Arc::from);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(options.http2_keep_alive_interval)
        .keep_alive_timeout(options.http2_keep_alive_timeout)
        .max_concurrent_streams(options.max_concurrent_streams)
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
        .max_local_error_reset_streams(Some(MAX_PENDING_RESETS));
    let (activity, watched) = watch::channel(Activity {
        in_flight: 0,
        requests: 0,
        since: Instant::now(),
    });
    let activity = Arc::new(activity);
    let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let (state, caller) = (state.clone(), caller.clone());
        let in_flight = InFlight::start(activity.clone());
        // Counted as it arrives, before its task runs.
        let account = body::admit(req.uri(), req.headers(), &budget, &state.requests);
        async move {
            let response = respond(&state, req, caller.as_deref(), account).await;
            drop(in_flight);
            Ok::<_, Infallible>(response)
        }
    });
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::pin!(conn);
    let grace = tokio::select! {
        result = conn.as_mut() => {
            if let Err(err) = result {
                debug!(%peer, error = %err, "webhook connection ended");
            }
            return;
        }
        why = stalled(watched, options.header_read_timeout, options.idle_timeout) => {
            debug!(%peer, reason = ?why, "closing a stalled webhook connection");
            CLOSE_GRACE
        }
        () = token.cancelled() => options.shutdown_grace,
    };
    conn.as_mut().graceful_shutdown();
    if tokio::time::timeout(grace, conn).await.is_err() {
        debug!(%peer, "the webhook connection did not close in time: dropped");
    }
}
