//! Handoff: releasing what the new peer set gives to others, waiting until it is released,
//! claiming the new set and publishing it (steps 0 to 4 of the [module docs](super)).

use std::time::Duration;

use mcr_core::ClusterName;
use mcr_core::{Coordinator as _, Ownership};
use tokio::time::Instant;
use tracing::{info, warn};

use super::claim;
use super::hrw::Peer;
use super::run::{Run, epoch};

impl Run {
    /// Stops what this replica no longer owns under the published snapshot
    /// ([`release_unowned`](mcr_core::Engagements::release_unowned)) and waits until every
    /// instance of it is gone (its tasks, contexts and in-flight reconciles dropped), bounded
    /// by `limit`. Driven by the instances' drops ([`Released::wait`](mcr_core::Released::wait)),
    /// not by polling.
    ///
    /// `false` when work is still running then: the handoff waits, and the caller renews the
    /// claim it has (still true: this replica still holds those clusters) and tries again.
    /// Only work that outlives the lease duration this way (a reconcile that does not honour
    /// cancellation, or a clone of its cluster kept somewhere) is logged and left, so that one
    /// stuck cluster does not hold every other cluster's handoff for ever.
    pub(super) async fn released(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let unowned = self.fleet.members().release_unowned();
            if unowned.iter().all(|(_, r)| r.is_released()) {
                self.stuck_since = None;
                return true;
            }
            for (_, running) in &unowned {
                if tokio::time::timeout_at(deadline, running.wait())
                    .await
                    .is_err()
                {
                    break;
                }
            }
            if Instant::now() < deadline {
                // All of those are gone: asked again, for any stopped meanwhile.
                continue;
            }
            let running: Vec<&ClusterName> = unowned
                .iter()
                .filter(|(_, r)| !r.is_released())
                .map(|(n, _)| n)
                .collect();
            if running.is_empty() {
                continue;
            }
            let since = *self.stuck_since.get_or_insert_with(|| deadline - limit);
            if since.elapsed() < self.c.opts.lease_duration {
                warn!(clusters = ?running, waited = ?since.elapsed(),
                    "clusters given away are still running here: their handoff waits");
                return false;
            }
            warn!(clusters = ?running, waited = ?since.elapsed(),
                "work of released clusters still running after the lease duration (does a reconcile ignore cancellation?): handed over anyway");
            if let Some(m) = self.metrics() {
                m.forced.inc_by(running.len() as u64);
            }
            let note = format!(
                "handed over {} cluster(s) while work of theirs still ran here after {:?} \
                 (a reconcile that ignores cancellation?): {}",
                running.len(),
                since.elapsed(),
                running
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            self.event("HandoffForced", &note).await;
            self.stuck_since = None;
            return true;
        }
    }

    /// Renews the claim this replica has, if it has one and is active: while a handoff cannot
    /// go on, the claim stays true (it still holds what it claims) and keeps it from fencing
    /// itself.
    async fn renew_current(&mut self) {
        if self.active_since.is_some() && !self.applied.is_empty() {
            let claim = self.applied.clone();
            if let Err(err) = self.write(&claim).await {
                warn!(error = %mcr_core::ErrorChain(&err), "could not renew the peer lease");
            }
        }
    }

