//! The network between the replicas and the emulated API servers: each replica's two paths
//! (to the host, to the members) with their faults, and the exchange that, at every step
//! boundary, delivers what is on the [wire](crate::wire) to the servers.
//!
//! Faults of a path (set by the fault plan, [`Faults`]): a partition that hangs (requests are
//! held: when it heals, each either arrives late or its connection is reset, even when the
//! client gave up on it) or refuses (connection refused, open watches cut); errors (a share of
//! requests answered 500, 503 or 429, timed out with no answer, or executed with the answer
//! lost); latency (each way, up to a bound); stale lists (a list that may be served from the
//! watch cache, `resourceVersion=0`, is served at the version of the previous such list:
//! an older snapshot); and the watch faults of [`crate::tap`]. Requests whose client is gone
//! (it timed out, or its process was killed) may still land: a write already sent is
//! executed with even odds. Requests that reach the servers at one boundary do so in an order
//! drawn from the seed.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tokio::sync::{oneshot, watch};

use crate::clock::Ms;
use crate::trace::Trace;
use crate::wire::{BoxError, Delivery, Path, Pending, SimBody, Target, Wire};

/// The run's trace, locked only while a line is added.
type TraceLock = parking_lot::Mutex<Trace>;

/// A partition of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partition {
    /// Requests and watches hang.
    Hang,
    /// Connections are refused and open ones cut.
    Refuse,
}

/// The faults of open watches on a path (per mille of events, or milliseconds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchFaults {
    /// Watches of this resource (plural; `"*"`: every watch) stop delivering, and close when
    /// the fault ends.
    pub hang: Option<&'static str>,
    /// Each event is delivered up to this late.
    pub delay: Ms,
    /// The connection drops with the event in flight.
    pub cut: u32,
    /// An event is delivered twice, or again after a newer one of its object.
    pub dup: u32,
    /// An event swaps places with the next one of another object.
    pub reorder: u32,
}

impl WatchFaults {
    /// Whether watches of `resource` hang.
    pub(crate) fn hangs(&self, resource: &str) -> bool {
        self.hang.is_some_and(|r| r == "*" || r == resource)
    }
}

/// The faults of one path now.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Faults {
    pub(crate) partition: Option<Partition>,
    /// Per mille of requests answered with an error (or a timeout, or a lost answer).
    pub(crate) errors: u32,
    /// Up to this much latency each way.
    pub(crate) latency: Ms,
    /// Lists that may be stale are served from an older snapshot.
    pub(crate) stale_lists: bool,
    pub(crate) watch: WatchFaults,
}

impl Faults {
    /// Whether the path is down or erroring (the replica counts as disrupted).
    pub(crate) fn disrupts(&self) -> bool {
        self.partition.is_some() || self.errors > 0
    }

    /// Whether any fault is on.
    pub(crate) fn any(&self) -> bool {
        *self != Faults::default()
    }
}

/// The network of one run.
pub(crate) struct Net {
    pub(crate) wire: std::sync::Arc<Wire>,
    /// The servers, reached in-process (built on the world's runtime).
    servers: BTreeMap<Target, kube::Client>,
    paths: BTreeMap<(u8, Path), watch::Sender<Faults>>,
    rng: fastrand::Rng,
    /// The version of the last list of each (server, collection) on a path with stale lists.
    listed: BTreeMap<(Target, String), String>,
    /// Requests timed out: never answered, kept until their client gives up.
    blackhole: Vec<oneshot::Sender<Delivery>>,
    /// Leases deleted (or taken out of the group) since the world last asked.
    gone: Vec<(String, Ms)>,
}

/// Whether a request only reads.
fn is_read(req: &Request<kube::client::Body>) -> bool {
    req.method() == Method::GET
}

/// The resource (plural) a request's path names: the segment after the version, or after the
/// namespace.
fn resource(path: &str) -> &str {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match parts.first() {
        Some(&"api") => &parts[parts.len().min(2)..],
        Some(&"apis") => &parts[parts.len().min(3)..],
        _ => return "",
    };
    match rest {
        ["namespaces", _, resource, ..] => resource,
        [resource, ..] => resource,
        [] => "",
    }
}

/// A `v1 Status` error answer.
fn status(code: u16, reason: &str) -> Response<SimBody> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("injected by mcr-sim: {reason}"), "reason": reason, "code": code,
    });
    let mut response = Response::new(full(Bytes::from(body.to_string())));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if code == 429 {
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    response
}

fn full(bytes: Bytes) -> SimBody {
    Full::new(bytes)
        .map_err(|e| -> BoxError { match e {} })
        .boxed_unsync()
}

/// `query` with a stale-list read at `rv` instead of "any version".
fn at_version(query: &str, rv: &str) -> String {
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| {
            !p.is_empty()
                && !p.starts_with("resourceVersion=")
                && !p.starts_with("resourceVersionMatch=")
        })
        .collect();
    let mut q = kept.join("&");
    if !q.is_empty() {
        q.push('&');
    }
    q.push_str(&format!("resourceVersion={rv}&resourceVersionMatch=Exact"));
    q
}

