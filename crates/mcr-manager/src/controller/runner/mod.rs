//! The controller loop: one task per controller, owning its queue and all of its subscriptions.
//!
//! Everything the loop touches (its members, queue, watch streams, the set of in-flight
//! reconciles) is owned by the one task, so nothing is locked per event. Each reconcile runs
//! on a task of its own (so a controller's reconciles use every core of a multi-thread
//! runtime) and hands its outcome back to the loop, which alone decides the key's next step.
//! Clusters arrive as engagements over a channel (from [`Runnable::engage`]) and leave when
//! their engagement token fires. A member's whole state in the loop (its instance, its
//! departure, its reconciles in flight) is one entry of one table (see `member`).
//!
//! The loop is split by concept:
//! - `intake`: watch events and raw triggers become queued requests;
//! - `reconcile`: a popped request becomes a reconcile, and its outcome the queue's next step;
//! - `member`: one member's entry: its phase (present, departing, gone) and its reconciles in
//!   flight;
//! - `engage`: clusters join (their inputs are subscribed), sync, are replaced, and leave;
//! - `leave`: departures, their drains and leave hooks, and members that come back meanwhile;
//! - `slots`: which cluster may start a reconcile (the per-cluster cap, stalled clusters).

mod engage;
mod intake;
mod leave;
mod limits;
mod member;
mod reconcile;
mod reconciler;
mod slots;
mod sweep;

pub(crate) use super::target::Target;
pub(crate) use limits::Limits;
pub(crate) use reconciler::{Reconciler, erase};

use std::{
    collections::HashMap, fmt::Debug, future::poll_fn, hash::Hash, sync::Arc, time::Duration,
};

use futures::{
    FutureExt, StreamExt,
    stream::{BoxStream, FuturesUnordered, SelectAll},
};
use kube::{Resource, runtime::reflector::ObjectRef};
use mcr_core::{Aware, BoxFuture, Cluster, ClusterId, ClusterName};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::{
    sync::mpsc,
    task::JoinSet,
    time::{Instant, MissedTickBehavior},
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use self::engage::SyncDone;
use self::member::{Instance, Member};
use self::slots::Slots;
pub(crate) use super::scope::{ClusterFilter, passes};
use super::{
    context::Context,
    input::{Arrival, Input, OpenFn, PrimaryFn, Scope},
    membership::{JoinFn, LeaveFn, Sweep},
    recorder::Recorder,
    request::Request,
};
use crate::{error::BoxError, metrics::Metrics, queue::WorkQueue, runnable::Runnable};

/// How many queued watch events are taken in one go before the loop looks at other work.
const BATCH: usize = 256;

/// Everything the builder decided.
pub(crate) struct Spec<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    pub(crate) name: String,
    pub(crate) primary: PrimaryFn<K>,
    /// The reconciled type's dynamic type (for keys the loop makes itself).
    pub(crate) dyntype: K::DynamicType,
    /// Where reconciles run (the reconciled type's scope).
    pub(crate) primary_scope: crate::ClusterScope,
    /// Which provider clusters reconciles run in (the reconciled type's own filter).
    pub(crate) primary_filter: Option<ClusterFilter>,
    pub(crate) inputs: Vec<Input<K>>,
    pub(crate) triggers: Vec<BoxStream<'static, Request<K>>>,
    pub(crate) concurrency: usize,
    pub(crate) debounce: Duration,
    /// Where the controller engages at all: the union of its inputs' scopes.
    pub(crate) engaged: crate::ClusterScope,
    /// Which provider clusters the controller engages (`Builder::cluster_filter`).
    pub(crate) filter: Option<ClusterFilter>,
    /// Whether the manager shards the fleet across replicas (then it needs no leader).
    pub(crate) sharded: bool,
    pub(crate) retry_when_gone: bool,
    /// Whether initial-list requests wait behind live changes (`Builder::live_changes_first`).
    pub(crate) live_first: bool,
    pub(crate) on_outcome: Vec<crate::controller::outcome::OutcomeHook<K>>,
    /// Queues requests when a member joins (`Builder::on_join`).
    pub(crate) on_join: Option<JoinFn<K>>,
    /// Runs when a member leaves (`Builder::on_leave`).
    pub(crate) on_leave: Option<LeaveFn>,
    /// Runs on a timer with the members the fleet wants (`Builder::sweep`).
    pub(crate) sweep: Option<Sweep>,
    pub(crate) limits: Limits,
    /// The manager's provider: which members the fleet wants (for the sweep).
    pub(crate) provider: Option<Arc<dyn mcr_core::Provider>>,
    pub(crate) host: Cluster,
    pub(crate) fleet: crate::Fleet,
    pub(crate) metrics: Metrics,
}

