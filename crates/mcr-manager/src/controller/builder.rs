//! The controller builder.
//!
//! [`Controller::new`] gives a [`Start`]; `for_` picks the reconciled type and gives a
//! [`Builder<K>`]; `register` hands the finished controller to the manager. Because `owns` and
//! `watches` only exist after `for_`, and `for_` only before, those two classic mistakes do not
//! compile:
//!
//! ```compile_fail
//! # fn demo(mgr: mcr_manager::Manager) {
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! mcr_manager::Controller::new(&mgr).owns::<Secret>(); // owns without for_
//! # }
//! ```
//!
//! ```compile_fail
//! # fn demo(mgr: mcr_manager::Manager) {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! mcr_manager::Controller::new(&mgr).for_::<ConfigMap>().for_::<ConfigMap>(); // two for_
//! # }
//! ```

use std::{fmt::Debug, future::Future, hash::Hash, sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use kube::{
    Resource,
    api::PartialObjectMeta,
    runtime::{Predicate, controller::Action, reflector::ObjectRef},
};
use mcr_core::{Cache, Cluster, ClusterName, Informer, InformerOptions};
use serde::de::DeserializeOwned;

use super::{
    context::Context,
    input::{
        Batch, Input, InputFn, PredicateFn, PrimaryFn, Scope, erase_predicate, subscribe_filtered,
    },
    request::{IntoRequest, Request},
    runner::{ClusterFilter, ControllerTask, Spec},
};
use crate::{Error, Manager, error::BuilderError};

/// Entry point of the controller builder.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// # fn demo(mgr: mcr_manager::Manager) {
/// let builder = mcr_manager::Controller::new(&mgr).named("configmaps").for_::<ConfigMap>();
/// # }
/// ```
#[derive(Debug)]
pub struct Controller;

impl Controller {
    /// Starts building a controller that will run on `mgr`.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let start = mcr_manager::Controller::new(&mgr);
    /// # }
    /// ```
    #[allow(clippy::new_ret_no_self)]
    pub fn new(mgr: &Manager) -> Start {
        Start {
            mgr: mgr.clone(),
            name: None,
        }
    }
}

/// A controller builder before its reconciled type is chosen (see [`Controller::new`]).
#[derive(Debug)]
pub struct Start {
    mgr: Manager,
    name: Option<String>,
}

/// Selectors and a predicate for one watched input.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube::runtime::predicates;
/// use mcr_manager::WatchOptions;
///
/// let opts = WatchOptions::<Deployment>::new()
///     .labels("app=web")
///     .predicate(predicates::generation);
/// ```
pub struct WatchOptions<O> {
    informer: InformerOptions,
    predicate: Option<PredicateFn<O>>,
}

impl<O> Default for WatchOptions<O> {
    fn default() -> Self {
        Self {
            informer: InformerOptions::default(),
            predicate: None,
        }
    }
}

impl<O> Debug for WatchOptions<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchOptions")
            .field("informer", &self.informer)
            .field("predicate", &self.predicate.is_some())
            .finish()
    }
}

impl<O> WatchOptions<O> {
    /// No selectors, no predicate.
    ///
    /// ```
    /// let opts = mcr_manager::WatchOptions::<k8s_openapi::api::core::v1::Secret>::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Watch only objects matching this label selector.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Secret;
    /// let opts = mcr_manager::WatchOptions::<Secret>::new().labels("team=a,tier!=cache");
    /// ```
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.informer.label_selector = Some(selector.into());
        self
    }

    /// Watch only objects matching this field selector.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Secret;
    /// let opts = mcr_manager::WatchOptions::<Secret>::new().fields("type=Opaque");
    /// ```
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.informer.field_selector = Some(selector.into());
        self
    }

    /// Drop changes that leave the predicate's value unchanged (per cluster and object);
    /// any of `kube::runtime::predicates` works.
    ///
    /// ```
    /// # use k8s_openapi::api::apps::v1::Deployment;
    /// use kube::runtime::{Predicate, predicates};
    /// let opts = mcr_manager::WatchOptions::<Deployment>::new()
    ///     .predicate(predicates::generation.combine(predicates::labels));
    /// ```
    #[must_use]
    pub fn predicate(mut self, predicate: impl Predicate<O> + Send + Sync + 'static) -> Self {
        self.predicate = Some(erase_predicate(predicate));
        self
    }
}

