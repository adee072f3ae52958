//! Cluster engagement: subscribing a cluster's inputs, following its cache sync, and dropping
//! it (and its queued requests) when it leaves or is replaced.

use std::{collections::HashSet, fmt::Debug, hash::Hash, panic::AssertUnwindSafe, sync::Arc};

use futures::StreamExt;
use kube::{Resource, runtime::reflector::ObjectRef};
use mcr_core::{BoxFuture, Cluster, ClusterId, ClusterName, Informer};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, trace};

use mcr_core::panic_message;

use super::{
    Data, Engagement, Loop,
    member::{Instance, Member, Phase},
    passes,
};
use crate::{
    Recorder,
    controller::{
        context::Context,
        input::{ErasedInformer, Scope},
        request::Request,
    },
    metrics::ClusterMetrics,
};

/// One engaged cluster, as the loop sees it.
pub(super) struct Engaged<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    pub(super) cluster: Cluster,
    pub(super) token: CancellationToken,
    pub(super) primary: Informer<K>,
    pub(super) ctx: Context<Ctx>,
    pub(super) metrics: ClusterMetrics,
    pub(super) restarts: Vec<Restarts>,
    /// The objects the instance this one replaced had in its primary cache, until this
    /// instance has synced: those it does not have then went away across the swap, and are
    /// queued (see `synced`).
    pub(super) replaced: Vec<Arc<K>>,
    /// Until the instance is active (engaged in the manager's table; the host always is):
    /// the keys that came due meanwhile, queued again once it is (see `activated`). Before,
    /// its reconciles would not find their own cluster, so none starts. Boxed: an active
    /// instance, the common case, holds just the pointer.
    #[allow(clippy::box_collection)] // one word in every engaged member, not six
    pub(super) held: Option<Box<HashSet<Arc<ObjectRef<K>>>>>,
    /// Cuts this instance's reconciles short: its token, unless the controller has a leave
    /// hook, which lets the reconciles of a member that left the fleet finish first (see
    /// `leave`).
    pub(super) cut: CancellationToken,
    /// Whether the member joined (an instance of it became active) since it last departed:
    /// only a member that joined departs.
    pub(super) joined: bool,
}

/// Counts an input's watch restarts in one cluster.
type Restarts = Box<dyn Fn() -> u64 + Send + Sync>;

/// A cluster the loop only watches (see `Loop::watch_only`).
pub(super) struct Watched {
    pub(super) id: ClusterId,
    pub(super) token: CancellationToken,
}

/// A replacement instance whose primary cache has listed: the cluster and its instance.
pub(super) type SyncDone = (ClusterName, ClusterId);