    /// The peer set to claim now: the live peers and, trying to stay alive, this one.
    pub(super) fn claim(&self, now: Instant) -> Vec<Peer> {
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
    pub(super) async fn apply(&mut self) -> bool {
        let started = Instant::now();
        if let Err(err) = self.list().await {
            warn!(
                error = %mcr_core::ErrorChain(&err),
                namespace = %self.namespace,
                "could not list the peer leases, so no new claim is made (the replica's Role needs list and watch on leases in this namespace)"
            );
            self.renew_current().await;
            return false;
        }
        let now = Instant::now();
        let view = self.claim(now);
        if view == self.applied && self.active_since.is_some() {
            // The list showed nothing new for this replica: a renewal. (What it showed, say
            // another peer releasing what it claimed before the watch did, was published by
            // the list.)
            return match self.write(&view).await {
                Ok(()) => {
                    self.settle();
                    true
                }
                Err(err) => {
                    warn!(error = %mcr_core::ErrorChain(&err), "could not renew the peer lease");
                    false
                }
            };
        }
        let previous = self.applied.clone();
        // 1. Release: publish the new view with the old claim (the list did). Nothing new is
        //    owned (a name is owned only if both claim and view give it to this replica).
        let before = self.fleet.names();
        self.settle();
        let grace = self.c.opts.release_grace();
        if !self.released(grace).await {
            self.renew_current().await;
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
        // 4. Engage: active under the new claim.
        self.active_since.get_or_insert(Instant::now());
        self.settle();
        if previous != self.applied {
            info!(peers = %claim::encode(&self.applied), epoch = epoch(&self.applied), "assignment applied");
            if let Some(m) = self.metrics() {
                m.epoch.set(epoch(&self.applied) as i64);
                m.handoff_seconds.observe(started.elapsed().as_secs_f64());
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mcr_core::Coordinator as _;
    use mcr_envtest::TestCluster;

    use super::*;
    use crate::Fleet;
    use crate::shard::Sharding;
    use crate::shard::coordinator::{Coordinator, Snapshot};
    use crate::shard::hrw;

    /// Replica `id` of group `g` on `host`, with `deadline` as its renew deadline; its protocol
    /// is driven by the test, step by step.
    fn replica(host: &TestCluster, id: &str, deadline: Duration) -> (Arc<Coordinator>, Run) {
        let opts = Sharding::new("g")
            .identity(id)
            .lease_duration(deadline * 3 / 2)
            .renew_deadline(deadline)
            .renew_period(deadline / 2);
        let c = Arc::new(Coordinator::new(opts));
        let fleet = Fleet::new(mcr_core::Cluster::new("host", host.client()));
        let run = Run::new(c.clone(), host.client(), fleet);
        (c, run)
    }

    fn peers(ids: &[&str]) -> Vec<Peer> {
        ids.iter().map(|id| Peer::new(*id, 1)).collect()
    }

    /// A peer that releases what it claimed, seen first by this replica's renewal (its
    /// consistent list), not by the watch: the clusters it gave up are this replica's at once,
    /// and the gates are told. The watch's event that follows carries the same version and
    /// changes nothing, so a renewal that kept the release to itself left them unengaged until
    /// the next change of the peer set (B13 at 100,000 clusters: 97 clusters of a killed
    /// replica never re-owned).
    #[tokio::test]
    async fn a_claim_released_and_first_seen_by_a_renewal_is_announced() {
        let host = TestCluster::start("host").await.unwrap();
        let (c1, mut r1) = replica(&host, "r1", Duration::from_secs(10));
        let (_c2, mut r2) = replica(&host, "r2", Duration::from_secs(10));
        let both = peers(&["r1", "r2"]);
        // r2 came first and claims every cluster; r1 joins and applies both.
        r2.write(&peers(&["r2"])).await.unwrap();
        assert!(r1.apply().await);
        let names: Vec<ClusterName> = (0..64).map(|i| format!("c{i}").into()).collect();
        let r1s: Vec<&ClusterName> = names
            .iter()
            .filter(|n| hrw::owner(&both, n).is_some_and(|p| p.id == "r1"))
            .collect();
        assert!(!r1s.is_empty());
        assert!(
            r1s.iter().all(|n| !c1.owner(n).is_owned()),
            "r2 still claims them"
        );
        let mut changes = c1.changes();
        changes.borrow_and_update();
        // r2 applies both: it released r1's share. r1's next renewal lists it.
        r2.write(&both).await.unwrap();
        assert!(r1.apply().await);
        let still: Vec<_> = r1s.iter().filter(|n| !c1.owner(n).is_owned()).collect();
        assert!(
            still.is_empty(),
            "released by r2 and listed by r1, but not owned by r1: {still:?}"
        );
        assert!(changes.has_changed().unwrap(), "the gates were not told");
    }

    /// A renewal that lands once the renew deadline has passed turns every "elsewhere" given
    /// meanwhile back into "owned" with no change of the peer set. The gates must be told: a
    /// member asked about in that window (a worker at the top of its loop, an attempt refused
    /// at activation) was parked, and stays parked until something wakes the gates.
    #[tokio::test]
    async fn a_renewal_after_the_renew_deadline_wakes_the_gates() {
        let host = TestCluster::start("host").await.unwrap();
        let (c, mut run) = replica(&host, "r1", Duration::from_millis(600));
        let me = peers(&["r1"]);
        c.publish(Snapshot {
            active: true,
            view: me.clone(),
            applied: me.clone(),
            ..Snapshot::default()
        });
        run.write(&me).await.unwrap();
        let name = ClusterName::from("a");
        assert!(c.owner(&name).is_owned());
        let mut changes = c.changes();
        changes.borrow_and_update();
        // The deadline passes while nothing runs the protocol (a starved or paused process).
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            !c.owner(&name).is_owned(),
            "past the deadline: owns nothing"
        );
        run.write(&me).await.unwrap();
        assert!(c.owner(&name).is_owned());
        assert!(
            changes.has_changed().unwrap(),
            "owned again after the renewal, but the gates were not told"
        );
    }

    /// Simulation seed 3672: someone relabelled this replica's Lease by hand; the next renewal
    /// met a conflict, waited out the pause of a failed step, and missed the renew deadline
    /// under latency: the replica released everything and engaged it all again. A conflict
    /// is met by reading the Lease again and writing at once.
    #[tokio::test]
    async fn a_renewal_over_a_lease_changed_by_hand_succeeds_at_once() {
        let host = TestCluster::start("host").await.unwrap();
        let (_c, mut run) = replica(&host, "r1", Duration::from_secs(10));
        let me = peers(&["r1"]);
        run.write(&me).await.unwrap();
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(host.client(), "default");
        let name = run.c.opts.lease_name();
        let patch = serde_json::json!({"metadata": {"labels": {claim::GROUP_LABEL: "elsewhere"}}});
        leases
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap();
        run.write(&me).await.expect("renewed over the change");
        let lease = leases.get(&name).await.unwrap();
        assert_eq!(
            lease.metadata.labels.unwrap_or_default()[claim::GROUP_LABEL],
            run.c.opts.group,
            "labelled for its group again"
        );
    }
}
