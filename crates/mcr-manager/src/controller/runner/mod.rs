//! The controller loop: one task per controller, owning its queue and all of its subscriptions.
//!
//! Everything the loop touches (engaged clusters, queue, watch streams, in-flight reconciles) is
//! owned by the one task, so nothing is locked per event. Clusters arrive as engagements over a
//! channel (from [`Runnable::engage`]) and leave when their engagement token fires.

use std::{
    collections::HashMap,
    fmt::{self, Debug},
    future::{Future, poll_fn},
    hash::Hash,
    marker::PhantomData,
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{
    FutureExt, StreamExt,
    stream::{BoxStream, FuturesUnordered, SelectAll},
};
use kube::{
    Resource,
    runtime::{controller::Action, reflector::ObjectRef},
};
use mcr_core::{BoxFuture, Cache, Cluster, ClusterId, ClusterName, Informer, is_cluster_not_found};
use serde::de::DeserializeOwned;
use tokio::{
    sync::mpsc,
    time::{Instant, MissedTickBehavior},
};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info_span, trace, warn};

use super::{
    action::requeue_after,
    context::Context,
    input::{Batch, Input, PrimaryFn, Scope},
    request::Request,
};
use crate::{
    error::BoxError,
    metrics::{ClusterMetrics, Metrics},
    queue::{Outcome, WorkQueue},
    runnable::Runnable,
};

/// How long one wait for a cluster's caches to sync lasts before it is reported and retried.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// How many queued watch events are taken in one go before the loop looks at other work.
const BATCH: usize = 256;

/// Decides whether a controller engages a cluster.
pub(crate) type ClusterFilter = Arc<dyn Fn(&ClusterName, &Cluster) -> bool + Send + Sync>;

/// Everything the builder decided.
pub(crate) struct Spec<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    pub(crate) name: String,
    pub(crate) primary: PrimaryFn<K>,
    pub(crate) inputs: Vec<Input<K>>,
    pub(crate) triggers: Vec<BoxStream<'static, Request<K>>>,
    pub(crate) concurrency: usize,
    pub(crate) debounce: Duration,
    pub(crate) include_host: bool,
    pub(crate) include_provider: bool,
    pub(crate) filter: Option<ClusterFilter>,
    pub(crate) retry_when_gone: bool,
    pub(crate) host: Cluster,
    pub(crate) metrics: Metrics,
}

struct Engagement {
    token: CancellationToken,
    name: ClusterName,
    cluster: Cluster,
}

/// A registered controller: the [`Runnable`] the manager starts.
pub(crate) struct ControllerTask<K, Ctx, R, P, Fut, E>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    spec: Mutex<Option<Spec<K>>>,
    name: String,
    include_host: bool,
    include_provider: bool,
    filter: Option<ClusterFilter>,
    reconcile: R,
    error_policy: P,
    data: Arc<Ctx>,
    tx: mpsc::UnboundedSender<Engagement>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Engagement>>>,
    _types: PhantomData<fn() -> (Fut, E)>,
}