/// The `metadata.resourceVersion` of a list response.
fn list_version(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct List {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion")]
        resource_version: Option<String>,
    }
    serde_json::from_slice::<List>(body)
        .ok()?
        .metadata
        .resource_version
}

/// What a Lease write carries, for the trace: holder and claim.
fn lease_write(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Lease {
        #[serde(default)]
        metadata: Meta,
        #[serde(default)]
        spec: Spec,
    }
    #[derive(serde::Deserialize, Default)]
    struct Meta {
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    }
    #[derive(serde::Deserialize, Default)]
    struct Spec {
        #[serde(rename = "holderIdentity")]
        holder: Option<String>,
    }
    let lease: Lease = serde_json::from_slice(body).ok()?;
    let a = &lease.metadata.annotations;
    let claim = a
        .get("mcr.sigs.k8s.io/shard-claim")
        .map_or("-", String::as_str);
    let left = if a.contains_key("mcr.sigs.k8s.io/shard-left") {
        " left"
    } else {
        ""
    };
    let holder = lease.spec.holder.as_deref().unwrap_or("-");
    Some(format!("holder={holder} claim=[{claim}]{left}"))
}

impl Net {
    /// A network to `servers` with no fault, its choices drawn from `seed`.
    pub(crate) fn new(servers: BTreeMap<Target, kube::Client>, seed: u64) -> Net {
        Net {
            wire: Default::default(),
            servers,
            paths: BTreeMap::new(),
            rng: fastrand::Rng::with_seed(seed),
            listed: BTreeMap::new(),
            blackhole: Vec::new(),
            gone: Vec::new(),
        }
    }

    fn path(&mut self, replica: u8, path: Path) -> &watch::Sender<Faults> {
        self.paths
            .entry((replica, path))
            .or_insert_with(|| watch::channel(Faults::default()).0)
    }

    /// The faults of a path now.
    pub(crate) fn faults(&mut self, replica: u8, path: Path) -> Faults {
        self.path(replica, path).borrow().clone()
    }

    /// Changes the faults of a path (open watches see it at once).
    pub(crate) fn set(&mut self, replica: u8, path: Path, change: impl FnOnce(&mut Faults)) {
        self.path(replica, path).send_modify(change);
    }

    /// Lease `name` was deleted, or relabelled out of the group, at `at`.
    pub(crate) fn lease_gone(&mut self, name: String, at: Ms) {
        self.gone.push((name, at));
    }

    /// The Leases gone since the last call.
    pub(crate) fn leases_gone(&mut self) -> Vec<(String, Ms)> {
        std::mem::take(&mut self.gone)
    }

    /// Every path back to no fault.
    pub(crate) fn heal_all(&mut self) {
        for path in self.paths.values() {
            path.send_if_modified(|f| {
                let had = f.any();
                *f = Faults::default();
                had
            });
        }
    }

    /// Delivers what is due on the wire at `now` (run on the world's runtime).
    pub(crate) async fn exchange(&mut self, now: Ms, trace: &TraceLock) {
        self.blackhole.retain(|tx| !tx.is_closed());
        let mut ready = Vec::new();
        let mut keep = Vec::new();
        for mut p in self.wire.take() {
            let faults = self.faults(p.from.replica, p.target.path());
            let ready_at = *p
                .ready_at
                .get_or_insert_with(|| p.issued + self.rng.u64(0..=faults.latency));
            if ready_at > now {
                keep.push(p);
                continue;
            }
            match faults.partition {
                Some(Partition::Hang) => {
                    // Held until the partition heals (a read nobody waits for is forgotten).
                    if !(p.tx.is_closed() && is_read(&p.req)) {
                        p.held = true;
                        keep.push(p);
                    }
                    continue;
                }
                Some(Partition::Refuse) => {
                    let _ =
                        p.tx.send(Err("connection refused (mcr-sim partition)".into()));
                    continue;
                }
                None => {}
            }
            if p.held {
                p.held = false;
                if self.rng.bool() {
                    let _ =
                        p.tx.send(Err("connection reset (mcr-sim partition healed)".into()));
                    continue;
                }
            }
            if p.tx.is_closed() && (is_read(&p.req) || self.rng.bool()) {
                // The client gave up (or died); its request never left, or it is forgotten.
                continue;
            }
            ready.push(p);
        }
        self.wire.put_back(keep);
        // Concurrent requests reach the servers in an order of the seed's choosing (sorted
        // first, so the choice does not depend on the order they were sent in).
        ready.sort_by_cached_key(|p| {
            (
                p.from,
                p.target,
                p.req.method().to_string(),
                p.req.uri().to_string(),
                p.seq,
            )
        });
        self.rng.shuffle(&mut ready);
        for p in ready {
            self.serve(p, now, trace).await;
        }
    }

