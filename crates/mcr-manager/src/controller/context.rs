//! What a reconciler gets besides the object: its cluster, the fleet, and the user's data.

use std::{any::Any, fmt::Debug, hash::Hash, sync::Arc};

use kube::{Resource, runtime::reflector::ObjectRef};
use mcr_core::{Cluster, ClusterName, Informer};
use tokio_util::sync::CancellationToken;

use super::{input::ErasedInformer, store::Store};
use crate::{Fleet, Recorder};

/// The context of one reconcile: the cluster the object lives in, the rest of the fleet, and
/// the user's data.
///
/// Unlike kube-runtime's `Arc<Ctx>`, it does **not** dereference to the user's data: read it
/// with [`data`](Context::data). That keeps a ported controller from compiling while it still
/// reaches for a client in its data (which would talk to one cluster for every member):
///
/// ```compile_fail,E0615
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::{Api, runtime::controller::Action};
/// use mcr_manager::Context;
///
/// struct Data { client: kube::Client }
///
/// async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, kube::Error> {
///     // error[E0615]: attempted to take value of method `client` on type `Context<Data>`
///     // help: use parentheses to call the method: `client()`
///     let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
///     Ok(Action::await_change())
/// }
/// ```
///
/// The client comes from [`Context::client`] (the object's cluster); the host and the other
/// clusters from [`host`](Context::host) and [`cluster`](Context::cluster), synchronously:
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::{Api, runtime::controller::Action};
/// use mcr_manager::Context;
///
/// struct Data { greeting: String }
///
/// async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, kube::Error> {
///     let here: Api<ConfigMap> = Api::default_namespaced(ctx.client());
///     let host: Api<ConfigMap> = Api::default_namespaced(ctx.host().client());
///     tracing::info!(cluster = %ctx.cluster_name(), "{}", ctx.data().greeting);
///     Ok(Action::await_change())
/// }
/// ```
pub struct Context<T = ()> {
    cluster: Cluster,
    name: ClusterName,
    fleet: Fleet,
    data: Arc<T>,
    /// The controller's primary informer in this cluster, if any.
    primary: Option<Primary>,
    /// The informers of the controller's inputs that watch this cluster, in the order declared
    /// (see [`store`](Context::store)).
    stores: Arc<[ErasedInformer]>,
    cancel: CancellationToken,
    recorder: Recorder,
}

/// Whether a namespace (`None`: cluster-scoped objects) is watched.
type Covers = Arc<dyn Fn(Option<&str>) -> bool + Send + Sync>;

/// The controller's primary informer (an `Informer<K>`) and what it covers, type-erased.
#[derive(Clone)]
struct Primary {
    informer: Arc<dyn Any + Send + Sync>,
    covers: Covers,
}

impl<T> Context<T> {
    /// A context for a reconcile in `cluster`, alone in its fleet as the host (for unit tests
    /// of a reconciler; the runtime builds contexts itself).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(cluster: mcr_core::Cluster) {
    /// let ctx = mcr_manager::Context::new(cluster.clone(), Arc::new(()));
    /// assert_eq!(ctx.cluster_name(), cluster.name());
    /// # }
    /// ```
    pub fn new(cluster: Cluster, data: Arc<T>) -> Self {
        let name = cluster.name().clone();
        Self::in_fleet(name, cluster.clone(), Fleet::new(cluster), data)
    }

    /// A context for a reconcile in the cluster engaged under `name` in `fleet` (e.g. a
    /// manager's [`fleet`](crate::Manager::fleet)); the error of [`Fleet::get`](crate::Fleet::get)
    /// if none is.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_core::Error> {
    /// let ctx = mcr_manager::Context::engaged_as(mgr.fleet(), "kind#dev".into(), Arc::new(()))?;
    /// assert_eq!(ctx.cluster_name().as_str(), "kind#dev");
    /// # Ok(()) }
    /// ```
    pub fn engaged_as(
        fleet: &Fleet,
        name: ClusterName,
        data: Arc<T>,
    ) -> Result<Self, mcr_core::Error> {
        let cluster = fleet.get(&name)?;
        Ok(Self::in_fleet(name, cluster, fleet.clone(), data))
    }

    pub(crate) fn in_fleet(
        name: ClusterName,
        cluster: Cluster,
        fleet: Fleet,
        data: Arc<T>,
    ) -> Self {
        let recorder = Recorder::new(name.clone(), cluster.client(), "mcr");
        Self {
            cluster,
            name,
            fleet,
            data,
            primary: None,
            stores: Arc::new([]),
            cancel: CancellationToken::new(),
            recorder,
        }
    }