/// The user data a controller's reconciles get: one value for every cluster, or one built per
/// engaged cluster (see `Builder::register_per_cluster`).
pub(crate) enum Data<Ctx> {
    Shared(Arc<Ctx>),
    PerCluster(DataFn<Ctx>),
}

/// Builds one cluster's user data from its context.
pub(crate) type DataFn<Ctx> = Arc<dyn Fn(&Context) -> Arc<Ctx> + Send + Sync>;

struct Engagement {
    token: CancellationToken,
    name: ClusterName,
    cluster: Cluster,
}

/// A registered controller: the [`Runnable`] the manager starts.
pub(crate) struct ControllerTask<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    spec: Mutex<Option<Spec<K>>>,
    name: String,
    /// Opens the informers a provider cluster needs, as it is engaged (see `Runnable::engage`),
    /// each where its input's cluster filter lets it.
    opens: Vec<(OpenFn, Option<ClusterFilter>)>,
    engaged: crate::ClusterScope,
    filter: Option<ClusterFilter>,
    /// Whether the manager shards the fleet across replicas.
    sharded: bool,
    reconciler: Reconciler<K, Ctx>,
    data: Data<Ctx>,
    /// Where engagements go: held (those still live) until the controller runs, then its
    /// loop's channel.
    inbox: Arc<Mutex<Inbox>>,
}

/// The engagements of a controller, before and after it runs.
enum Inbox {
    /// Not running yet (a standby waiting for the Lease, where members may be engaged
    /// read-only for a webhook server): engagements kept until it runs, each dropped when it
    /// ends, so a long wait holds no cluster that left.
    Waiting(Vec<Engagement>),
    /// Running: its loop receives them.
    Running(mpsc::UnboundedSender<Engagement>),
    /// Started once already.
    Taken,
}

