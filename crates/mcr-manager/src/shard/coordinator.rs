//! [`Coordinator`]: this replica's side of the protocol (see the [module docs](super)): its
//! Lease, its view of the peers, and the [`Sharder`] answers built from them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use mcr_core::ClusterName;
use mcr_core::shard::{Ownership, Sharder};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::hrw::{self, Peer};
use super::{ShardMetrics, Sharding};
use crate::Fleet;

/// The label every peer Lease of a group carries (its value: the group).
pub(crate) const GROUP_LABEL: &str = "mcr.sigs.k8s.io/shard-group";
/// The annotation with a peer's weight.
pub(crate) const WEIGHT: &str = "mcr.sigs.k8s.io/shard-weight";
/// The annotation with the peer set a peer has applied (its claim): `id=weight,…`.
pub(crate) const CLAIM: &str = "mcr.sigs.k8s.io/shard-claim";
/// The annotation a peer writes on its Lease when it leaves cleanly (it has released every
/// cluster and claims nothing), right before it deletes the Lease: the others take it for
/// gone at once. A Lease deleted or relabelled without it (by hand, by a GitOps prune) says
/// nothing about its peer, who is then gone only by the lease-duration rule.
pub(crate) const LEFT: &str = "mcr.sigs.k8s.io/shard-left";

/// What this replica knows, published to the gates as one value.
#[derive(Clone, Debug, Default)]
struct Snapshot {
    /// Whether this replica may own anything: it renewed its Lease within the renew deadline
    /// and listed the peers after its last claim.
    active: bool,
    /// The live peers (this replica included), sorted.
    view: Vec<Peer>,
    /// The peer set this replica's Lease claims by (what it has applied).
    applied: Vec<Peer>,
    /// The other live peers and the peer set each claims by.
    others: Vec<(String, Vec<Peer>)>,
    /// The peer set this replica applied before `applied` (empty before its first): who
    /// owned a cluster before the last change, for the handoff log.
    previous: Vec<Peer>,
}

/// One peer's Lease as this replica last saw it.
#[derive(Clone, Debug)]
struct Seen {
    /// The Lease's name.
    name: String,
    resource_version: String,
    /// When this replica saw the Lease change (local monotonic clock).
    at: Instant,
    duration: Duration,
    weight: u32,
    claim: Vec<Peer>,
    /// A consistent list showed this version after the lease duration had passed since `at`:
    /// the peer is gone for good, and only now is its claim disregarded.
    gone: bool,
}

/// This replica in the sharded group; the manager's [`Sharder`].
pub(crate) struct Coordinator {
    opts: Sharding,
    snapshot: RwLock<Arc<Snapshot>>,
    /// The renew deadline of the last successful write (updated at every renewal, without
    /// waking the gates).
    valid_until: Mutex<Option<Instant>>,
    version: watch::Sender<u64>,
    metrics: Mutex<Option<ShardMetrics>>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("identity", &self.opts.identity)
            .finish_non_exhaustive()
    }
}

/// Who owns `name` given `snap`, this replica's identity `me` and the renew deadline of its
/// last successful write (`valid_until`: past it, checked on every question, this replica
/// owns nothing, even in a process resumed after a pause before its coordinator ran again).
fn owner_in(
    snap: &Snapshot,
    me: &str,
    valid_until: Option<Instant>,
    name: &ClusterName,
) -> Ownership {
    if !snap.active || valid_until.is_none_or(|until| Instant::now() >= until) {
        return Ownership::Elsewhere { owner: None };
    }
    match hrw::owner(&snap.view, name) {
        Some(p) if p.id == me => {}
        other => {
            return Ownership::Elsewhere {
                owner: other.map(|p| p.id.clone()),
            };
        }
    }
    // In transit: this replica has not claimed it yet.
    if hrw::owner(&snap.applied, name).is_none_or(|p| p.id != me) {
        return Ownership::Elsewhere { owner: None };
    }
    // Another live peer still claims it (it has not released it yet).
    for (id, claim) in &snap.others {
        if hrw::owner(claim, name).is_some_and(|p| &p.id == id) {
            return Ownership::Elsewhere {
                owner: Some(id.clone()),
            };
        }
    }
    Ownership::Owned
}

impl Sharder for Coordinator {
    fn owner(&self, name: &ClusterName) -> Ownership {
        let snap = self.snapshot.read().unwrap_or_else(|p| p.into_inner());
        owner_in(&snap, &self.opts.identity, self.valid_until(), name)
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Past the renew deadline of the last successful write (or before the first): this
    /// replica owns nothing, whether or not its coordinator has run since.
    fn lapsed(&self) -> bool {
        self.valid_until()
            .is_none_or(|until| Instant::now() >= until)
    }
}

impl Coordinator {
    pub(crate) fn new(opts: Sharding) -> Self {
        Coordinator {
            opts,
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            valid_until: Mutex::new(None),
            version: watch::channel(0).0,
            metrics: Mutex::new(None),
        }
    }

