//! [`Run`]: one run of the protocol: the peer Lease watch, this replica's Lease writes and
//! consistent lists, the peer table, and the loop that ties them to renewals and expiries.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use mcr_core::Coordinator as _;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::ShardMetrics;
use super::claim::{self, GROUP_LABEL};
use super::coordinator::{Coordinator, Snapshot};
use super::hrw::Peer;
use super::peers::Peers;
use crate::Fleet;

/// The state of one run of the protocol.
pub(super) struct Run {
    pub(super) c: Arc<Coordinator>,
    api: Api<Lease>,
    /// The host (for Events).
    host: kube::Client,
    pub(super) fleet: Fleet,
    pub(super) peers: Peers,
    /// The last Lease written (for its resourceVersion).
    mine: Option<Lease>,
    /// The version of this replica's last write that its own peer-Lease watch has not shown
    /// yet, and whether the write before it went unshown too: then the watch is deaf (hung,
    /// or its request lost on the way) and peers are listed and the watch opened again.
    unheard: Option<String>,
    deaf: bool,
    /// The watch's last answer was an error (refused, say, by a Role without `watch`): then
    /// it is not deaf but failing, says so, and is retried with backoff; no list stands in for
    /// it (the Role needs `watch`).
    watch_failing: bool,
    /// The start of the last successful write.
    renewed: Option<Instant>,
    pub(super) applied: Vec<Peer>,
    /// The peer set applied before `applied`.
    pub(super) previous: Vec<Peer>,
    /// The namespace of the Leases (for the logs).
    pub(super) namespace: String,
    /// Since when work of clusters given away has outlived the release grace (a handoff
    /// waiting for it).
    pub(super) stuck_since: Option<Instant>,
    /// Since when this replica is active: it listed its peers after its claim, and has not
    /// fenced itself since (it may own what its claim gives it). `None` while it is not.
    pub(super) active_since: Option<Instant>,
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
    pub(super) fn new(c: Arc<Coordinator>, host: kube::Client, fleet: Fleet) -> Self {
        let ns = c.opts.namespace_or(host.default_namespace());
        Run {
            api: Api::namespaced(host.clone(), &ns),
            host,
            peers: Peers::new(c.opts.identity.clone()),
            c,
            fleet,
            mine: None,
            unheard: None,
            deaf: false,
            watch_failing: false,
            renewed: None,
            applied: Vec::new(),
            previous: Vec::new(),
            namespace: ns,
            stuck_since: None,
            active_since: None,
        }
    }

    pub(super) fn me(&self) -> &str {
        &self.c.opts.identity
    }

    fn selector(&self) -> String {
        format!("{GROUP_LABEL}={}", self.c.opts.group)
    }

    /// The live peers: this one (if it renewed in time) and every other whose Lease changed
    /// within its duration, as seen here.
    pub(super) fn view(&self, now: Instant) -> Vec<Peer> {
        let mut view = self
            .peers
            .live(now, self.active_since.is_some(), &self.applied);
        if self.fresh(now) {
            view.push(Peer::new(self.me(), self.c.opts.weight));
        }
        view.sort();
        view
    }

    /// Whether this replica renewed within its renew deadline.
    fn fresh(&self, now: Instant) -> bool {
        self.renewed
            .is_some_and(|at| now.duration_since(at) < self.c.opts.renew_deadline)
    }

    /// What to publish: the live peers, this replica's claim and every other peer's.
    pub(super) fn snapshot(&self, now: Instant) -> Snapshot {
        // Every other peer's claim holds until a consistent list confirmed the peer gone: a
        // peer that only *looks* silent (this replica's watch lags, or this process was
        // paused) may still hold what it claims. The view may drop it earlier; that only
        // makes this replica release or wait, never engage.
        let others = self.peers.claims(self.active_since);
        Snapshot {
            active: self.active_since.is_some() && self.fresh(now),
            view: self.view(now),
            applied: self.applied.clone(),
            others,
            previous: self.previous.clone(),
        }
    }

    /// Publishes what this replica knows now, if it changed: the one way the peer view
    /// reaches the gates, called after everything that can change it (a watch event, a
    /// consistent list, a claim written, a peer expiring, fencing).
    pub(super) fn settle(&self) {
        let snapshot = self.snapshot(Instant::now());
        if *self.c.current() != snapshot {
            self.c.publish(snapshot);
        }
    }