impl<K, Ctx, R, P, Fut, E> ControllerTask<K, Ctx, R, P, Fut, E>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    R: Fn(Arc<K>, Context<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + 'static,
    P: Fn(Arc<K>, &E, Context<Ctx>) -> Action + Send + Sync + 'static,
{
    pub(crate) fn new(spec: Spec<K>, reconcile: R, error_policy: P, data: Arc<Ctx>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            name: spec.name.clone(),
            include_host: spec.include_host,
            include_provider: spec.include_provider,
            filter: spec.filter.clone(),
            spec: Mutex::new(Some(spec)),
            reconcile,
            error_policy,
            data,
            tx,
            rx: Mutex::new(Some(rx)),
            _types: PhantomData,
        }
    }

    fn wants(&self, name: &ClusterName, cluster: &Cluster) -> bool {
        let kind_ok = if name.is_host() {
            self.include_host
        } else {
            self.include_provider
        };
        kind_ok && self.filter.as_ref().is_none_or(|f| f(name, cluster))
    }

    async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), BoxError> {
        let taken = (
            self.spec.lock().ok().and_then(|mut s| s.take()),
            self.rx.lock().ok().and_then(|mut r| r.take()),
        );
        let (Some(spec), Some(mut rx)) = taken else {
            return Err(format!("controller {:?} was already started", self.name).into());
        };
        let mut lp = Loop {
            task: &*self,
            engaged_gauge: spec.metrics.engaged(&spec.name),
            spec,
            engaged: HashMap::new(),
            queue: WorkQueue::default(),
            streams: SelectAll::new(),
            gones: FuturesUnordered::new(),
            syncs: FuturesUnordered::new(),
        };
        lp.start_static_inputs(&stop);
        let mut inflight = FuturesUnordered::new();
        if self.wants(&ClusterName::host(), &lp.spec.host) {
            let host = lp.spec.host.clone();
            let e = Engagement {
                token: stop.child_token(),
                name: ClusterName::host(),
                cluster: host,
            };
            lp.engage(e);
        }
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        debug!(controller = %self.name, "controller started");
        loop {
            while inflight.len() < lp.spec.concurrency {
                let Some((cluster, key)) = lp.queue.pop() else {
                    break;
                };
                if let Some(fut) = lp.start_reconcile(cluster, key) {
                    inflight.push(fut);
                }
            }
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                Some(done) = inflight.next(), if !inflight.is_empty() => lp.finish(done),
                Some(e) = rx.recv() => lp.engage(e),
                Some((name, id)) = lp.gones.next(), if !lp.gones.is_empty() => lp.disengage(&name, id),
                Some(batch) = lp.streams.next(), if !lp.streams.is_empty() => {
                    let at = Instant::now() + lp.spec.debounce;
                    lp.push(batch, at);
                    for _ in 0..BATCH {
                        match lp.streams.next().now_or_never() {
                            Some(Some(batch)) => lp.push(batch, at),
                            _ => break,
                        }
                    }
                }
                () = poll_fn(|cx| lp.queue.poll_expired(cx)) => {}
                Some(s) = lp.syncs.next(), if !lp.syncs.is_empty() => lp.synced(s),
                _ = tick.tick() => lp.report_restarts(),
            }
        }
        // Graceful stop: take no more work, let in-flight reconciles finish, then stop watching.
        debug!(controller = %self.name, in_flight = inflight.len(), "controller stopping");
        while let Some(done) = inflight.next().await {
            lp.finish(done);
        }
        lp.streams.clear();
        for (_, e) in lp.engaged.drain() {
            e.token.cancel();
            lp.spec.metrics.forget_cluster(&e.metrics);
        }
        lp.engaged_gauge.set(0);
        debug!(controller = %self.name, "controller stopped");
        Ok(())
    }
}

impl<K, Ctx, R, P, Fut, E> Runnable for ControllerTask<K, Ctx, R, P, Fut, E>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    R: Fn(Arc<K>, Context<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + 'static,
    P: Fn(Arc<K>, &E, Context<Ctx>) -> Action + Send + Sync + 'static,
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

    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        // The host cluster is engaged by the loop itself, with the controller's lifetime.
        if name.is_host() || !self.wants(&name, &cluster) {
            return Ok(());
        }
        // A closed channel means the controller has stopped: nothing left to engage.
        let _ = self.tx.send(Engagement {
            token,
            name,
            cluster,
        });
        Ok(())
    }
}

/// One engaged cluster, as the loop sees it.
struct Engaged<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    cluster: Cluster,
    token: CancellationToken,
    primary: Informer<K>,
    ctx: Context<Ctx>,
    metrics: ClusterMetrics,
    restarts: Vec<Box<dyn Fn() -> u64 + Send + Sync>>,
}

/// A reconcile that ended.
struct Finished<K: Resource, Ctx, E> {
    cluster: ClusterName,
    key: Arc<ObjectRef<K>>,
    obj: Arc<K>,
    ctx: Context<Ctx>,
    result: std::thread::Result<Result<Action, E>>,
    elapsed: Duration,
}

type SyncDone = (
    ClusterName,
    ClusterId,
    u32,
    Option<Result<(), mcr_core::Error>>,
);

/// Shows a request without building one.
struct Shown<'a, K: Resource>(&'a ClusterName, &'a ObjectRef<K>);

impl<K: Resource> fmt::Display for Shown<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.1.namespace.as_deref().unwrap_or_default();
        write!(f, "cluster://{}/{}/{}", self.0, ns, self.1.name)
    }
}

struct Loop<'t, K, Ctx, R, P, Fut, E>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    task: &'t ControllerTask<K, Ctx, R, P, Fut, E>,
    spec: Spec<K>,
    engaged: HashMap<ClusterName, Engaged<K, Ctx>>,
    engaged_gauge: prometheus_client::metrics::gauge::Gauge,
    queue: WorkQueue<ObjectRef<K>>,
    streams: SelectAll<BoxStream<'static, Batch<K>>>,
    gones: FuturesUnordered<BoxFuture<'static, (ClusterName, ClusterId)>>,
    syncs: FuturesUnordered<BoxFuture<'static, SyncDone>>,
}