impl<K, Ctx> ControllerTask<K, Ctx>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    pub(crate) fn new(spec: Spec<K>, reconciler: Reconciler<K, Ctx>, data: Data<Ctx>) -> Self {
        // What a provider cluster needs open: the primary informer where reconciles run, and
        // the informers of the inputs that watch provider clusters.
        let mut opens: Vec<(OpenFn, Option<ClusterFilter>)> = Vec::new();
        if spec.primary_scope.includes(false) {
            let primary = spec.primary.clone();
            let open: OpenFn = Arc::new(move |cache: &mcr_core::Cache| {
                primary(cache);
            });
            opens.push((open, spec.primary_filter.clone()));
        }
        opens.extend(
            (spec.inputs.iter())
                .filter(|i| matches!(i.scope, Scope::In(Some(s)) if s.includes(false)))
                .map(|i| (i.open.clone(), i.filter.clone())),
        );
        Self {
            name: spec.name.clone(),
            opens,
            engaged: spec.engaged,
            filter: spec.filter.clone(),
            sharded: spec.sharded,
            spec: Mutex::new(Some(spec)),
            reconciler,
            data,
            inbox: Arc::new(Mutex::new(Inbox::Waiting(Vec::new()))),
        }
    }

    fn wants(&self, name: &ClusterName, cluster: &Cluster) -> bool {
        // The scope says whether the host is engaged; the filter picks provider clusters.
        self.engaged.includes(name.is_host()) && passes(self.filter.as_ref(), name, cluster)
    }

    async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), BoxError> {
        let rx = {
            let mut inbox = self.inbox.lock();
            match std::mem::replace(&mut *inbox, Inbox::Taken) {
                Inbox::Waiting(held) => {
                    // In order: what came while waiting, then what comes from now on.
                    let (tx, rx) = mpsc::unbounded_channel();
                    for e in held.into_iter().filter(|e| !e.token.is_cancelled()) {
                        let _ = tx.send(e);
                    }
                    *inbox = Inbox::Running(tx);
                    Some(rx)
                }
                _ => None,
            }
        };
        let taken = (self.spec.lock().take(), rx);
        let (Some(spec), Some(mut rx)) = taken else {
            return Err(format!("controller {:?} was already started", self.name).into());
        };
        let mut lp = Loop {
            task: &*self,
            engaged_gauge: spec.metrics.engaged(&spec.name),
            reporter: Recorder::reporter(spec.name.clone()),
            queue: WorkQueue::with_debounce(spec.debounce),
            spec,
            members: HashMap::new(),
            slots: Slots::default(),
            streams: SelectAll::new(),
            gones: FuturesUnordered::new(),
            syncs: FuturesUnordered::new(),
            actives: FuturesUnordered::new(),
            drains: FuturesUnordered::new(),
            leaving: JoinSet::new(),
        };
        lp.start_static_inputs(&stop);
        let sweeping = lp.start_sweep(&stop);
        // One task per reconcile, joined here: the loop still starts and finishes every
        // reconcile, so the queue's per-key guarantees hold as if they were polled in place.
        let mut inflight = JoinSet::new();
        if self.wants(&ClusterName::host(), &lp.spec.host) {
            let host = lp.spec.host.clone();
            // Not a child of `stop`: the host does not leave when the controller stops, so its
            // in-flight reconciles get the shutdown grace; the loop cancels it at the end.
            let e = Engagement {
                token: CancellationToken::new(),
                name: ClusterName::host(),
                cluster: host,
            };
            lp.engage(e);
        }
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Stalls are noticed within a quarter of the stall period (at most a minute) after it
        // has passed.
        let check_every = (lp.spec.limits.stalled_after / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(60));
        let mut stall_check = tokio::time::interval(check_every);
        stall_check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        debug!(controller = %self.name, "controller started");
        loop {
            let cap = lp.spec.limits.per_cluster_cap(lp.spec.concurrency);
            // Reconciles of stalled clusters do not count (see `slots`).
            while lp.slots.counted() < lp.spec.concurrency {
                let members = &lp.members;
                let may_start =
                    |c: &ClusterName| (members.get(c)).is_none_or(|m| m.in_flight.may_start(cap));
                let Some((cluster, key, due)) = lp.queue.pop_due_where(may_start) else {
                    break;
                };
                if let Some(fut) = lp.start_reconcile(cluster, key, due) {
                    inflight.spawn(fut);
                }
            }
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                Some(done) = inflight.join_next(), if !inflight.is_empty() => {
                    lp.joined(done);
                    // Every other reconcile that ended meanwhile, in the same turn.
                    while let Some(done) = inflight.try_join_next() {
                        lp.joined(done);
                    }
                }
                Some(e) = rx.recv() => lp.engage(e),
                Some((name, id)) = lp.gones.next(), if !lp.gones.is_empty() => lp.disengage(&name, id),
                // Every branch above the watch events does bounded work, so a steady flood of
                // events can never starve requeues and backoffs coming due, syncs or the tick.
                () = poll_fn(|cx| lp.queue.poll_expired(cx)) => {}
                Some(s) = lp.syncs.next(), if !lp.syncs.is_empty() => lp.synced(s),
                Some(a) = lp.actives.next(), if !lp.actives.is_empty() => lp.activated(a),
                Some(name) = lp.drains.next(), if !lp.drains.is_empty() => lp.drain_expired(&name),
                Some(done) = lp.leaving.join_next(), if !lp.leaving.is_empty() => match done {
                    Ok(name) => lp.left(name),
                    // Its task catches the hook's panics; it is aborted only at the end.
                    Err(err) => warn!(controller = %self.name, error = %err, "leave hook task failed"),
                },
                _ = tick.tick() => lp.report_restarts(),
                _ = stall_check.tick() => lp.check_stalls(),
                Some(batch) = lp.streams.next(), if !lp.streams.is_empty() => {
                    let at = Instant::now(); // the queue adds the debounce period
                    lp.push(batch, at);
                    for _ in 0..BATCH {
                        match lp.streams.next().now_or_never() {
                            Some(Some(batch)) => lp.push(batch, at),
                            _ => break,
                        }
                    }
                }
            }
        }
        // Graceful stop: take no more work, let in-flight reconciles and leave hooks' attempts
        // finish (for a bounded grace, after which they are dropped; hooks are not retried),
        // then stop watching.
        debug!(controller = %self.name, in_flight = inflight.len(), "controller stopping");
        lp.abandon_departures();
        let grace = lp.spec.limits.shutdown_grace;
        let mut leaving = std::mem::take(&mut lp.leaving);
        let drain = async {
            while let Some(done) = inflight.join_next().await {
                lp.joined(done);
            }
            while leaving.join_next().await.is_some() {}
        };
        if tokio::time::timeout(grace, drain).await.is_err() {
            warn!(controller = %self.name, in_flight = inflight.len(), leaving = leaving.len(),
                grace = ?grace, "reconciles or leave hooks still running after the shutdown grace: dropped");
        }
        // Aborted, and waited for until dropped (each at its next await), before the
        // watches stop and the clusters' tokens fire.
        inflight.shutdown().await;
        leaving.shutdown().await;
        if let Some(sweeping) = sweeping {
            sweeping.abort();
        }
        lp.streams.clear();
        for (_, mut member) in lp.members.drain() {
            match member.take() {
                Some(Instance::Engaged(e)) => {
                    e.token.cancel();
                    lp.spec.metrics.forget_cluster(&e.metrics);
                }
                Some(Instance::Watched(w)) => w.token.cancel(),
                None => {}
            }
        }
        lp.engaged_gauge.set(0);
        debug!(controller = %self.name, "controller stopped");
        Ok(())
    }
}