    /// This context with `recorder` as its [`recorder`](Self::recorder) (the runtime gives
    /// each controller one per cluster, reporting the controller's name).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(cluster: mcr_core::Cluster) {
    /// let recorder = mcr_manager::Recorder::new(cluster.name().clone(), cluster.client(), "my-controller");
    /// let ctx = mcr_manager::Context::new(cluster, Arc::new(())).with_recorder(recorder);
    /// assert_eq!(ctx.recorder().controller(), "my-controller");
    /// # }
    /// ```
    #[must_use]
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = recorder;
        self
    }

    /// Publishes Kubernetes Events into the object's cluster, reported by the controller's
    /// name; repeats are aggregated into a series and every write is bounded (see
    /// [`Recorder`]). Outside the runtime ([`Context::new`]) the reporter is `mcr`.
    ///
    /// ```no_run
    /// # async fn demo(ctx: mcr_manager::Context<()>, cm: k8s_openapi::api::core::v1::ConfigMap) {
    /// use kube::runtime::events::{Event, EventType};
    /// let event = Event { type_: EventType::Normal, reason: "Synced".into(), note: None,
    ///                     action: "Sync".into(), secondary: None };
    /// let _ = ctx.recorder().publish_for(&event, &cm).await;
    /// # }
    /// ```
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// This context with `token` as its cluster's cancellation (see [`Context::cancellation`]).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(cluster: mcr_core::Cluster) {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let ctx = mcr_manager::Context::new(cluster, Arc::new(())).with_cancellation(token.clone());
    /// token.cancel();
    /// assert!(ctx.cancellation().is_cancelled());
    /// # }
    /// ```
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The token cancelled when the object's cluster leaves the controller (removed, or
    /// replaced by a new instance), and at the latest once the controller has stopped. When the
    /// cluster leaves, the runtime drops the reconcile at its next await; hand the token to
    /// work the reconcile spawns so that it stops too.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let token = ctx.cancellation().clone();
    /// tokio::spawn(async move {
    ///     tokio::select! {
    ///         () = token.cancelled() => {}
    ///         () = async { /* long-running side work */ } => {}
    ///     }
    /// });
    /// # }
    /// ```
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Completes when [`cancellation`](Self::cancellation) fires.
    ///
    /// ```no_run
    /// # async fn demo(ctx: mcr_manager::Context<()>) {
    /// ctx.cancelled().await;
    /// # }
    /// ```
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// Attaches the controller's primary informer, for [`cached`](Self::cached).
    pub(crate) fn with_primary<K>(mut self, informer: Informer<K>) -> Self
    where
        K: Resource + Clone + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let covered = informer.clone();
        self.primary = Some(Primary {
            informer: Arc::new(informer),
            covers: Arc::new(move |ns: Option<&str>| covered.covers(ns)),
        });
        self
    }

    /// Attaches the informers of the controller's inputs in this cluster, for
    /// [`store`](Self::store).
    pub(crate) fn with_stores(mut self, stores: Vec<ErasedInformer>) -> Self {
        self.stores = stores.into();
        self
    }

    /// A reader of this cluster's cache of `O` **as the controller watches it**: the informer of
    /// the controller's first input of type `O` that watches this cluster (the reconciled type
    /// for `K`, then `owns*` and `watches*` inputs in the order declared), with that input's
    /// selectors and namespaces. Reading it makes no request and opens no watch: it is the
    /// controller's own. `None` when no input of the controller watches `O` in this cluster
    /// (read such objects through the API, or open an informer with
    /// `current_cluster().cache()`, which is then a watch of its own), and outside the runtime
    /// ([`Context::new`]). A metadata-only input is read as `O = PartialObjectMeta<T>`.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    /// # use kube::runtime::{controller::Action, reflector::ObjectRef};
    /// # use mcr_manager::Context;
    /// async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
    ///     // A `watches_with::<Pod, _>(WatchOptions::new().namespace("apps"), ..)` input.
    ///     let pods = ctx.store::<Pod>().expect("the controller watches Pods");
    ///     let web = pods.get(&ObjectRef::new("web").within("apps"));
    ///     let pending = pods.find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"));
    ///     Ok(Action::await_change())
    /// }
    /// ```
    pub fn store<O>(&self) -> Option<Store<O>>
    where
        O: Resource + Clone + Debug + Send + Sync + 'static,
        O::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let informer = (self.stores.iter())
            .find_map(|i| i.downcast_ref::<Informer<O>>())
            .cloned();
        if informer.is_none() {
            tracing::debug!(
                cluster = %self.name,
                asked = std::any::type_name::<O>(),
                "Context::store: no input of the controller watches this type in this cluster"
            );
        }
        informer.map(Store::new)
    }

    /// The object `key` in this cluster's cache of the controller's reconciled type (the
    /// `for_` input, with its selectors), or `None` if it is not there: what a request-keyed
    /// reconciler (one taking a [`Request`](crate::Request), see [`Builder::register`](crate::Builder::register)) reads to tell "gone"
    /// from "present". Also `None` when `K` is not the controller's reconciled type, and when
    /// `key` is in a namespace the reconciled type is not watched in
    /// ([`WatchOptions::namespace`](crate::WatchOptions::namespace), the manager's
    /// [default](crate::ManagerBuilder::default_namespaces)): the cache holds only the watched
    /// namespaces, so such a key is absent from it whether or not the object exists (logged at
    /// debug level; [`is_watched`](Self::is_watched) tells the two apart).
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::controller::Action;
    /// # use mcr_manager::{Context, Request};
    /// async fn reconcile(req: Request<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
    ///     match ctx.cached(&req.object) {
    ///         Some(cm) => { /* present: reconcile it */ }
    ///         None => { /* gone: clean up after it */ }
    ///     }
    ///     Ok(Action::await_change())
    /// }
    /// ```
    pub fn cached<K>(&self, key: &ObjectRef<K>) -> Option<Arc<K>>
    where
        K: Resource + Clone + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let Some(informer) = self
            .primary
            .as_ref()?
            .informer
            .downcast_ref::<Informer<K>>()
        else {
            tracing::debug!(
                cluster = %self.name,
                asked = std::any::type_name::<K>(),
                "Context::cached answers only for the controller's reconciled type (its `for_` \
                 input); read other types through `current_cluster().cache()`"
            );
            return None;
        };
        informer.get(key.namespace.as_deref(), &key.name)
    }

    /// Whether objects of `namespace` (`None`: cluster-scoped) of the controller's reconciled
    /// type are watched, so in the cache [`cached`](Self::cached) reads: always for a
    /// cluster-wide watch, else when `namespace` is one of the watched namespaces. False
    /// outside the runtime ([`Context::new`]), where there is no such cache.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use mcr_manager::{Context, Request};
    /// # fn demo(req: Request<ConfigMap>, ctx: Context<()>) {
    /// if ctx.is_watched(req.object.namespace.as_deref()) && ctx.cached(&req.object).is_none() {
    ///     // really gone
    /// }
    /// # }
    /// ```
    pub fn is_watched(&self, namespace: Option<&str>) -> bool {
        self.primary.as_ref().is_some_and(|p| (p.covers)(namespace))
    }

    /// The cluster the object lives in (its client, cache and indexes).
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let synced = ctx.current_cluster().cache().is_synced();
    /// # }
    /// ```
    pub fn current_cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The name the cluster is engaged under, the same as in the request. Pass it to
    /// [`cluster`](Self::cluster) (or `Manager::cluster`) to reach this cluster again.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// println!("reconciling in {}", ctx.cluster_name());
    /// # }
    /// ```
    pub fn cluster_name(&self) -> &ClusterName {
        &self.name
    }

    /// A client for the object's cluster.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let api: kube::Api<ConfigMap> = kube::Api::default_namespaced(ctx.client());
    /// # }
    /// ```
    pub fn client(&self) -> kube::Client {
        self.cluster.client()
    }

    /// The manager's host cluster, whichever cluster this reconcile runs in.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let sources: kube::Api<ConfigMap> = kube::Api::default_namespaced(ctx.host().client());
    /// # }
    /// ```
    pub fn host(&self) -> &Cluster {
        self.fleet.host()
    }

    /// The cluster engaged under `name` right now (the host for [`ClusterName::host`]), or the
    /// error of [`Fleet::get`](crate::Fleet::get): [`mcr_core::Error::NotOwned`], naming the
    /// owner, for a cluster another replica owns in sharded mode, else
    /// [`mcr_core::Error::ClusterNotFound`].
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) -> Result<(), mcr_core::Error> {
    /// let west = ctx.cluster(&"west".into())?;
    /// let client = west.client();
    /// # Ok(()) }
    /// ```
    pub fn cluster(&self, name: &ClusterName) -> Result<Cluster, mcr_core::Error> {
        self.fleet.get(name)
    }

    /// The names of the clusters engaged right now (not the host), sorted.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let members = ctx.engaged_clusters();
    /// # }
    /// ```
    pub fn engaged_clusters(&self) -> Vec<ClusterName> {
        self.fleet.names()
    }

    /// The whole fleet (host and engaged clusters), to keep or hand on.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let fleet: mcr_manager::Fleet = ctx.fleet().clone();
    /// # }
    /// ```
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// The user's data, shared by every reconcile of the controller.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<String>) {
    /// let data: std::sync::Arc<String> = ctx.data().clone();
    /// # }
    /// ```
    pub fn data(&self) -> &Arc<T> {
        &self.data
    }
}

impl<T> Clone for Context<T> {
    fn clone(&self) -> Self {
        Self {
            cluster: self.cluster.clone(),
            name: self.name.clone(),
            fleet: self.fleet.clone(),
            data: self.data.clone(),
            primary: self.primary.clone(),
            stores: self.stores.clone(),
            cancel: self.cancel.clone(),
            recorder: self.recorder.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Context<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cluster", &self.name)
            .finish_non_exhaustive()
    }
}