impl<K, Ctx, R, P, Fut, E> Loop<'_, K, Ctx, R, P, Fut, E>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    R: Fn(Arc<K>, Context<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + 'static,
    P: Fn(Arc<K>, &E, Context<Ctx>) -> Action + Send + Sync + 'static,
{
    /// Host-scoped inputs and raw triggers live as long as the controller.
    fn start_static_inputs(&mut self, stop: &CancellationToken) {
        let host = ClusterName::host();
        for input in self.spec.inputs.iter().filter(|i| i.scope == Scope::Host) {
            let sub = (input.subscribe)(&self.spec.host, &host);
            self.streams.push(
                sub.stream
                    .take_until(stop.clone().cancelled_owned())
                    .boxed(),
            );
        }
        for trigger in self.spec.triggers.drain(..) {
            self.streams.push(
                trigger
                    .map(Batch::One)
                    .take_until(stop.clone().cancelled_owned())
                    .boxed(),
            );
        }
    }

    fn engage(&mut self, e: Engagement) {
        if e.token.is_cancelled() {
            return;
        }
        let name = e.name;
        let mut metrics = None;
        if let Some(current) = self.engaged.get(&name) {
            if current.cluster.same_instance(&e.cluster) && !current.token.is_cancelled() {
                trace!(controller = %self.spec.name, cluster = %name, "already engaged");
                return;
            }
            debug!(controller = %self.spec.name, cluster = %name, "replacing cluster instance");
            current.token.cancel();
            metrics = Some(current.metrics.clone());
        }
        let token = e.token.child_token();
        let cluster = e.cluster;
        let primary = (self.spec.primary)(cluster.cache());
        let mut restarts = Vec::new();
        for input in self
            .spec
            .inputs
            .iter()
            .filter(|i| i.scope == Scope::Engaged)
        {
            let sub = (input.subscribe)(&cluster, &name);
            restarts.push(sub.restarts);
            self.streams.push(
                sub.stream
                    .take_until(token.clone().cancelled_owned())
                    .boxed(),
            );
        }
        let metrics =
            metrics.unwrap_or_else(|| self.spec.metrics.cluster(&self.spec.name, name.as_str()));
        let id = cluster.id();
        let gone_token = token.clone();
        let gone_name = name.clone();
        self.gones.push(Box::pin(async move {
            gone_token.cancelled().await;
            (gone_name, id)
        }));
        self.syncs.push(sync_check(
            cluster.cache().clone(),
            name.clone(),
            id,
            0,
            token.clone(),
        ));
        debug!(controller = %self.spec.name, cluster = %name, "cluster engaged");
        let ctx = Context::new(cluster.clone(), self.task.data.clone());
        self.engaged.insert(
            name,
            Engaged {
                cluster,
                token,
                primary,
                ctx,
                metrics,
                restarts,
            },
        );
        self.engaged_gauge.set(self.engaged.len() as i64);
    }

    fn disengage(&mut self, name: &ClusterName, id: ClusterId) {
        if self.engaged.get(name).is_none_or(|e| e.cluster.id() != id) {
            return; // an instance that was already replaced
        }
        if let Some(e) = self.engaged.remove(name) {
            let dropped = self.queue.remove_cluster(name);
            self.spec.metrics.forget_cluster(&e.metrics);
            debug!(controller = %self.spec.name, cluster = %name, dropped, "cluster disengaged");
        }
        self.engaged_gauge.set(self.engaged.len() as i64);
    }

    fn synced(&mut self, (name, id, attempt, result): SyncDone) {
        let Some(e) = self.engaged.get(&name).filter(|e| e.cluster.id() == id) else {
            return;
        };
        match result {
            None => {}
            Some(Ok(())) => {
                debug!(controller = %self.spec.name, cluster = %name, "caches synced");
            }
            Some(Err(err)) => {
                warn!(
                    controller = %self.spec.name, cluster = %name, error = %err, attempt,
                    "caches did not sync yet; the cluster stays engaged and is checked again"
                );
                let next = sync_check(
                    e.cluster.cache().clone(),
                    name,
                    id,
                    attempt.saturating_add(1),
                    e.token.clone(),
                );
                self.syncs.push(next);
            }
        }
    }

    fn report_restarts(&self) {
        for e in self.engaged.values() {
            let total: u64 = e.restarts.iter().map(|r| r()).sum();
            e.metrics
                .restarts
                .set(i64::try_from(total).unwrap_or(i64::MAX));
        }
    }

    fn push(&mut self, batch: Batch<K>, at: Instant) {
        match batch {
            Batch::One(r) => self.push_one(r, at),
            Batch::Many(all) => {
                for r in all {
                    self.push_one(r, at);
                }
            }
        }
    }

    fn push_one(&mut self, r: Request<K>, at: Instant) {
        let Some(e) = self.engaged.get(&r.cluster) else {
            trace!(controller = %self.spec.name, request = %r, "cluster not engaged; dropped");
            return;
        };
        self.queue.push(&r.cluster, r.object, at);
        e.metrics.depth.set(self.queue.ready_len(&r.cluster) as i64);
    }

    fn start_reconcile(
        &mut self,
        cluster: ClusterName,
        key: Arc<ObjectRef<K>>,
    ) -> Option<impl Future<Output = Finished<K, Ctx, E>> + use<K, Ctx, R, P, Fut, E>> {
        let Some(e) = self.engaged.get(&cluster) else {
            self.queue.done(&cluster, &key, Outcome::Success(None));
            return None;
        };
        e.metrics.depth.set(self.queue.ready_len(&cluster) as i64);
        let Some(obj) = e.primary.get(key.namespace.as_deref(), &key.name) else {
            trace!(controller = %self.spec.name, object = %Shown(&cluster, &key), "not in cache; skipped");
            self.queue.done(&cluster, &key, Outcome::Success(None));
            return None;
        };
        let ctx = e.ctx.clone();
        let span = info_span!(
            "reconcile",
            controller = %self.spec.name,
            cluster = %cluster,
            object = %Shown(&cluster, &key),
        );
        let reconcile = &self.task.reconcile;
        let created =
            std::panic::catch_unwind(AssertUnwindSafe(|| reconcile(obj.clone(), ctx.clone())));
        Some(
            async move {
                let started = Instant::now();
                let result = match created {
                    Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
                    Err(panic) => Err(panic),
                };
                Finished {
                    cluster,
                    key,
                    obj,
                    ctx,
                    result,
                    elapsed: started.elapsed(),
                }
            }
            .instrument(span),
        )
    }

    fn finish(&mut self, f: Finished<K, Ctx, E>) {
        let Finished {
            cluster,
            key,
            obj,
            ctx,
            result,
            elapsed,
        } = f;
        let Some(e) = self.engaged.get(&cluster) else {
            // The cluster left while this ran: nothing to retry against.
            debug!(controller = %self.spec.name, object = %Shown(&cluster, &key), "cluster left during reconcile");
            self.queue.done(&cluster, &key, Outcome::Success(None));
            return;
        };
        e.metrics.duration.observe(elapsed.as_secs_f64());
        let now = Instant::now();
        let outcome = match result {
            Ok(Ok(action)) => {
                e.metrics.success.inc();
                Outcome::Success(requeue_after(&action).map(|d| now + d))
            }
            Ok(Err(err)) if !self.spec.retry_when_gone && is_cluster_not_found(&err) => {
                e.metrics.gone.inc();
                debug!(
                    controller = %self.spec.name, object = %Shown(&cluster, &key), error = %err,
                    "cluster not found; not retried"
                );
                Outcome::Failure(None)
            }
            Ok(Err(err)) => {
                e.metrics.error.inc();
                warn!(
                    controller = %self.spec.name, object = %Shown(&cluster, &key), error = %err,
                    "reconcile failed"
                );
                let action = (self.task.error_policy)(obj, &err, ctx);
                Outcome::Failure(requeue_after(&action).map(|d| now + d))
            }
            Err(panic) => {
                e.metrics.panic.inc();
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "<non-string panic>".to_owned());
                error!(
                    controller = %self.spec.name, object = %Shown(&cluster, &key), panic = %message,
                    "reconciler panicked; retrying with backoff"
                );
                Outcome::Backoff
            }
        };
        self.queue.done(&cluster, &key, outcome);
        if let Some(e) = self.engaged.get(&cluster) {
            e.metrics.depth.set(self.queue.ready_len(&cluster) as i64);
        }
    }
}

/// Waits for a cluster's caches to sync (after a backoff when retrying); `None` if the cluster
/// left meanwhile.
fn sync_check(
    cache: Cache,
    name: ClusterName,
    id: ClusterId,
    attempt: u32,
    token: CancellationToken,
) -> BoxFuture<'static, SyncDone> {
    Box::pin(async move {
        let wait = async {
            if attempt > 0 {
                let backoff = Duration::from_secs(1 << attempt.min(6));
                tokio::time::sleep(backoff).await;
            }
            cache.wait_for_sync(SYNC_TIMEOUT).await
        };
        let result = tokio::select! {
            r = wait => Some(r),
            () = token.cancelled() => None,
        };
        (name, id, attempt, result)
    })
}