impl<K, Ctx> Runnable for ControllerTask<K, Ctx>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn start(
        self: Arc<Self>,
        token: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(self.run(token))
    }

    fn aware(&self) -> Option<&dyn Aware> {
        Some(self)
    }

    /// Sharded, a controller runs on every replica (each on the clusters it owns); otherwise
    /// only on the leader.
    fn needs_leader_election(&self) -> bool {
        !self.sharded
    }
}

impl<K, Ctx> Aware for ControllerTask<K, Ctx>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        // The host cluster is engaged by the loop itself, with the controller's lifetime.
        if name.is_host() {
            return Ok(());
        }
        if !self.wants(&name, &cluster) {
            debug!(controller = %self.name, cluster = %name,
                "cluster not engaged by this controller: outside its cluster scope or filter");
            return Ok(());
        }
        // Open the informers now, so the engaging provider waits for them to sync before it
        // activates the cluster (`Engagements::add`); the loop subscribes to them later.
        for (open, filter) in &self.opens {
            if passes(filter.as_ref(), &name, &cluster) {
                open(cluster.cache());
            }
        }
        let e = Engagement {
            token,
            name,
            cluster,
        };
        match &mut *self.inbox.lock() {
            Inbox::Waiting(held) => {
                // Dropped when it ends, not when the controller runs: a standby may wait for
                // the Lease for as long as it lives.
                let (ended, inbox) = (e.token.clone(), Arc::downgrade(&self.inbox));
                tokio::spawn(async move {
                    ended.cancelled().await;
                    if let Some(inbox) = inbox.upgrade()
                        && let Inbox::Waiting(held) = &mut *inbox.lock()
                    {
                        held.retain(|e| !e.token.is_cancelled());
                    }
                });
                held.push(e);
            }
            // A closed channel means the controller has stopped: nothing left to engage.
            Inbox::Running(tx) => {
                let _ = tx.send(e);
            }
            Inbox::Taken => {}
        }
        Ok(())
    }
}

/// The state of one running controller, owned by its task (see the module docs).
struct Loop<'t, K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    task: &'t ControllerTask<K, Ctx>,
    spec: Spec<K>,
    /// Every member the loop holds anything of, one entry each (see `member`).
    members: HashMap<ClusterName, Member<K, Ctx>>,
    /// How many reconciles in flight count against `concurrency` (see `slots`).
    slots: Slots,
    engaged_gauge: prometheus_client::metrics::gauge::Gauge,
    /// Who reports this controller's events, in every cluster.
    reporter: Arc<kube::runtime::events::Reporter>,
    queue: WorkQueue<ObjectRef<K>>,
    streams: SelectAll<BoxStream<'static, Arrival<K>>>,
    gones: FuturesUnordered<BoxFuture<'static, (ClusterName, ClusterId)>>,
    syncs: FuturesUnordered<BoxFuture<'static, SyncDone>>,
    /// Members not yet active in the manager's table: each resolves when its instance is, or
    /// leaves (see `Engaged::held`).
    actives: FuturesUnordered<BoxFuture<'static, SyncDone>>,
    /// The bound of each departed member's drain: resolves with its name.
    drains: FuturesUnordered<BoxFuture<'static, ClusterName>>,
    /// The leave hooks running, each with its retries: resolves with the member's name.
    leaving: JoinSet<ClusterName>,
}

impl<K, Ctx> Loop<'_, K, Ctx>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// Starts the controller's sweep, if it has one and the manager a provider, until `stop`.
    fn start_sweep(&self, stop: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
        let sweep = self.spec.sweep.clone()?;
        let Some(provider) = self.spec.provider.clone() else {
            warn!(controller = %self.spec.name,
                "the controller has a sweep, but the manager no provider to say which members are wanted: it never runs");
            return None;
        };
        let timeout = (self.spec.limits.reconcile_timeout).unwrap_or(leave::DEFAULT_HOOK_TIMEOUT);
        let span = tracing::info_span!("sweep", controller = %self.spec.name);
        let run = sweep::run(
            self.spec.name.clone(),
            sweep,
            provider,
            self.spec.fleet.clone(),
            timeout,
            stop.clone(),
        );
        Some(tokio::spawn(tracing::Instrument::instrument(run, span)))
    }
}