    /// The options.
    pub(crate) fn options(&self) -> &Sharding {
        &self.opts
    }

    /// Runs `f` (recording an engagement) only if this replica owns `name`, with no new
    /// snapshot published in between: an engagement is either seen by the release that
    /// follows a change, or refused.
    pub(crate) fn admit<R>(
        &self,
        name: &ClusterName,
        f: impl FnOnce() -> R,
    ) -> Result<R, Ownership> {
        let snap = self.snapshot.read().unwrap_or_else(|p| p.into_inner());
        match owner_in(&snap, &self.opts.identity, self.valid_until(), name) {
            Ownership::Owned => Ok(f()),
            other => Err(other),
        }
    }

    /// The peer that owned `name` under the assignment before the current one, if that was
    /// another peer: a cluster engaged now was handed over from it.
    pub(crate) fn taken_from(&self, name: &ClusterName) -> Option<String> {
        let snap = self.snapshot.read().unwrap_or_else(|p| p.into_inner());
        hrw::owner(&snap.previous, name)
            .filter(|p| p.id != self.opts.identity)
            .map(|p| p.id.clone())
    }

    fn valid_until(&self) -> Option<Instant> {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_metrics(&self, metrics: ShardMetrics) {
        *self.metrics.lock().unwrap_or_else(|p| p.into_inner()) = Some(metrics);
    }

    fn publish(&self, snap: Snapshot) {
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(snap);
        self.version.send_modify(|v| *v += 1);
    }

    fn current(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs this replica's side of the protocol until `token` fires; then, once the caller
    /// has stopped every member ([`leave`](Self::leave)), deletes the Lease.
    pub(crate) async fn run(
        self: Arc<Self>,
        host: kube::Client,
        fleet: Fleet,
        token: CancellationToken,
    ) {
        let mut run = Run::new(self.clone(), host, fleet);
        run.run(&token).await;
    }
}

/// The state of one run of the protocol.
struct Run {
    c: Arc<Coordinator>,
    api: Api<Lease>,
    fleet: Fleet,
    peers: HashMap<String, Seen>,
    /// The last Lease written (for its resourceVersion).
    mine: Option<Lease>,
    /// The start of the last successful write.
    renewed: Option<Instant>,
    applied: Vec<Peer>,
    /// The peer set applied before `applied`.
    previous: Vec<Peer>,
    /// The namespace of the Leases (for the logs).
    namespace: String,
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_millis().div_ceil(1000)).unwrap_or(i32::MAX)
}

fn encode(peers: &[Peer]) -> String {
    peers
        .iter()
        .map(|p| format!("{}={}", p.id, p.weight))
        .collect::<Vec<_>>()
        .join(",")
}

fn decode(s: &str) -> Vec<Peer> {
    let mut peers: Vec<Peer> = s
        .split(',')
        .filter_map(|e| {
            let (id, w) = e.rsplit_once('=')?;
            Some(Peer::new(id, w.parse().ok()?))
        })
        .collect();
    peers.sort();
    peers
}

/// Whether resourceVersion `a` is older than `b`. Both are etcd revisions on every API server
/// mcr runs against (decimal integers); anything else counts as not older (taken).
fn older(a: &str, b: &str) -> bool {
    matches!((a.parse::<u64>(), b.parse::<u64>()), (Ok(a), Ok(b)) if a < b)
}

/// How long a write started at `now` may take: what is left of the renew deadline since the
/// last successful write (`renewed`); past that deadline (this replica is fenced and owns
/// nothing, so a late write is harmless) the whole deadline again.
fn write_bound(renewed: Option<Instant>, now: Instant, deadline: Duration) -> Duration {
    match renewed {
        Some(at) if now < at + deadline => at + deadline - now,
        _ => deadline,
    }
}

/// An epoch number for a peer set (what `mcr_shard_epoch` shows).
pub(crate) fn epoch(peers: &[Peer]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    peers.hash(&mut h);
    h.finish() >> 12 // fits a gauge's f64 exactly
}

impl Run {
    fn new(c: Arc<Coordinator>, host: kube::Client, fleet: Fleet) -> Self {
        let ns = c.opts.namespace_or(host.default_namespace());
        Run {
            api: Api::namespaced(host, &ns),
            c,
            fleet,
            peers: HashMap::new(),
            mine: None,
            renewed: None,
            applied: Vec::new(),
            previous: Vec::new(),
            namespace: ns,
        }
    }

    fn me(&self) -> &str {
        &self.c.opts.identity
    }

