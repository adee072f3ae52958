//! The wire: every request a replica sends waits here until the simulator's next step
//! boundary, where the network ([`crate::net`]) delivers it to the emulated API server, answers
//! it with a fault, or holds it.
//!
//! Requests reach a server only at step boundaries, between the replicas' drives, so no
//! replica sees another's write before the step in which it was made has ended: what one
//! replica does at virtual time `t` is seen by the others at `t` or later (causality), and a
//! request's round trip costs at least until the next boundary (network latency).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::clock::{Clock, Ms};

/// Errors carried by the simulated network.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body as a replica receives it.
pub(crate) type SimBody = UnsyncBoxBody<Bytes, BoxError>;

/// What the network hands back for one request: the response and the latency it takes on its
/// way back, or the reason the connection failed.
pub(crate) type Delivery = Result<(Response<SimBody>, Ms), String>;

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Target {
    /// The host cluster (peer Leases; namespaces, and their members' objects, with the
    /// namespace provider).
    Host,
    /// Member cluster `n` of the clusters provider (and the cluster engaged by hand).
    Member(u8),
}

impl Target {
    /// The path of the network this target is reached over.
    pub(crate) fn path(self) -> Path {
        match self {
            Target::Host => Path::Host,
            Target::Member(_) => Path::Members,
        }
    }
}

/// A replica's two network paths, each with its own faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Path {
    /// To the host cluster.
    Host,
    /// To the member clusters.
    Members,
}

/// Who sent a request: a replica's identity (its index) and which of its processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Sender {
    /// The replica's index (`r1` is 1).
    pub(crate) replica: u8,
    /// Its process: 1 for the first start, one more for every restart.
    pub(crate) incarnation: u32,
}

impl std::fmt::Display for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "r{}#{}", self.replica, self.incarnation)
    }
}

/// A request on the wire.
pub(crate) struct Pending {
    /// The order in which requests were sent (ties in the boundary's order).
    pub(crate) seq: u64,
    pub(crate) from: Sender,
    pub(crate) target: Target,
    /// When it was sent.
    pub(crate) issued: Ms,
    /// When it reaches the server (sent plus the path's latency), once the network decided.
    pub(crate) ready_at: Option<Ms>,
    /// Held by a partition that hangs.
    pub(crate) held: bool,
    pub(crate) req: Request<kube::client::Body>,
    pub(crate) tx: oneshot::Sender<Delivery>,
}

/// The requests in flight.
#[derive(Default)]
pub(crate) struct Wire {
    queue: Mutex<Vec<Pending>>,
    seq: AtomicU64,
}

impl Wire {
    /// Every request in flight, taken off the wire.
    pub(crate) fn take(&self) -> Vec<Pending> {
        std::mem::take(&mut *self.queue.lock())
    }

    /// Puts back requests not delivered yet.
    pub(crate) fn put_back(&self, mut pending: Vec<Pending>) {
        let mut queue = self.queue.lock();
        pending.append(&mut queue);
        *queue = pending;
    }

    fn send(
        &self,
        from: Sender,
        target: Target,
        issued: Ms,
        req: Request<kube::client::Body>,
    ) -> oneshot::Receiver<Delivery> {
        let (tx, rx) = oneshot::channel();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.queue.lock().push(Pending {
            seq,
            from,
            target,
            issued,
            ready_at: None,
            held: false,
            req,
            tx,
        });
        rx
    }
}

/// One replica process's connection to one target: a `tower::Service` that puts each request
/// on the wire and waits for the network's answer (then the latency of the way back).
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) wire: Arc<Wire>,
    pub(crate) from: Sender,
    pub(crate) target: Target,
    pub(crate) clock: Clock,
    /// The simulator's time, for a request sent from outside the runtime.
    pub(crate) now: Arc<AtomicU64>,
}

impl Endpoint {
    /// A kube client over this endpoint (built inside the replica's runtime: the client's
    /// buffer task runs there, and dies with it).
    pub(crate) fn client(self) -> kube::Client {
        kube::Client::new(self, "default")
    }
}

impl tower::Service<Request<kube::client::Body>> for Endpoint {
    type Response = Response<SimBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<SimBody>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let issued = self.clock.now_or(self.now.load(Ordering::Relaxed));
        let rx = self.wire.send(self.from, self.target, issued, req);
        Box::pin(async move {
            match rx.await {
                Ok(Ok((response, latency))) => {
                    if latency > 0 {
                        tokio::time::sleep(std::time::Duration::from_millis(latency)).await;
                    }
                    Ok(response)
                }
                Ok(Err(reason)) => Err(reason.into()),
                Err(_) => Err("connection reset (mcr-sim)".into()),
            }
        })
    }
}
