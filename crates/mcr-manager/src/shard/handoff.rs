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
    /// Waits until no cluster this replica does not own under the published snapshot is
    /// engaged any more (the gates stop them as they see the change) and every instance of
    /// them is gone (its contexts and in-flight reconciles dropped), bounded by `limit`.
    /// Driven by the instances' drops ([`Released::wait`](mcr_core::Released::wait)), not by
    /// polling. `false` if some cluster is still engaged then; in-flight work that outlives
    /// the limit (a reconcile that does not honour cancellation) is logged and left.
    pub(super) async fn released(
        &self,
        before: Vec<(ClusterName, mcr_core::Cluster)>,
        limit: Duration,
    ) -> bool {
        let deadline = Instant::now() + limit;
        let mut draining: Vec<(ClusterName, mcr_core::ClusterId, mcr_core::Released)> = Vec::new();
        let add = |draining: &mut Vec<_>, name: ClusterName, cluster: mcr_core::Cluster| {
            let id = cluster.id();
            if !self.c.owner(&name).is_owned() && draining.iter().all(|(_, i, _)| *i != id) {
                draining.push((name, id, cluster.released()));
            }
        };
        for (name, cluster) in before {
            add(&mut draining, name, cluster);
        }
        loop {
            // Engaged since `before` was taken, and not owned any more: drained too.
            for (name, cluster, _) in self.fleet.members().active() {
                add(&mut draining, name, cluster);
            }
            let Some((_, _, running)) = draining.iter().find(|(_, _, r)| !r.is_released()) else {
                return true;
            };
            if tokio::time::timeout_at(deadline, running.wait())
                .await
                .is_ok()
            {
                continue;
            }
            let held: Vec<ClusterName> = self
                .fleet
                .names()
                .into_iter()
                .filter(|n| !self.c.owner(n).is_owned())
                .collect();
            if !held.is_empty() {
                warn!(
                    clusters = held.len(),
                    "clusters not released within the grace period"
                );
                return false;
            }
            let running: Vec<&ClusterName> = draining
                .iter()
                .filter(|(_, _, r)| !r.is_released())
                .map(|(n, _, _)| n)
                .collect();
            warn!(clusters = ?running, grace = ?limit,
                "work of released clusters still running after the grace period (does a reconcile ignore cancellation?)");
            return true;
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
            .active()
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
            info!(peers = %claim::encode(&self.applied), epoch = epoch(&self.applied), "assignment applied");
            if let Some(m) = self.metrics() {
                m.epoch.set(epoch(&self.applied) as i64);
                m.handoff_seconds.observe(started.elapsed().as_secs_f64());
            }
        }
        true
    }
}