    fn selector(&self) -> String {
        format!("{GROUP_LABEL}={}", self.c.opts.group)
    }

    /// Records a peer Lease; `true` when its weight or claim changed (or it is new).
    fn observe(&mut self, lease: &Lease, now: Instant) -> bool {
        let Some(spec) = &lease.spec else {
            return false;
        };
        let Some(id) = spec.holder_identity.clone().filter(|h| !h.is_empty()) else {
            return false;
        };
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        let name = lease.metadata.name.clone().unwrap_or_default();
        let annotations = lease.metadata.annotations.clone().unwrap_or_default();
        let weight = annotations
            .get(WEIGHT)
            .and_then(|w| w.parse().ok())
            .unwrap_or(1);
        let claim = annotations
            .get(CLAIM)
            .map(|c| decode(c))
            .unwrap_or_default();
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).unwrap_or(15),
        );
        // Left cleanly: gone at once, claiming nothing.
        let gone = annotations.contains_key(LEFT);
        match self.peers.get_mut(&id) {
            Some(seen) if seen.resource_version == rv => false,
            // An older version (a resumed watch replaying what it missed) after a newer one.
            Some(seen) if older(&rv, &seen.resource_version) => false,
            Some(seen) => {
                let changed = seen.weight != weight || seen.claim != claim || seen.gone != gone;
                *seen = Seen {
                    name,
                    resource_version: rv,
                    at: now,
                    duration,
                    weight,
                    claim,
                    gone,
                };
                changed
            }
            None => {
                self.peers.insert(
                    id,
                    Seen {
                        name,
                        resource_version: rv,
                        at: now,
                        duration,
                        weight,
                        claim,
                        gone,
                    },
                );
                true
            }
        }
    }