    /// A consistent list of the group's Leases (a quorum read): after a claim, before this
    /// replica engages anything, and before a peer is taken for gone.
    pub(super) async fn list(&mut self) -> Result<(), kube::Error> {
        let params = ListParams::default().labels(&self.selector());
        let timeout = self.c.opts.renew_deadline;
        let list = tokio::time::timeout(timeout, self.api.list(&params))
            .await
            .map_err(|_| kube::Error::Service("listing peer leases timed out".into()))??;
        self.peers.listed(
            &list.items,
            list.metadata.resource_version.as_deref(),
            Instant::now(),
        );
        self.collect().await;
        self.settle();
        Ok(())
    }

    /// Deletes the Leases of peers gone for good (unchanged for their lease duration, as just
    /// confirmed by a consistent list), so that a replica joining later does not wait a lease
    /// duration for them. Only if unchanged since (a precondition on the resourceVersion).
    async fn collect(&mut self) {
        for (id, name, rv) in self.peers.gone() {
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
                    self.peers.remove(&id, Instant::now());
                }
                Ok(Err(kube::Error::Api(s))) if s.is_not_found() => {
                    self.peers.remove(&id, Instant::now());
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
    pub(super) async fn write(&mut self, claim: &[Peer]) -> Result<(), kube::Error> {
        self.write_lease(Some(claim)).await
    }

    /// Announces this replica before its first claim, once a consistent list has shown its
    /// peers: its Lease is renewed with the claim it has (that of an earlier run of this
    /// identity, which peers go on honouring), or created claiming nothing. A replica starting
    /// at the same moment hears of it while it listens, and both claim with each other from
    /// their first claim; a replica already active does not count it until a claim names it
    /// (see [`Peers::live`]), so nothing is released to it before it claims.
    async fn announce(&mut self) {
        if let Err(err) = self.list().await {
            debug!(error = %mcr_core::ErrorChain(&err), "no announcement before the first claim: the peer leases could not be listed");
            return;
        }
        if let Err(err) = self.write_lease(None).await {
            debug!(error = %mcr_core::ErrorChain(&err), "could not announce this replica before its first claim");
        }
        self.settle();
    }

    /// [`write`](Self::write), or with `None` the claim the Lease has (none if it is new).
    async fn write_lease(&mut self, claim: Option<&[Peer]>) -> Result<(), kube::Error> {
        let started = Instant::now();
        let left = write_bound(self.renewed, started, self.c.opts.renew_deadline);
        let opts = &self.c.opts;
        let weight = opts.weight;
        let annotations = claim::annotations(weight, claim.unwrap_or_default());
        let keep_claim = claim.is_none();
        let spec = LeaseSpec {
            holder_identity: Some(opts.identity.clone()),
            lease_duration_seconds: Some(crate::lease::seconds(opts.lease_duration)),
            renew_time: Some(crate::lease::now()),
            ..LeaseSpec::default()
        };
        let name = opts.lease_name();
        let api = self.api.clone();
        let previous = self.mine.clone();
        let labels = BTreeMap::from([(GROUP_LABEL.to_owned(), opts.group.clone())]);
        let attempt = async move {
            let mut known = previous;
            // Written over meanwhile (a conflict: someone else changed this Lease, by hand or
            // by relabelling it): read it again and write at once, once, still within the
            // bound, rather than after the pause of a failed step.
            let mut retried = false;
            loop {
                let mut lease = match known.take() {
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
                lease.metadata.annotations = Some(match lease.metadata.annotations.as_ref() {
                    Some(had) if keep_claim => claim::annotations(weight, &claim::read_claim(had)),
                    _ => annotations.clone(),
                });
                lease.metadata.labels = Some(labels.clone());
                lease.spec = Some(spec.clone());
                match api.replace(&name, &PostParams::default(), &lease).await {
                    Err(kube::Error::Api(s)) if s.code == 409 && !retried => retried = true,
                    answer => return answer,
                }
            }
        };
        let result = match tokio::time::timeout(left, attempt).await {
            Ok(r) => r,
            Err(_) => Err(kube::Error::Service(
                "renewing the peer lease timed out".into(),
            )),
        };
        match result {
            Ok(lease) => {
                // Written twice without the watch showing the first: it is deaf.
                self.deaf |= self.unheard.is_some();
                self.unheard = lease.metadata.resource_version.clone();
                self.mine = Some(lease);
                self.renewed = Some(started);
                self.c.renewed_until(started + self.c.opts.renew_deadline);
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

    /// Publishes a Warning Event about this replica's Lease on the host (best effort, bounded
    /// by the renew deadline: an Event that cannot be written is logged, nothing else).
    pub(super) async fn event(&self, reason: &str, note: &str) {
        let Some(lease) = &self.mine else { return };
        let reference = kube::Resource::object_ref(lease, &());
        let reporter = kube::runtime::events::Reporter {
            controller: "mcr-sharding".into(),
            instance: Some(self.me().to_owned()),
        };
        let recorder = kube::runtime::events::Recorder::new(self.host.clone(), reporter);
        let event = kube::runtime::events::Event {
            type_: kube::runtime::events::EventType::Warning,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Handoff".into(),
            secondary: None,
        };
        let published = tokio::time::timeout(
            self.c.opts.renew_deadline,
            recorder.publish(&event, &reference),
        )
        .await;
        if !matches!(published, Ok(Ok(()))) {
            warn!(
                reason,
                "could not publish the event about this replica's lease"
            );
        }
    }

    pub(super) fn metrics(&self) -> Option<ShardMetrics> {
        self.c
            .metrics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs the protocol until `token` fires.
    pub(super) async fn run(&mut self, token: &CancellationToken) {
        let selector = self.selector();
        let config = watcher::Config::default().labels(&selector);
        let open =
            |api: &Api<Lease>| mcr_core::watch(api.clone(), config.clone()).default_backoff();
        let mut events = Box::pin(open(&self.api));
        let opts = self.c.opts.clone();
        // Listen before claiming: a live peer whose Lease is missing (deleted by hand) writes
        // it again within its renew deadline, or has fenced itself by then. A replica that
        // claimed at once could not know of it, and would claim (and engage) what it holds.
        let first_claim = Instant::now() + opts.renew_deadline;
        self.announce().await;
        let mut next_renew = first_claim;
        // After a failed step, nothing is tried again before this.
        let mut retry_at = first_claim;
        loop {
            let now = Instant::now();
            // Self-fencing: not renewed within the renew deadline → own nothing, before any
            // peer can take the clusters over (they wait for the lease duration).
            if self.renewed.is_some() && !self.fresh(now) && self.active_since.is_some() {
                warn!(deadline = ?opts.renew_deadline, "peer lease not renewed in time: releasing every cluster");
                self.active_since = None;
            }
            // Whatever changed while this loop waited (a peer expired, fencing) is published.
            self.settle();
            let view = self.view(now);
            let active = self.active_since.is_some();
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
                if std::mem::take(&mut self.deaf) && !self.watch_failing {
                    // Peers that joined or left since are learned from a consistent list, and
                    // the watch starts over.
                    warn!(namespace = %self.namespace, "the peer lease watch has not shown this replica's own renewals: listing the peers and watching again");
                    events = Box::pin(open(&self.api));
                    self.unheard = None;
                    if let Err(err) = self.list().await {
                        warn!(error = %mcr_core::ErrorChain(&err), namespace = %self.namespace, "could not list the peer leases");
                    }
                }
                continue;
            }
            // Sleep until: the next renewal, the next expiry of a peer, the fencing deadline.
            let mut wake = next_renew;
            if changed {
                wake = wake.min(retry_at);
            }
            if let Some(expiry) = self.peers.next_expiry(now) {
                wake = wake.min(expiry);
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
        self.watch_failing = event.is_err();
        match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                self.heard(&lease);
                // A claim released lets the gates engage; a new peer makes them release.
                self.peers.observe(&lease, Instant::now());
                self.settle();
            }
            Ok(watcher::Event::Delete(lease)) => {
                self.peers.forget(&lease, Instant::now());
                self.settle();
            }
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

    /// Takes in a Lease the watch showed: this replica's own, as new as its last write, is
    /// the watch's proof of life.
    fn heard(&mut self, lease: &Lease) {
        let mine = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(self.me());
        if mine
            && let (Some(seen), Some(written)) = (
                lease.metadata.resource_version.as_deref(),
                self.unheard.as_deref(),
            )
            && !mcr_core::older_version(seen, written)
        {
            self.unheard = None;
        }
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
}
