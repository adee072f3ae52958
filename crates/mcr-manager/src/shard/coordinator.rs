//! [`Coordinator`]: this replica's side of the protocol (see the [module docs](super)): the
//! [`mcr_core::Coordinator`] answers built from the last published [`Snapshot`], and leaving the group.

use std::sync::{Arc, Mutex, RwLock};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, PostParams};
use mcr_core::ClusterName;
use mcr_core::Ownership;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::claim;
use super::hrw::{self, Peer};
use super::run::Run;
use super::{ShardMetrics, Sharding};
use crate::Fleet;

/// What this replica knows, published to the gates as one value.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Snapshot {
    /// Whether this replica may own anything: it renewed its Lease within the renew deadline
    /// and listed the peers after its last claim.
    pub(super) active: bool,
    /// The live peers (this replica included), sorted.
    pub(super) view: Vec<Peer>,
    /// The peer set this replica's Lease claims by (what it has applied).
    pub(super) applied: Vec<Peer>,
    /// The other live peers and the peer set each claims by.
    pub(super) others: Vec<(String, Vec<Peer>)>,
    /// The peer set this replica applied before `applied` (empty before its first): who
    /// owned a cluster before the last change, for the handoff log.
    pub(super) previous: Vec<Peer>,
}

/// This replica in the sharded group; the manager's [`mcr_core::Coordinator`].
pub(crate) struct Coordinator {
    pub(super) opts: Sharding,
    snapshot: RwLock<Arc<Snapshot>>,
    /// The renew deadline of the last successful write (updated at every renewal, without
    /// waking the gates).
    valid_until: Mutex<Option<Instant>>,
    version: watch::Sender<u64>,
    pub(super) metrics: Mutex<Option<ShardMetrics>>,
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

impl mcr_core::Coordinator for Coordinator {
    fn owner(&self, name: &ClusterName) -> Ownership {
        let snap = self.snapshot.read().unwrap_or_else(|p| p.into_inner());
        owner_in(&snap, &self.opts.identity, self.valid_until(), name)
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Past the renew deadline of the last successful write (or before the first), or fenced
    /// and not active again yet: this replica owns nothing, whether or not its coordinator
    /// has run since. (After a pause, the first write renews the Lease before the consistent
    /// list that makes the replica active again: the deadline alone would let reconciles run
    /// in between.)
    fn lapsed(&self) -> bool {
        self.valid_until()
            .is_none_or(|until| Instant::now() >= until)
            || !self
                .snapshot
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .active
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

    /// Records a successful write: this replica may own clusters until `until`. If the last
    /// deadline had passed meanwhile (the write straddled it), every answer given since was
    /// "elsewhere" with no change announced; the gates are woken to ask again, or a member
    /// parked in that window would stay parked until the next change of the peer set.
    pub(super) fn renewed_until(&self, until: Instant) {
        let was = self
            .valid_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(until);
        if was.is_some_and(|was| Instant::now() >= was) {
            info!("peer lease renewed after its renew deadline had passed: ownership asked again");
            self.version.send_modify(|v| *v += 1);
        }
    }

    pub(super) fn publish(&self, snap: Snapshot) {
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(snap);
        self.version.send_modify(|v| *v += 1);
    }

    pub(super) fn current(&self) -> Arc<Snapshot> {
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
                claim::mark_left(&mut lease);
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
    use std::time::Duration;

    use super::*;

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