impl Start {
    /// Names the controller (metrics, logs). Default: the lower-cased kind.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let start = mcr_manager::Controller::new(&mgr).named("copier");
    /// # }
    /// ```
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Reconcile `K`, triggered by changes to `K` in every engaged cluster.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = mcr_manager::Controller::new(&mgr).for_::<k8s_openapi::api::core::v1::ConfigMap>();
    /// # }
    /// ```
    pub fn for_<K>(self) -> Builder<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.for_with((), WatchOptions::default())
    }

    /// Like [`for_`](Self::for_), with a dynamic type (e.g. `DynamicObject` + `ApiResource`)
    /// and selectors / a predicate.
    ///
    /// ```no_run
    /// use kube::{api::{ApiResource, DynamicObject, GroupVersionKind}};
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let b = mcr_manager::Controller::new(&mgr)
    ///     .for_with::<DynamicObject>(ar, mcr_manager::WatchOptions::new());
    /// # }
    /// ```
    pub fn for_with<K>(self, dyntype: K::DynamicType, opts: WatchOptions<K>) -> Builder<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    {
        let informer = opts.informer.clone();
        let dt = dyntype.clone();
        let primary: PrimaryFn<K> =
            Arc::new(move |cache: &Cache| cache.informer_with::<K>(dt.clone(), informer.clone()));
        let open = primary.clone();
        let dt = dyntype.clone();
        let name = self
            .name
            .unwrap_or_else(|| K::kind(&dyntype).to_ascii_lowercase());
        let builder = Builder::new(self.mgr, name, dyntype, primary);
        builder.add_input(
            Scope::Engaged,
            move |cache| open(cache),
            opts.predicate,
            move |obj: &Arc<K>, cluster: &ClusterName| {
                let object = ObjectRef::from_obj_with(obj.as_ref(), dt.clone());
                Some(Batch::One(Request::new(cluster.clone(), object)))
            },
        )
    }

    /// Reconcile `K` from a metadata-only watch: the reconciler gets `PartialObjectMeta<K>`.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// use k8s_openapi::api::core::v1::Secret;
    /// let b = mcr_manager::Controller::new(&mgr).for_metadata::<Secret>(Default::default());
    /// # }
    /// ```
    pub fn for_metadata<K>(
        self,
        opts: WatchOptions<PartialObjectMeta<K>>,
    ) -> Builder<PartialObjectMeta<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let informer = opts.informer.clone();
        let primary: PrimaryFn<PartialObjectMeta<K>> =
            Arc::new(move |cache: &Cache| cache.metadata_informer::<K>((), informer.clone()));
        let open = primary.clone();
        let name = self
            .name
            .unwrap_or_else(|| K::kind(&()).to_ascii_lowercase());
        Builder::new(self.mgr, name, (), primary).add_input(
            Scope::Engaged,
            move |cache| open(cache),
            opts.predicate,
            |obj: &Arc<PartialObjectMeta<K>>, cluster: &ClusterName| {
                let object = ObjectRef::from_obj_with(obj.as_ref(), ());
                Some(Batch::One(Request::new(cluster.clone(), object)))
            },
        )
    }
}

/// A controller builder for the reconciled type `K` (see [`Controller::new`]).
pub struct Builder<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    mgr: Manager,
    name: String,
    dyntype: K::DynamicType,
    primary: PrimaryFn<K>,
    primary_watch: bool,
    inputs: Vec<Input<K>>,
    triggers: Vec<futures::stream::BoxStream<'static, Request<K>>>,
    concurrency: usize,
    debounce: Duration,
    include_host: bool,
    include_provider: bool,
    filter: Option<ClusterFilter>,
    retry_when_gone: bool,
}

impl<K> Debug for Builder<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("inputs", &self.inputs.len())
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

mod watches;

