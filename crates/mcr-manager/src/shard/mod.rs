//! Sharding a fleet across replicas: each cluster is engaged and reconciled by exactly one
//! replica of the controller, chosen by weighted rendezvous hashing over the live replicas.
//!
//! Turn it on with [`ManagerBuilder::sharding`](crate::ManagerBuilder::sharding). Every
//! replica then runs the provider and the controllers (no leader election needed for them),
//! and the engagement path ([`mcr_core::coordinator`]) lets through only the clusters this replica
//! owns: a cluster owned by another replica keeps only its name and the provider's record,
//! with no client, TLS connection or informer.
//!
//! # The protocol
//!
//! Each replica (a *peer*) keeps one `coordination.k8s.io/v1` Lease on the host cluster,
//! `<group>-<identity>` in the configured namespace (default: the host client's namespace),
//! labelled `mcr.sigs.k8s.io/shard-group=<group>`. Besides the holder identity, the lease
//! duration and the renew time, it carries two annotations:
//!
//! - `mcr.sigs.k8s.io/shard-weight`: the peer's weight (its share of the fleet);
//! - `mcr.sigs.k8s.io/shard-claim`: the peer set (`id=weight,…`) this peer has *applied*.
//!   A peer's claim is a promise: it has engaged no cluster that rendezvous hashing over its
//!   claimed set gives to another peer.
//!
//! A peer watches the group's Leases. A peer is *live* while its Lease keeps changing: it is
//! taken for gone once its Lease has not changed for its lease duration *as measured on the
//! observer's monotonic clock* from the moment the observer saw the last change (as client-go's
//! leader election does), confirmed by a consistent list. A Lease that disappears (deleted by
//! hand, pruned by GitOps, or relabelled out of the group) counts as unchanged: the peer is
//! still live until its lease duration has passed, and writes its Lease again at its next
//! renewal. If the observer's watch has not shown the deletion (the watch lags, or hung), the
//! absence proves nothing about renewals it missed: the first consistent list that misses the
//! Lease restarts the peer's clock. (A watch delivers in order, so one that showed the
//! deletion showed every renewal before it.) Only a peer that *said* it left is gone at once: on a clean stop, after it
//! released everything, a peer writes `mcr.sigs.k8s.io/shard-left` on its Lease (claiming
//! nothing) and then deletes it. A peer named in another live peer's claim whose own Lease
//! this replica has not seen (deleted by hand, or not listed yet) is live too, claiming
//! nothing known, until its Lease appears or a consistent list has missed it for its lease
//! duration: so a replica that joins while a live peer's Lease is missing claims nothing that
//! peer holds, and the peer is not made to release clusters it never stopped owning. The
//! *view* is the sorted set of live peers and weights;
//! weighted rendezvous hashing over it gives each cluster one owner (when a peer joins or
//! leaves, only the clusters it gains or had move, about 1/N).
//!
//! A peer starting a run first **announces** itself and then **listens**. Once a consistent
//! list has shown it its peers, it renews its Lease with the claim it has (that of an earlier
//! run of the same identity, which its peers go on honouring) or creates it claiming nothing;
//! a replica that cannot list writes nothing. Then it watches the group's Leases for its renew
//! deadline before it claims anything. Two replicas starting together hear of each other
//! while they listen and claim with each other from their first claim. An *announced* peer
//! (its Lease claims nothing yet) counts in the view of a replica that is not active itself,
//! but in an active replica's view only once a claim names it: nothing is released to a
//! newcomer before it claims. Every live peer writes its Lease within its renew deadline (or
//! has fenced itself), so one whose Lease was missing when the newcomer started (deleted by
//! hand) is seen before the newcomer claims, and the newcomer neither claims what that peer
//! holds nor makes it release clusters it never stopped owning. A peer whose Lease was
//! already missing, without the watch showing the deletion, when this replica became active
//! (it may have claimed anything, this replica's share included if it took this replica for
//! gone while it was fenced) holds every cluster until it writes its Lease again or is gone.
//!
//! A renewal that meets a conflict (the Lease changed by hand) reads the Lease again and
//! writes at once. A replica's own renewals are its watch's proof of life: a watch that has
//! not shown the last one by the next (hung, or its request lost on the way) is opened again,
//! after a consistent list of the peers.
//!
//! When its view changes, a peer:
//!
//! 0. **lists** the group's Leases with a consistent read, and computes the view from it. A
//!    peer never claims before it has listed its peers: a replica starting, restarting or
//!    back from a fence would otherwise claim every cluster, and every other replica would
//!    release its whole share. If the list fails (a Role without `list`, a 429), no new claim
//!    is written; a peer that holds clusters renews the claim it has, which stays true;
//! 1. **releases** every cluster the new view gives to another peer: the engagement table
//!    stops them at once ([`Engagements::release_unowned`](mcr_core::Engagements::release_unowned):
//!    members' tokens cancelled, so informers close, controllers disengage and in-flight
//!    reconciles are cut at their next poll) and hands back every instance given away that
//!    may still be alive, members still being brought up included (activation asks the
//!    coordinator again under the table's lock, so none becomes active afterwards). The peer
//!    waits until every one is gone ([`Cluster::released`](mcr_core::Cluster::released): its
//!    tasks, contexts and in-flight reconciles dropped), woken by the instances' drops
//!    ([`Released::wait`](mcr_core::Released::wait)), not by polling. Work still running after
//!    `lease_duration - renew_deadline` fails the step: the peer renews the claim it has
//!    (still true) and tries again, so a slow drop (a starved runtime) delays the handoff but
//!    never overlaps. Only work that outlives the lease duration (a reconcile that ignores
//!    cancellation) is handed over anyway, so one stuck cluster cannot hold every other
//!    handoff for ever; that is said in a WARN log line, a Warning Event `HandoffForced` on the
//!    replica's Lease, and the `mcr_shard_forced_handoffs_total` counter;
//! 2. **claims** the new view: one Lease write, which is also its renewal;
//! 3. **lists** the group's Leases with a consistent read (a quorum read on a real API
//!    server);
//! 4. **engages** a cluster only when the new view *and* its own claim give it the cluster,
//!    and no other peer's claim gives that peer the cluster (that peer has not released it
//!    yet). A peer's claim is disregarded only once a consistent list has shown its Lease
//!    unchanged for its lease duration: a peer that merely looks silent through the watch
//!    (a lagging watch, or this process paused) leaves the view, so this replica releases or
//!    waits, but its claim still holds. As other peers release and re-claim, their Lease changes
//!    reach this peer through the watch, or first through the consistent list of its next
//!    renewal, and the remaining clusters are engaged: no polling loop. Every change of the
//!    answer to "who owns this cluster" is announced to the gates, a renewal that lands after
//!    the renew deadline had passed included (the gates asked meanwhile were told "elsewhere").
//!
//! What this replica knows of its peers (the watch, every consistent list, expiries, its own
//! claim and whether it may own anything) is one value, published to the gates through one
//! function after every change, so no path (a list made because the watch hung, say) can
//! change the view without the gates hearing of it. The engagement table also converges every
//! member on a timer, whatever was announced.
//!
//! The manager records an engagement only while this replica owns the cluster, under the same
//! lock a new snapshot is published with ([`Manager`](crate::Manager)'s `Aware::engage`
//! refuses others with `mcr_core::Error::NotOwned`), so a cluster coming up while ownership
//! moves is either seen by the release or refused. A Lease version older than one already
//! seen (a watch resumed after a partition replays what it missed) is ignored, so a peer's
//! claim never appears to shrink back, and the peers an old claim names are not taken back in. The Lease of a peer found gone (by a consistent list)
//! is deleted with a resourceVersion precondition, so a replica joining later does not wait
//! a lease duration for it.
//!
//! In steady state a peer writes its Lease once per renew period and nothing else: the host's
//! cost grows with the number of replicas, not of clusters. A change of the peer set costs
//! each peer one more write and two lists.
//!
//! The peer table holds one entry per peer, whatever the uptime: a watch relist does not
//! forget anyone (it is not a consistent read); a peer is forgotten by a consistent list
//! that misses its Lease after its lease duration.
//!
//! # Permissions
//!
//! Each replica's Role in the Leases' namespace needs `get`, `list`, `watch`, `create`,
//! `update` and `delete` on `coordination.k8s.io` `leases` (`deploy/components/sharding`).
//! Without `list` and `watch` a replica never learns its peers, so it never claims anything
//! (and says so at WARN), and the other replicas keep the fleet.
//!
//! **Self-fencing.** A peer that has not renewed its Lease for `renew_deadline` (counted from
//! the start of its last successful write; every write is cut off at that deadline) owns
//! nothing: all its clusters are released at once, before any other peer can take it for
//! gone (they wait `lease_duration > renew_deadline` from a moment after that write started).
//!
//! # Why no two replicas reconcile one cluster
//!
//! Assumptions (those of leader election): the replicas' clocks run at the same rate (not
//! necessarily in sync); a reconcile honours cancellation (it is dropped at its next poll when
//! its cluster is released, within the lease duration); the host API server is linearizable (a
//! list after a write sees that write).
//!
//! Suppose peers P and Q both have cluster X engaged at time t. Each engaged X only while its
//! own claim gave it X, so both Leases claimed X at t: P's claim was written at `w_P`, Q's at
//! `w_Q`, and neither withdrew it before t (a peer withdraws a claim only by writing a new one
//! after releasing). Say `w_P < w_Q`. Q engaged X after a consistent list that followed `w_Q`,
//! so that list showed P's claim on X; Q ignores a claim only from a peer it takes for gone,
//! i.e. whose Lease Q saw unchanged for the lease duration, confirmed by that list. Then P has
//! not renewed since before Q's observation window opened, so P's own renew deadline (shorter,
//! and counted from an earlier moment) passed earlier: P fenced itself and released X before Q
//! engaged it. Contradiction either way: at no t are both engaged.
//!
//! # Why no cluster is left behind
//!
//! When a peer dies, its Lease stops changing; after the lease duration every other peer's
//! view drops it, they release nothing (its clusters go only to them), claim the new view,
//! list, and each engages its share: within lease duration + one list + the member's sync.
//! When a peer joins, every peer sees its Lease through the watch, releases what the newcomer
//! gains and re-claims; the newcomer sees those claims through the watch and engages: within
//! about one renew period + sync. A peer that cannot make progress (release not finished,
//! write failed) retries after a short delay; while the views disagree, a cluster may be
//! unowned for a while, never doubly owned.
//!
//! # What this does not cover
//!
//! - Work that does not honour cancellation (a blocking call inside a reconcile, or a clone of
//!   its cluster kept after it returned) holds the handoff for up to the lease duration and
//!   then runs on after it (logged at WARN).
//! - A paused process (SIGSTOP) longer than the lease duration: on resume, ownership questions
//!   (engagement, [`Fleet::get`](crate::Fleet::get)) are answered "not owned" at once,
//!   as the renew deadline is checked on every question, and so is every poll of a reconcile
//!   ([`Coordinator::lapsed`](mcr_core::Coordinator::lapsed)): a reconcile in flight when the
//!   process paused is dropped at its first poll after resume, and none starts, before the
//!   coordinator has run (test `a_paused_replica_runs_no_reconcile_code_after_its_renew_deadline`;
//!   `cargo xtask chaos --replicas 3` checks it across processes). A request the reconcile
//!   had sent before the pause may still reach the API server: as with leader election,
//!   nothing on this side can fence that.
//! - A cluster being *brought up* when ownership moves is cancelled with it; one engagement
//!   attempt is wasted.
//! - Controllers and the provider run on every replica in sharded mode, leader or not. With
//!   leader election configured as well, it gates only the runnables that need a leader
//!   (they run on the elected replica alone); without it they run on every replica, as they
//!   do without sharding. Losing the leader Lease stops the replica, as it does unsharded.
//! - `mcr_shard_owned_clusters` and `mcr_shard_peers` are refreshed at every renewal.
//!
//! # Handoffs in the log
//!
//! Both sides log a handoff at INFO with `cluster`, `from` and `to`: `handoff: cluster
//! released` when this replica gives a cluster up (`to` is the new owner when known), and
//! `handoff: cluster taken over` when it engages a cluster that the assignment before the
//! current one gave to another replica (`from`; a replica that died is named too).

mod claim;
mod coordinator;
mod handoff;
mod hrw;
mod metrics;
mod options;
mod peers;
mod run;

pub(crate) use coordinator::Coordinator;
pub(crate) use metrics::ShardMetrics;
pub use options::Sharding;

/// A running coordinator of one manager run.
pub(crate) struct Running {
    coordinator: std::sync::Arc<Coordinator>,
    host: kube::Client,
    token: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// Starts `manager`'s coordinator, if it is sharded, until [`Running::leave`] (or `parent`
/// is cancelled).
pub(crate) fn start(
    manager: &crate::Manager,
    parent: &tokio_util::sync::CancellationToken,
) -> Option<Running> {
    let coordinator = manager.shard()?.clone();
    let host = manager.host().client();
    let token = parent.child_token();
    let task = tokio::spawn(coordinator.clone().run(
        host.clone(),
        manager.fleet().clone(),
        token.clone(),
    ));
    Some(Running {
        coordinator,
        host,
        token,
        task,
    })
}

impl Running {
    /// Stops the protocol (every member has stopped) and deletes this replica's Lease.
    pub(crate) async fn leave(self) {
        self.token.cancel();
        let _ = self.task.await;
        self.coordinator.leave(self.host).await;
    }
}