    /// A peer Lease left the watch (deleted, or no longer labelled for the group). Only a
    /// peer that said it left ([`LEFT`], written after it released everything) is gone at
    /// once. Any other deletion, by hand or by a peer that found this one gone, changes
    /// nothing: the peer is gone only by the rule of the module docs (its Lease unchanged,
    /// here absent, for its lease duration, confirmed by a consistent list), so a live peer
    /// whose Lease someone deleted keeps its claim until it writes the Lease again.
    fn forget(&mut self, lease: &Lease) {
        let Some(id) = lease.spec.as_ref().and_then(|s| s.holder_identity.clone()) else {
            return;
        };
        if id == self.me() {
            return;
        }
        let left = lease
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(LEFT));
        if left {
            self.observe(lease, Instant::now());
        }
    }

    /// The live peers: this one (if it renewed in time) and every other whose Lease changed
    /// within its duration, as seen here.
    fn view(&self, now: Instant) -> Vec<Peer> {
        let me = self.me();
        let mut view: Vec<Peer> = self
            .peers
            .iter()
            .filter(|(id, s)| {
                id.as_str() != me && !s.gone && now.duration_since(s.at) < s.duration
            })
            .map(|(id, s)| Peer::new(id.clone(), s.weight))
            .collect();
        if self.fresh(now) {
            view.push(Peer::new(me, self.c.opts.weight));
        }
        view.sort();
        view
    }

    /// Whether this replica renewed within its renew deadline.
    fn fresh(&self, now: Instant) -> bool {
        self.renewed
            .is_some_and(|at| now.duration_since(at) < self.c.opts.renew_deadline)
    }

    fn snapshot(&self, view: Vec<Peer>, now: Instant, active: bool) -> Snapshot {
        let me = self.me();
        // Every other peer's claim holds until a consistent list confirmed the peer gone: a
        // peer that only *looks* silent (this replica's watch lags, or this process was
        // paused) may still hold what it claims. The view may drop it earlier; that only
        // makes this replica release or wait, never engage.
        let others = self
            .peers
            .iter()
            .filter(|(id, s)| id.as_str() != me && !s.gone)
            .map(|(id, s)| (id.clone(), s.claim.clone()))
            .collect();
        Snapshot {
            active: active && self.fresh(now),
            view,
            applied: self.applied.clone(),
            others,
            previous: self.previous.clone(),
        }
    }

    /// A consistent list of the group's Leases (a quorum read): after a claim, before this
    /// replica engages anything, and before a peer is taken for gone.
    async fn list(&mut self) -> Result<(), kube::Error> {
        let params = ListParams::default().labels(&self.selector());
        let timeout = self.c.opts.renew_deadline;
        let list = tokio::time::timeout(timeout, self.api.list(&params))
            .await
            .map_err(|_| kube::Error::Service("listing peer leases timed out".into()))??;
        self.listed(&list.items, Instant::now());
        self.collect().await;
        Ok(())
    }

    /// Takes in a consistent list of the group's Leases read at `now`: every Lease observed,
    /// and peers whose Lease is unchanged for their lease duration confirmed gone. A peer
    /// whose Lease is missing from the list is forgotten only once its lease duration has
    /// passed since its last change: a missing Lease may have been deleted by hand under a
    /// live peer, who writes it again at its next renewal.
    fn listed(&mut self, leases: &[Lease], now: Instant) {
        let mut present = Vec::new();
        for lease in leases {
            self.observe(lease, now);
            if let Some(id) = lease.spec.as_ref().and_then(|s| s.holder_identity.clone()) {
                present.push(id);
            }
        }
        let me = self.me().to_owned();
        self.peers.retain(|id, s| {
            *id == me || present.contains(id) || now.duration_since(s.at) < s.duration
        });
        for (id, s) in &mut self.peers {
            if *id != me && now.duration_since(s.at) >= s.duration {
                s.gone = true;
            }
        }
    }

    /// Deletes the Leases of peers gone for good (unchanged for their lease duration, as just
    /// confirmed by a consistent list), so that a replica joining later does not wait a lease
    /// duration for them. Only if unchanged since (a precondition on the resourceVersion).
    async fn collect(&mut self) {
        let me = self.me().to_owned();
        let gone: Vec<(String, String, String)> = self
            .peers
            .iter()
            .filter(|(id, s)| **id != me && s.gone)
            .map(|(id, s)| (id.clone(), s.name.clone(), s.resource_version.clone()))
            .collect();
        for (id, name, rv) in gone {
            let params = DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    resource_version: Some(rv),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            let deleted =
                tokio::time::timeout(self.c.opts.renew_deadline, self.api.delete(&name, &params))
                    .await;
            match deleted {
                Ok(Ok(_)) => {
                    info!(peer = %id, lease = %name, "peer gone: its lease deleted");
                    self.peers.remove(&id);
                }
                Ok(Err(kube::Error::Api(s))) if s.is_not_found() => {
                    self.peers.remove(&id);
                }
                // Renewed meanwhile (a conflict), or the host is slow: seen at the next list.
                Ok(Err(err)) => {
                    debug!(peer = %id, error = %mcr_core::ErrorChain(&err), "peer lease not deleted")
                }
                Err(_) => debug!(peer = %id, "deleting a peer lease timed out"),
            }
        }
    }

    /// Writes this replica's Lease (a renewal, carrying `claim`), bounded by the time left
    /// before the renew deadline. On success, `renewed` is the start of this write.
    async fn write(&mut self, claim: &[Peer]) -> Result<(), kube::Error> {
        let started = Instant::now();
        let left = write_bound(self.renewed, started, self.c.opts.renew_deadline);
        let opts = &self.c.opts;
        let mut annotations = BTreeMap::new();
        annotations.insert(WEIGHT.to_owned(), opts.weight.to_string());
        annotations.insert(CLAIM.to_owned(), encode(claim));
        let spec = LeaseSpec {
            holder_identity: Some(opts.identity.clone()),
            lease_duration_seconds: Some(seconds(opts.lease_duration)),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        };
        let name = opts.lease_name();
        let api = self.api.clone();
        let previous = self.mine.clone();
        let labels = BTreeMap::from([(GROUP_LABEL.to_owned(), opts.group.clone())]);
        let attempt = async move {
            let mut lease = match previous {
                Some(l) => l,
                None => match api.get_opt(&name).await? {
                    Some(l) => l,
                    None => {
                        let lease = Lease {
                            metadata: ObjectMeta {
                                name: Some(name.clone()),
                                labels: Some(labels.clone()),
                                annotations: Some(annotations.clone()),
                                ..ObjectMeta::default()
                            },
                            spec: Some(spec.clone()),
                        };
                        return api.create(&PostParams::default(), &lease).await;
                    }
                },
            };
            lease.metadata.labels = Some(labels);
            lease.metadata.annotations = Some(annotations);
            lease.spec = Some(spec);
            api.replace(&name, &PostParams::default(), &lease).await
        };
        let result = match tokio::time::timeout(left, attempt).await {
            Ok(r) => r,
            Err(_) => Err(kube::Error::Service(
                "renewing the peer lease timed out".into(),
            )),
        };
        match result {
            Ok(lease) => {
                self.observe(&lease, Instant::now());
                self.mine = Some(lease);
                self.renewed = Some(started);
                *self.c.valid_until.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(started + self.c.opts.renew_deadline);
                if let Some(m) = self.metrics() {
                    m.writes.inc();
                }
                Ok(())
            }
            Err(err) => {
                // Read again next time (a conflict: someone else wrote it).
                self.mine = None;
                Err(err)
            }
        }
    }

    fn metrics(&self) -> Option<ShardMetrics> {
        self.c
            .metrics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until no cluster this replica does not own under the published snapshot is
    /// engaged any more (the gates stop them as they see the change) and every instance of
    /// them in `before` is gone (its contexts and in-flight reconciles dropped), bounded by
    /// `limit`. `false` if some cluster is still engaged then; in-flight work that outlives
    /// the limit (a reconcile that does not honour cancellation) is logged and left.
    async fn released(
        &self,
        before: Vec<(ClusterName, mcr_core::Cluster)>,
        limit: Duration,
    ) -> bool {
        let deadline = Instant::now() + limit;
        let draining: Vec<(ClusterName, mcr_core::Released)> = before
            .into_iter()
            .filter(|(n, _)| !self.c.owner(n).is_owned())
            .map(|(n, c)| (n, c.released()))
            .collect();
        loop {
            let held: Vec<ClusterName> = self
                .fleet
                .names()
                .into_iter()
                .filter(|n| !self.c.owner(n).is_owned())
                .collect();
            let running: Vec<&ClusterName> = draining
                .iter()
                .filter(|(_, r)| !r.is_released())
                .map(|(n, _)| n)
                .collect();
            if held.is_empty() && running.is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                if !held.is_empty() {
                    warn!(
                        clusters = held.len(),
                        "clusters not released within the grace period"
                    );
                    return false;
                }
                warn!(clusters = ?running, grace = ?limit,
                    "work of released clusters still running after the grace period (does a reconcile ignore cancellation?)");
                return true;
            }
            // Local and bounded: the members' tokens fire at once, their registry entries and
            // in-flight reconciles go a few polls later.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The peer set to claim now: the live peers and, trying to stay alive, this one.
    fn claim(&self, now: Instant) -> Vec<Peer> {
        let mut claim = self.view(now);
        claim.push(Peer::new(self.me(), self.c.opts.weight));
        claim.sort();
        claim.dedup_by(|a, b| a.id == b.id);
        claim
    }

    /// Lists the peers (a consistent read), then releases what this replica no longer owns
    /// under the live peers, claims them, lists again and publishes. Returns whether the
    /// claim was written.
    ///
    /// A claim is made only from a successful list: a replica that claimed before it knew
    /// its peers (starting, restarting, back from a fence) would claim every cluster and make
    /// every other replica release its whole share. When the list fails, nothing new is
    /// claimed; a replica that holds clusters renews the claim it has, which stays true.
    async fn apply(&mut self) -> bool {
        let started = Instant::now();
        if let Err(err) = self.list().await {
            warn!(
                error = %mcr_core::ErrorChain(&err),
                namespace = %self.namespace,
                "could not list the peer leases, so no new claim is made (the replica's Role needs list and watch on leases in this namespace)"
            );
            if self.c.current().active && !self.applied.is_empty() {
                let claim = self.applied.clone();
                if let Err(err) = self.write(&claim).await {
                    warn!(error = %mcr_core::ErrorChain(&err), "could not renew the peer lease");
                }
            }
            return false;
        }
        let now = Instant::now();
        let view = self.claim(now);
        if view == self.applied && self.c.current().active {
            // The list showed nothing new: a renewal.
            return match self.write(&view).await {
                Ok(()) => true,
                Err(err) => {
                    warn!(error = %mcr_core::ErrorChain(&err), "could not renew the peer lease");
                    false
                }
            };
        }
        let previous = self.applied.clone();
        // 1. Release: publish the new view with the old claim. Nothing new is owned (a name
        //    is owned only if both claim and view give it to this replica).
        let engaged: Vec<(ClusterName, mcr_core::Cluster)> = self
            .fleet
            .members()
            .engagements()
            .into_iter()
            .map(|(n, c, _)| (n, c))
            .collect();
        let before: Vec<ClusterName> = engaged.iter().map(|(n, _)| n.clone()).collect();
        self.c.publish(self.snapshot(view.clone(), now, true));
        let grace = self.c.opts.release_grace();
        if !self.released(engaged, grace).await {
            return false;
        }
        for name in &before {
            if let Ownership::Elsewhere { owner } = self.c.owner(name) {
                info!(cluster = %name, from = %self.me(), to = owner.as_deref().unwrap_or("unknown"),
                    "handoff: cluster released");
                if let Some(m) = self.metrics() {
                    m.handoffs.inc();
                }
            }
        }
        // 2. Claim the new view (a renewal too).
        if let Err(err) = self.write(&view).await {
            warn!(error = %mcr_core::ErrorChain(&err), "could not write the peer lease");
            return false;
        }
        self.applied = view.clone();
        // 3. A consistent list after the claim, before anything new is engaged.
        if let Err(err) = self.list().await {
            warn!(error = %mcr_core::ErrorChain(&err), "could not list the peer leases");
            // Claimed but not listed: nothing new is engaged; the step is retried (the Lease
            // claims at least what the published snapshot lets this replica own).
            self.applied = previous;
            return false;
        }
        if previous != self.applied {
            self.previous = previous.clone();
        }
        let now = Instant::now();
        let view = self.view(now);
        self.c.publish(self.snapshot(view.clone(), now, true));
        if previous != self.applied {
            info!(peers = %encode(&self.applied), epoch = epoch(&self.applied), "assignment applied");
            if let Some(m) = self.metrics() {
                m.epoch.set(epoch(&self.applied) as i64);
                m.handoff_seconds.observe(started.elapsed().as_secs_f64());
            }
        }
        true
    }

    async fn run(&mut self, token: &CancellationToken) {
        let selector = self.selector();
        let config = watcher::Config::default().labels(&selector);
        let mut events = std::pin::pin!(watcher(self.api.clone(), config).default_backoff());
        let opts = self.c.opts.clone();
        let mut next_renew = Instant::now();
        // After a failed step, nothing is tried again before this.
        let mut retry_at = Instant::now();
        loop {
            let now = Instant::now();
            // Self-fencing: not renewed within the renew deadline → own nothing, before any
            // peer can take the clusters over (they wait for the lease duration).
            if self.renewed.is_some() && !self.fresh(now) && self.c.current().active {
                warn!(deadline = ?opts.renew_deadline, "peer lease not renewed in time: releasing every cluster");
                self.c.publish(self.snapshot(self.view(now), now, false));
            }
            let view = self.view(now);
            let active = self.c.current().active;
            let changed = self.fresh(now) && (view != self.applied || !active);
            if now >= next_renew || (changed && now >= retry_at) {
                let claim = self.claim(now);
                let ok = if claim != self.applied || !active {
                    self.apply().await
                } else {
                    match self.write(&claim).await {
                        Ok(()) => true,
                        Err(err) => {
                            warn!(error = %mcr_core::ErrorChain(&err), "could not renew the peer lease");
                            false
                        }
                    }
                };
                if ok {
                    next_renew = Instant::now() + opts.renew_period;
                } else {
                    retry_at = Instant::now() + opts.retry_after_failure();
                    next_renew = retry_at;
                }
                self.report();
                continue;
            }
            // Sleep until: the next renewal, the next expiry of a peer, the fencing deadline.
            let mut wake = next_renew;
            if changed {
                wake = wake.min(retry_at);
            }
            for (id, s) in &self.peers {
                if id != self.me() && now.duration_since(s.at) < s.duration {
                    wake = wake.min(s.at + s.duration);
                }
            }
            if let Some(at) = self.renewed {
                let fence = at + opts.renew_deadline;
                if fence > now {
                    wake = wake.min(fence);
                }
            }
            tokio::select! {
                () = token.cancelled() => break,
                () = tokio::time::sleep_until(wake) => {
                    // A peer may have expired: confirm with a consistent list (its watch may
                    // lag) before it is taken for gone.
                    if self.view(Instant::now()) != self.applied
                        && let Err(err) = self.list().await {
                        warn!(error = %mcr_core::ErrorChain(&err), namespace = %self.namespace,
                            "could not list the peer leases (the replica's Role needs list and watch on leases in this namespace)");
                    }
                }
                event = events.next() => match event {
                    Some(event) => self.on_event(event),
                    None => break,
                },
            }
        }
    }

    /// Takes in one event of the peer Lease watch.
    fn on_event(&mut self, event: Result<watcher::Event<Lease>, watcher::Error>) {
        match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                if self.observe(&lease, Instant::now()) {
                    // A claim released: gates may engage now.
                    let now = Instant::now();
                    let view = self.view(now);
                    if view == self.applied {
                        self.c
                            .publish(self.snapshot(view, now, self.c.current().active));
                    }
                }
            }
            Ok(watcher::Event::Delete(lease)) => self.forget(&lease),
            // A relist of the watch is not a consistent list: peers missing from it are not
            // taken for gone (only `listed` does that, by the lease-duration rule).
            Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
            Err(err) => warn!(
                error = %mcr_core::ErrorChain(&err),
                namespace = %self.namespace,
                "peer lease watch failed; retrying (the replica's Role needs get, list, watch, create, update and delete on leases in this namespace)"
            ),
        }
    }

    /// How many entries this run's state holds: bounded by the number of peers, however
    /// long the run.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.peers.len()
    }

    fn report(&self) {
        if let Some(m) = self.metrics() {
            let snap = self.c.current();
            m.peers.set(snap.view.len() as i64);
            let owned = self
                .fleet
                .names()
                .iter()
                .filter(|n| self.c.owner(n).is_owned())
                .count();
            m.owned.set(owned as i64);
        }
    }
}