impl<K, Ctx> Loop<'_, K, Ctx>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    pub(super) fn engage(&mut self, e: Engagement) {
        if e.token.is_cancelled() {
            return;
        }
        let name = e.name;
        let host = name.is_host();
        if !self.spec.primary_scope.includes(host)
            || !passes(self.spec.primary_filter.as_ref(), &name, &e.cluster)
        {
            return self.watch_only(e.token, name, e.cluster);
        }
        let mut metrics = None;
        let mut replaced = Vec::new();
        let member = self.members.get(&name);
        // A member whose departure is under way joined: if this instance becomes active, it
        // is back.
        let mut joined = member.is_some_and(|m| matches!(m.phase, Phase::Departing(_)));
        match member.and_then(Member::instance) {
            Some(Instance::Engaged(current)) => {
                if current.cluster.same_instance(&e.cluster) && !current.token.is_cancelled() {
                    trace!(controller = %self.spec.name, cluster = %name, "already engaged");
                    return;
                }
                debug!(controller = %self.spec.name, cluster = %name, "replacing cluster instance");
                current.token.cancel();
                current.cut.cancel();
                metrics = Some(current.metrics.clone());
                replaced = current.primary.list();
                joined |= current.joined;
            }
            // Its watched instance is replaced by one reconciled here: its watches stop.
            Some(Instance::Watched(w)) => w.token.cancel(),
            None => {}
        }
        let token = e.token.child_token();
        let cut = if self.spec.on_leave.is_some() {
            CancellationToken::new()
        } else {
            token.clone()
        };
        let cluster = e.cluster;
        let Some(data) = self.data_for(&name, &cluster, &token) else {
            token.cancel();
            return;
        };
        let primary = (self.spec.primary)(cluster.cache());
        let (restarts, stores) = self.subscribe_inputs(&cluster, &name, &token, true);
        let metrics = metrics.unwrap_or_else(|| self.spec.metrics.cluster(&self.spec.name, &name));
        let id = cluster.id();
        self.forget_when_gone(&name, id, &token);
        if !replaced.is_empty() {
            // The objects the replaced instance had are compared once this one has listed:
            // at once when it was engaged through `Engagements` (which syncs a replacement before
            // engaging it, bounded by its sync timeout, the one sync gate); otherwise when its
            // primary cache lists, for as long as the instance is engaged.
            self.syncs
                .push(listed(primary.clone(), name.clone(), id, token.clone()));
        }
        let held = (!name.is_host()).then(Box::default);
        if held.is_some() {
            // Woken by the table's activation of this instance, or its token firing.
            let until = self.spec.fleet.until_engaged(&name, &cluster);
            let (left, name) = (token.clone(), name.clone());
            self.actives.push(Box::pin(async move {
                tokio::select! {
                    () = until => {}
                    () = left.cancelled() => {}
                }
                (name, id)
            }));
        }
        debug!(controller = %self.spec.name, cluster = %name, "cluster engaged");
        let recorder = Recorder::reporting(&cluster, self.reporter.clone());
        let ctx = Context::in_fleet(name.clone(), cluster.clone(), self.spec.fleet.clone(), data)
            .with_primary(primary.clone())
            .with_stores(stores)
            .with_cancellation(token.clone())
            .with_recorder(recorder);
        let member = self.members.entry(name).or_insert_with(Member::new);
        if member.engaged().is_none() {
            self.engaged_gauge.inc();
        }
        member.put(Instance::Engaged(Box::new(Engaged {
            cluster,
            token,
            primary,
            ctx,
            metrics,
            restarts,
            replaced,
            held,
            cut,
            joined,
        })));
    }

    /// The user data of reconciles in this cluster; `None` if building it panicked (logged;
    /// the cluster is not engaged by this controller).
    fn data_for(
        &self,
        name: &ClusterName,
        cluster: &Cluster,
        token: &CancellationToken,
    ) -> Option<Arc<Ctx>> {
        match &self.task.data {
            Data::Shared(data) => Some(data.clone()),
            Data::PerCluster(make) => {
                let fleet = self.spec.fleet.clone();
                let ctx = Context::in_fleet(name.clone(), cluster.clone(), fleet, Arc::new(()))
                    .with_cancellation(token.clone());
                let built = std::panic::catch_unwind(AssertUnwindSafe(|| make(&ctx)));
                built
                    .inspect_err(|panic| {
                        error!(
                            controller = %self.spec.name, cluster = %name,
                            panic = %panic_message(panic.as_ref()),
                            "building the cluster's data panicked; the cluster is not reconciled"
                        );
                    })
                    .ok()
            }
        }
    }

    /// A cluster outside the reconciled type's scope: only the inputs whose scope includes it
    /// watch it (no primary cache, no queue, no reconciles there).
    fn watch_only(&mut self, parent: CancellationToken, name: ClusterName, cluster: Cluster) {
        let left = match self.members.get(&name).and_then(Member::instance) {
            Some(Instance::Watched(current)) => {
                if current.id == cluster.id() && !current.token.is_cancelled() {
                    return;
                }
                current.token.cancel();
                None
            }
            // Its engaged instance is replaced by one only watched here: it leaves now.
            Some(Instance::Engaged(current)) => {
                current.token.cancel();
                Some(current.cluster.id())
            }
            None => None,
        };
        if let Some(id) = left {
            self.disengage(&name, id);
        }
        let token = parent.child_token();
        self.subscribe_inputs(&cluster, &name, &token, false);
        let id = cluster.id();
        self.forget_when_gone(&name, id, &token);
        debug!(controller = %self.spec.name, cluster = %name, "cluster watched (no reconciles there)");
        let member = self.members.entry(name).or_insert_with(Member::new);
        member.put(Instance::Watched(Watched { id, token }));
    }

    /// Subscribes every input that watches `cluster` (a `target` when reconciles run there)
    /// until `token` fires; returns their restart counters, and the informers of those that
    /// watch `cluster` itself, in the order declared (see `Context::store`).
    fn subscribe_inputs(
        &mut self,
        cluster: &Cluster,
        name: &ClusterName,
        token: &CancellationToken,
        target: bool,
    ) -> (Vec<Restarts>, Vec<ErasedInformer>) {
        // Kept for the instance's life: no spare room (a `Vec` grown by a push has four slots).
        let mut restarts = Vec::with_capacity(self.spec.inputs.len());
        let mut stores = Vec::with_capacity(self.spec.inputs.len());
        for input in self.spec.inputs.iter() {
            if !input.scope.watches(name.is_host(), target)
                || !passes(input.filter.as_ref(), name, cluster)
            {
                continue;
            }
            let source = match input.scope {
                Scope::In(_) => cluster,
                Scope::HostPerCluster => &self.spec.host,
            };
            let sub = (input.subscribe)(source, name);
            restarts.push(sub.restarts);
            if matches!(input.scope, Scope::In(_)) {
                stores.push(sub.informer);
            }
            self.streams.push(
                sub.stream
                    .take_until(token.clone().cancelled_owned())
                    .boxed(),
            );
        }
        restarts.shrink_to_fit();
        stores.shrink_to_fit();
        (restarts, stores)
    }

    fn forget_when_gone(&mut self, name: &ClusterName, id: ClusterId, token: &CancellationToken) {
        let (gone_name, gone_token) = (name.clone(), token.clone());
        self.gones.push(Box::pin(async move {
            gone_token.cancelled().await;
            (gone_name, id)
        }));
    }

    /// The instance `id` of `name` left (its token fired): taken out of the member's entry,
    /// unless it was replaced already.
    pub(super) fn disengage(&mut self, name: &ClusterName, id: ClusterId) {
        let Some(member) = self.members.get_mut(name) else {
            return;
        };
        if member.instance().is_none_or(|i| i.id() != id) {
            return; // an instance that was already replaced
        }
        match member.take() {
            Some(Instance::Watched(_)) => {
                debug!(controller = %self.spec.name, cluster = %name, "cluster no longer watched");
            }
            Some(Instance::Engaged(e)) => {
                self.engaged_gauge.dec();
                let dropped = self.queue.remove_cluster(name);
                self.spec.metrics.forget_cluster(&e.metrics);
                debug!(controller = %self.spec.name, cluster = %name, dropped, "cluster disengaged");
                self.departed(name, *e);
            }
            None => {}
        }
        self.settle(name);
    }

    /// Drops the entry of `name` if nothing of it is left (see `Member::is_over`).
    pub(super) fn settle(&mut self, name: &ClusterName) {
        if self.members.get(name).is_some_and(Member::is_over) {
            self.members.remove(name);
        }
    }

    /// A replacement instance listed: the objects its predecessor had that it does not have
    /// went away across the swap, and no watch event reported it, so they are queued.
    pub(super) fn synced(&mut self, (name, id): SyncDone) {
        let Some(e) = (self.members.get_mut(&name))
            .and_then(Member::engaged_mut)
            .filter(|e| e.cluster.id() == id && !e.token.is_cancelled() && e.primary.is_synced())
        else {
            return;
        };
        let gone: Vec<ObjectRef<K>> = std::mem::take(&mut e.replaced)
            .iter()
            .filter(|o| {
                let meta = o.meta();
                let name = meta.name.as_deref().unwrap_or_default();
                e.primary.get(meta.namespace.as_deref(), name).is_none()
            })
            .map(|o| ObjectRef::from_obj_with(o.as_ref(), self.spec.dyntype.clone()))
            .collect();
        if !gone.is_empty() {
            debug!(controller = %self.spec.name, cluster = %name, gone = gone.len(),
                "objects gone while the cluster's instance was replaced are queued");
            let at = tokio::time::Instant::now();
            for object in gone {
                self.push_one(Request::new(name.clone(), object), at);
            }
        }
    }

    /// The instance became active in the manager's table: its held keys are queued again (as
    /// initial-list requests, which they were).
    pub(super) fn activated(&mut self, (name, id): SyncDone) {
        if !(self.members.get(&name).and_then(Member::engaged))
            .is_some_and(|e| e.cluster.id() == id && !e.token.is_cancelled())
        {
            return;
        }
        // Back before its departure was over: active once it is.
        if self.rejoining(&name) {
            return;
        }
        self.activate(&name);
    }

    /// Activates the engaged instance of `name`, unless it left.
    pub(super) fn activate(&mut self, name: &ClusterName) {
        let Some(e) = (self.members.get_mut(name))
            .and_then(Member::engaged_mut)
            .filter(|e| !e.token.is_cancelled())
        else {
            return;
        };
        let held = e.held.take().map(|held| *held).unwrap_or_default();
        e.joined = true;
        let at = tokio::time::Instant::now();
        for key in held {
            let key = Arc::unwrap_or_clone(key);
            if self.spec.live_first {
                self.queue.push_initial(name, key, at);
            } else {
                self.queue.push(name, key, at);
            }
        }
        e.metrics.depth.set(self.queue.ready_len(name) as i64);
        trace!(controller = %self.spec.name, cluster = %name, "cluster active: reconciles start");
        self.run_join_hook(name);
    }

    pub(super) fn report_restarts(&self) {
        for e in self.members.values().filter_map(Member::engaged) {
            let total: u64 = e.restarts.iter().map(|r| r()).sum();
            e.metrics
                .restarts
                .set(i64::try_from(total).unwrap_or(i64::MAX));
        }
    }
}

/// Resolves once `primary` has listed, or its instance left (its token fired).
fn listed<K>(
    primary: Informer<K>,
    name: ClusterName,
    id: ClusterId,
    token: CancellationToken,
) -> BoxFuture<'static, SyncDone>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    Box::pin(async move {
        tokio::select! {
            _ = primary.wait_for_sync(std::time::Duration::MAX) => {}
            () = token.cancelled() => {}
        }
        (name, id)
    })
}