impl<K> Builder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    fn new(mgr: Manager, name: String, dyntype: K::DynamicType, primary: PrimaryFn<K>) -> Self {
        let has_provider = mgr.provider().is_some();
        Self {
            mgr,
            name,
            dyntype,
            primary,
            primary_watch: true,
            inputs: Vec::new(),
            triggers: Vec::new(),
            concurrency: 16,
            debounce: Duration::ZERO,
            include_host: !has_provider,
            include_provider: true,
            filter: None,
            retry_when_gone: false,
        }
    }

    fn add_input<O>(
        mut self,
        scope: Scope,
        open: impl Fn(&Cache) -> Informer<O> + Send + Sync + 'static,
        predicate: Option<PredicateFn<O>>,
        map: impl Fn(&Arc<O>, &ClusterName) -> Option<Batch<K>> + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        O::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let map = Arc::new(map);
        let subscribe: InputFn<K> = Arc::new(move |cluster: &Cluster, name: &ClusterName| {
            let informer = open(cluster.cache());
            let map = map.clone();
            let name = name.clone();
            subscribe_filtered(informer, predicate.clone(), move |o| map(o, &name))
        });
        self.inputs.push(Input { scope, subscribe });
        self
    }

    /// Renames the controller (metrics, logs, uniqueness within the manager).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.named("configmap-copier");
    /// # }
    /// ```
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// At most `n` reconciles at once across all clusters (default 16).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.concurrency(4);
    /// # }
    /// ```
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Waits this long after a watch event before reconciling, so bursts collapse into one
    /// reconcile (default: none).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.debounce(std::time::Duration::from_millis(200));
    /// # }
    /// ```
    #[must_use]
    pub fn debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// Whether the manager's host cluster is engaged (default: only when there is no provider).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.include_host(true);
    /// # }
    /// ```
    #[must_use]
    pub fn include_host(mut self, include: bool) -> Self {
        self.include_host = include;
        self
    }

    /// Whether the provider's clusters are engaged (default: yes).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.include_host(true).include_provider_clusters(false);
    /// # }
    /// ```
    #[must_use]
    pub fn include_provider_clusters(mut self, include: bool) -> Self {
        self.include_provider = include;
        self
    }

    /// Engage only the clusters for which `filter` returns true.
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.cluster_filter(|name, _cluster| name.as_str().starts_with("prod-"));
    /// # }
    /// ```
    #[must_use]
    pub fn cluster_filter(
        mut self,
        filter: impl Fn(&ClusterName, &Cluster) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.filter = Some(Arc::new(filter));
        self
    }

    /// Keep retrying (through the error policy) when a reconcile fails because its cluster
    /// is gone (`mcr_core::is_cluster_not_found`). Default: such reconciles end quietly.
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.retry_when_cluster_gone(true);
    /// # }
    /// ```
    #[must_use]
    pub fn retry_when_cluster_gone(mut self, retry: bool) -> Self {
        self.retry_when_gone = retry;
        self
    }

    /// Stop `for_` from triggering reconciles: the primary cache is still kept (the reconciler
    /// gets its objects from it), but only `owns`, `watches` and `reconcile_on` trigger.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// # use kube::runtime::reflector::ObjectRef;
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = mcr_manager::Controller::new(&mgr)
    ///     .for_::<ConfigMap>()
    ///     .without_primary_watch()
    ///     .watches::<Secret, _>(|s: Arc<Secret>, _| {
    ///         Some(ObjectRef::<ConfigMap>::new(s.metadata.name.as_deref().unwrap_or_default()))
    ///     });
    /// # }
    /// ```
    #[must_use]
    pub fn without_primary_watch(mut self) -> Self {
        // `for_*` always adds the primary watch first.
        if self.primary_watch && !self.inputs.is_empty() {
            self.inputs.remove(0);
            self.primary_watch = false;
        }
        self
    }

    /// Also reconcile every request this stream yields (any engaged cluster), like
    /// kube-runtime's `reconcile_on`.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::reflector::ObjectRef;
    /// # fn demo(b: mcr_manager::Builder<ConfigMap>) {
    /// let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    /// let b = b.reconcile_on(tokio_stream_like(rx));
    /// tx.send(mcr_manager::Request::new("east", ObjectRef::new("cm").within("default"))).ok();
    /// # }
    /// # fn tokio_stream_like<T: Send + 'static>(mut rx: tokio::sync::mpsc::UnboundedReceiver<T>)
    /// #   -> impl futures::Stream<Item = T> + Send + 'static {
    /// #   futures::stream::poll_fn(move |cx| rx.poll_recv(cx)) }
    /// ```
    #[must_use]
    pub fn reconcile_on(
        mut self,
        trigger: impl Stream<Item = Request<K>> + Send + 'static,
    ) -> Self {
        self.triggers.push(trigger.boxed());
        self
    }

    /// Checks the controller and hands it to the manager. It starts when the manager runs (or
    /// at once if the manager is already running) and receives every cluster engaged so far.
    ///
    /// `reconcile` and `error_policy` have kube-runtime's shapes, with [`Context`] in place of
    /// `Arc<Ctx>`.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::controller::Action;
    /// # use mcr_manager::Context;
    /// # async fn reconcile(_: Arc<ConfigMap>, _: Context<()>) -> Result<Action, kube::Error> { Ok(Action::await_change()) }
    /// # fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<()>) -> Action { Action::await_change() }
    /// # fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_manager::Error> {
    /// mcr_manager::Controller::new(&mgr)
    ///     .for_::<ConfigMap>()
    ///     .register(reconcile, error_policy, Arc::new(()))?;
    /// # Ok(()) }
    /// ```
    pub fn register<Ctx, R, P, Fut, E>(
        self,
        reconcile: R,
        error_policy: P,
        data: Arc<Ctx>,
    ) -> Result<(), Error>
    where
        Ctx: Send + Sync + 'static,
        R: Fn(Arc<K>, Context<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + 'static,
        P: Fn(Arc<K>, &E, Context<Ctx>) -> Action + Send + Sync + 'static,
    {
        let controller = self.name.clone();
        if self.concurrency == 0 {
            return Err(BuilderError::ZeroConcurrency { controller }.into());
        }
        if self.inputs.is_empty() && self.triggers.is_empty() {
            return Err(BuilderError::NoWatches { controller }.into());
        }
        if !self.include_host && !self.include_provider {
            return Err(BuilderError::NoClusters { controller }.into());
        }
        let spec = Spec {
            name: self.name,
            primary: self.primary,
            inputs: self.inputs,
            triggers: self.triggers,
            concurrency: self.concurrency,
            debounce: self.debounce,
            include_host: self.include_host,
            include_provider: self.include_provider,
            filter: self.filter,
            retry_when_gone: self.retry_when_gone,
            host: self.mgr.local().clone(),
            metrics: self.mgr.metrics().clone(),
        };
        let task = ControllerTask::new(spec, reconcile, error_policy, data);
        self.mgr.add_controller(Arc::new(task))
    }
}