impl Coordinator {
    /// Owns nothing any more (the manager has stopped every member) and deletes the Lease, so
    /// the peers take over at once instead of after the lease duration.
    pub(crate) async fn leave(&self, host: kube::Client) {
        self.publish(Snapshot::default());
        let ns = self.opts.namespace_or(host.default_namespace());
        let api: Api<Lease> = Api::namespaced(host, &ns);
        let name = self.opts.lease_name();
        // Say so first (claiming nothing): the peers take this replica for gone at once. A
        // Lease deleted without it would make them wait the lease duration.
        let leave = async {
            let mut params = DeleteParams::default();
            if let Some(mut lease) = api.get_opt(&name).await? {
                let annotations = lease.metadata.annotations.get_or_insert_default();
                annotations.insert(CLAIM.to_owned(), String::new());
                annotations.insert(LEFT.to_owned(), "true".to_owned());
                let left = api.replace(&name, &PostParams::default(), &lease).await?;
                params.preconditions = Some(kube::api::Preconditions {
                    resource_version: left.metadata.resource_version,
                    uid: None,
                });
            }
            api.delete(&name, &params).await.map(|_| ())
        };
        match tokio::time::timeout(self.opts.renew_deadline, leave).await {
            Ok(Ok(())) => info!(lease = %name, "left the shard group"),
            Ok(Err(kube::Error::Api(s))) if s.is_not_found() => {}
            Ok(Err(err)) => {
                warn!(lease = %name, error = %mcr_core::ErrorChain(&err), "could not delete the peer lease")
            }
            Err(_) => warn!(lease = %name, "deleting the peer lease timed out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_replica_still_gets_time_to_renew() {
        let deadline = Duration::from_secs(10);
        let at = Instant::now();
        assert_eq!(write_bound(None, at, deadline), deadline);
        assert_eq!(
            write_bound(Some(at), at + Duration::from_secs(4), deadline),
            Duration::from_secs(6),
            "a renewal is cut off at the renew deadline"
        );
        // Past the deadline (fenced, owning nothing): a write gets the whole deadline again,
        // or a replica cut off for a while could never renew once the host is back.
        assert_eq!(
            write_bound(Some(at), at + Duration::from_secs(30), deadline),
            deadline
        );
    }

    /// Replica r1's protocol state over a host that never answers (these tests call no API).
    fn idle_run() -> Run {
        let service = tower::service_fn(|_req: http::Request<kube::client::Body>| {
            futures::future::pending::<
                Result<http::Response<kube::client::Body>, std::convert::Infallible>,
            >()
        });
        let client = kube::Client::new(service, "default");
        let host = mcr_core::Cluster::new(ClusterName::host(), client.clone());
        let c = Arc::new(Coordinator::new(Sharding::new("g").identity("r1")));
        Run::new(c, client, Fleet::new(host))
    }

    fn lease(rv: &str, claim: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some("g-r2".into()),
                resource_version: Some(rv.into()),
                annotations: Some(BTreeMap::from([(CLAIM.to_owned(), claim.to_owned())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("r2".into()),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
        }
    }

    #[tokio::test]
    async fn an_older_lease_version_never_replaces_a_newer_one() {
        // A watch that resumes after a partition replays the events it missed, in order:
        // older versions of a peer's Lease can arrive after a consistent list showed a newer
        // one. Taking them would regress the peer's claim to one it has since widened.
        let mut run = idle_run();
        let now = Instant::now();
        assert!(run.observe(&lease("12", "r1=1,r2=1"), now));
        assert!(!run.observe(&lease("9", "r2=1"), now), "older: ignored");
        assert_eq!(run.peers["r2"].claim, decode("r1=1,r2=1"));
        assert!(run.observe(&lease("13", "r2=1"), now), "newer: taken");
        assert_eq!(run.peers["r2"].claim, decode("r2=1"));
    }

    fn left(rv: &str) -> Lease {
        let mut lease = lease(rv, "");
        lease
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(LEFT.to_owned(), "true".to_owned());
        lease
    }

    #[tokio::test]
    async fn only_a_peer_that_said_it_left_is_gone_when_its_lease_is_deleted() {
        let mut run = idle_run();
        let now = Instant::now();
        assert!(run.observe(&lease("20", "r1=1,r2=1"), now));
        let claims = |run: &Run| -> Vec<String> {
            let snap = run.snapshot(run.view(now), now, true);
            snap.others.into_iter().map(|(id, _)| id).collect()
        };
        // Deleted (or relabelled) by hand: nothing changes, the peer may be alive.
        run.forget(&lease("21", "r1=1,r2=1"));
        assert_eq!(claims(&run), ["r2"]);
        assert!(run.view(now).iter().any(|p| p.id == "r2"));
        // A replayed deletion of an older Lease that left: ignored.
        run.forget(&left("15"));
        assert_eq!(claims(&run), ["r2"]);
        // It left (released everything, claims nothing): gone at once.
        run.forget(&left("22"));
        assert!(claims(&run).is_empty());
        assert!(run.view(now).iter().all(|p| p.id != "r2"));
    }

    #[tokio::test]
    async fn a_lease_missing_from_a_list_is_forgotten_only_after_the_lease_duration() {
        let mut run = idle_run();
        let now = Instant::now();
        run.observe(&lease("12", "r1=1,r2=1"), now);
        // Deleted by hand a moment ago: the list misses it, the peer stays.
        run.listed(&[], now + Duration::from_secs(1));
        assert!(run.peers.contains_key("r2"));
        // Still missing after its lease duration (15 s): forgotten.
        run.listed(&[], now + Duration::from_secs(16));
        assert!(!run.peers.contains_key("r2"));
    }

    #[tokio::test]
    async fn a_silent_peer_keeps_its_claim_until_a_consistent_list_confirms_it_gone() {
        // Seen through the watch alone, a peer silent for longer than its lease may be alive
        // (the watch lags, or this process was paused): it leaves the view, but its claim
        // holds until a consistent list shows its Lease unchanged.
        let mut run = idle_run();
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(60)).unwrap();
        run.observe(&lease("12", "r1=1,r2=1"), long_ago);
        let claims = |run: &Run| -> Vec<String> {
            let snap = run.snapshot(run.view(now), now, true);
            snap.others.into_iter().map(|(id, _)| id).collect()
        };
        assert!(
            run.view(now).iter().all(|p| p.id != "r2"),
            "out of the view"
        );
        assert_eq!(claims(&run), ["r2"], "its claim holds");
        // A consistent list shows the same version: gone, its claim disregarded.
        run.listed(&[lease("12", "r1=1,r2=1")], now);
        assert!(claims(&run).is_empty());
        // Renewed since (a newer version): back, claim and all.
        run.listed(&[lease("14", "r1=1,r2=1")], now);
        assert_eq!(claims(&run), ["r2"]);
        assert!(run.view(now).iter().any(|p| p.id == "r2"));
    }

    #[tokio::test]
    async fn the_state_stays_bounded_however_often_peers_renew() {
        // A day of renewals of one peer (every 2 s): the state holds that peer, not its
        // renewals.
        let mut run = idle_run();
        for rv in 1..=43_200u64 {
            run.on_event(Ok(watcher::Event::Apply(lease(&rv.to_string(), "r1=1,r2=1"))));
        }
        assert!(run.tracked() <= 2, "{} entries for one peer", run.tracked());
    }

    #[test]
    fn claims_round_trip() {
        let peers = vec![Peer::new("a", 1), Peer::new("b-2", 3)];
        assert_eq!(decode(&encode(&peers)), peers);
        assert!(decode("").is_empty());
    }

    #[test]
    fn a_name_is_owned_only_when_view_claim_and_peers_agree() {
        let me = "a";
        let ab = vec![Peer::new("a", 1), Peer::new("b", 1)];
        let names: Vec<ClusterName> = (0..200).map(|i| format!("c{i}").into()).collect();
        let mine: Vec<&ClusterName> = names
            .iter()
            .filter(|n| hrw::owner(&ab, n).unwrap().id == "a")
            .collect();
        let snap = Snapshot {
            active: true,
            view: ab.clone(),
            applied: ab.clone(),
            others: vec![("b".into(), ab.clone())],
            previous: Vec::new(),
        };
        let valid = Some(Instant::now() + Duration::from_secs(60));
        for n in &names {
            assert_eq!(owner_in(&snap, me, valid, n).is_owned(), mine.contains(&n));
        }
        // b still claims by the set where it was alone: a owns nothing b held.
        let b_alone = Snapshot {
            others: vec![("b".into(), vec![Peer::new("b", 1)])],
            ..snap.clone()
        };
        assert!(
            names
                .iter()
                .all(|n| !owner_in(&b_alone, me, valid, n).is_owned())
        );
        // Past the renew deadline (a process resumed after a pause, before its coordinator
        // ran): owns nothing.
        let lapsed = Some(Instant::now() - Duration::from_millis(1));
        assert!(
            names
                .iter()
                .all(|n| !owner_in(&snap, me, lapsed, n).is_owned())
        );
        assert!(
            names
                .iter()
                .all(|n| !owner_in(&snap, me, None, n).is_owned())
        );
        // Not active (not renewed, or fenced): owns nothing.
        let fenced = Snapshot {
            active: false,
            ..snap
        };
        assert!(
            names
                .iter()
                .all(|n| !owner_in(&fenced, me, valid, n).is_owned())
        );
    }
}