    /// Serves one request that reached its server.
    async fn serve(&mut self, p: Pending, now: Ms, trace: &TraceLock) {
        let faults = self.faults(p.from.replica, p.target.path());
        let Pending {
            from,
            target,
            req,
            tx,
            ..
        } = p;
        let (mut parts, body) = req.into_parts();
        let Ok(bytes) = body.collect_bytes().await else {
            let _ = tx.send(Err("request body unreadable".into()));
            return;
        };
        let path = parts.uri.path().to_owned();
        let resource = resource(&path).to_owned();
        let query = parts.uri.query().unwrap_or_default().to_owned();
        let watching = query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1");
        let is_lease_write = resource == "leases" && parts.method != Method::GET;
        let mut executed_but_lost = false;
        if faults.errors > 0 && self.rng.u32(0..1000) < faults.errors {
            let (code, reason) = match self.rng.u8(0..5) {
                0 => (500, "InternalError"),
                1 => (503, "ServiceUnavailable"),
                2 => (429, "TooManyRequests"),
                3 => (0, "timeout"),
                _ => (0, "lost"),
            };
            if is_lease_write {
                trace.lock().add(
                    now,
                    &from.to_string(),
                    format_args!("lease {} {path}: {reason}", parts.method),
                );
            }
            match code {
                0 if reason == "timeout" => {
                    self.blackhole.push(tx);
                    return;
                }
                0 => executed_but_lost = true,
                code => {
                    let latency = self.rng.u64(0..=faults.latency);
                    let _ = tx.send(Ok((status(code, reason), latency)));
                    return;
                }
            }
        }
        let collection = (target, path.clone());
        let stale = !watching
            && parts.method == Method::GET
            && faults.stale_lists
            && query.split('&').any(|p| p == "resourceVersion=0");
        if stale && let Some(rv) = self.listed.get(&collection) {
            let uri = format!("{path}?{}", at_version(&query, rv));
            if let Ok(uri) = uri.parse() {
                trace.lock().add(
                    now,
                    &from.to_string(),
                    format_args!("stale list {path} at {rv}"),
                );
                parts.uri = uri;
            }
        }
        if is_lease_write && let Some(what) = lease_write(&bytes) {
            trace.lock().add(
                now,
                &from.to_string(),
                format_args!(
                    "lease {} {}: {what}",
                    parts.method,
                    path.rsplit('/').next().unwrap_or_default()
                ),
            );
        }
        let Some(server) = self.servers.get(&target).cloned() else {
            let _ = tx.send(Err(format!("no server {target:?}")));
            return;
        };
        let method = parts.method.clone();
        let request = Request::from_parts(parts, kube::client::Body::from(bytes));
        let response = match server.send(request).await {
            Ok(response) => response,
            Err(err) => {
                let _ = tx.send(Err(err.to_string()));
                return;
            }
        };
        if executed_but_lost {
            let _ = tx.send(Err(
                "connection reset (mcr-sim: the request was executed)".into()
            ));
            return;
        }
        let latency = self.rng.u64(0..=faults.latency);
        let (head, body) = response.into_parts();
        let body = if watching && head.status.is_success() {
            let faults = self.path(from.replica, target.path()).subscribe();
            crate::tap::tap(body, faults, &resource, self.rng.u64(..))
        } else {
            let bytes = body.collect_bytes().await.unwrap_or_default();
            if faults.stale_lists
                && head.status.is_success()
                && !stale
                && let Some(rv) = list_version(&bytes)
            {
                self.listed.insert(collection, rv);
            }
            if is_lease_write && head.status.is_success() && method == Method::DELETE {
                self.gone
                    .push((path.rsplit('/').next().unwrap_or_default().to_owned(), now));
            }
            if is_lease_write && !head.status.is_success() {
                trace.lock().add(
                    now,
                    &from.to_string(),
                    format_args!("lease write answered {}", head.status.as_u16()),
                );
            }
            full(bytes)
        };
        let _ = tx.send(Ok((Response::from_parts(head, body), latency)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resource_of_a_path() {
        assert_eq!(
            resource("/apis/coordination.k8s.io/v1/namespaces/default/leases"),
            "leases"
        );
        assert_eq!(
            resource("/apis/coordination.k8s.io/v1/namespaces/default/leases/g-r1"),
            "leases"
        );
        assert_eq!(resource("/api/v1/namespaces"), "namespaces");
        assert_eq!(resource("/api/v1/namespaces/m1"), "namespaces");
        assert_eq!(resource("/api/v1/configmaps"), "configmaps");
        assert_eq!(resource("/api/v1/namespaces/m1/configmaps"), "configmaps");
        assert_eq!(resource("/version"), "");
    }

    #[test]
    fn a_stale_list_asks_for_an_exact_older_version() {
        assert_eq!(
            at_version(
                "labelSelector=a&resourceVersion=0&resourceVersionMatch=NotOlderThan",
                "7"
            ),
            "labelSelector=a&resourceVersion=7&resourceVersionMatch=Exact"
        );
    }
}
