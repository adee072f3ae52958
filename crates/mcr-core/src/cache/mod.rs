//! [`Cache`]: the per-cluster shared informer cache.
//!
//! kube-rs has no shared informer factory; this is ours. The first user of a resource type
//! starts one list-then-watch loop (`watch`, kube-runtime's `watcher` semantics) + reflector
//! store for it, every later user shares it, so N controllers watching ConfigMaps in one
//! cluster cause exactly one watch.

mod derived;
mod field_index;
mod indexer;
mod informer;
mod key;
mod name;
mod shared;
mod sync;
mod version;
mod watch;

use std::{any::Any, collections::BTreeMap, fmt::Debug, hash::Hash, sync::Arc};

use kube::{Resource, core::PartialObjectMeta, runtime::watcher};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

pub use derived::CacheView;
use derived::Derived;
pub(crate) use indexer::Extractor;
pub use informer::{CacheEvent, Informer};
use key::InformerKey;
pub use key::InformerOptions;
pub(crate) use key::TypeTag;
use shared::{ErasedInformer, Shared};
pub use version::older_version;
pub use watch::{watch, watch_metadata};

use crate::ClusterName;

struct Entry {
    any: Arc<dyn Any + Send + Sync>,
    erased: Arc<dyn ErasedInformer>,
    /// Opens the informer of the same type and options in another cache (see
    /// [`Cache::open_informers_of`]).
    reopen: Reopen,
    /// Whether the watch receives only `metadata` (see [`Cache::metadata_informer`]).
    metadata: bool,
}

/// Opens, in the given cache, the informer of the type of the given shared state (an
/// `Arc<Shared<K>>`), with the given options, metadata-only or not: a plain function, so an
/// entry allocates nothing for it.
type Reopen = fn(&Cache, &Arc<dyn Any + Send + Sync>, &InformerOptions, bool);

/// [`Reopen`] for `K`.
fn reopen<K>(
    cache: &Cache,
    any: &Arc<dyn Any + Send + Sync>,
    opts: &InformerOptions,
    metadata: bool,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    // The entry's key holds the Rust type, so the downcast always succeeds.
    if let Ok(shared) = any.clone().downcast::<Shared<K>>() {
        cache.watch_of::<K>(shared.dyntype.clone(), opts.clone(), metadata);
    }
}

/// The watches of one cache, by key. Most caches hold one or two, so this is a list with
/// no spare room (a `HashMap`'s smallest table is four entries of ~230 bytes), searched in
/// order.
#[derive(Default)]
struct Informers(Vec<(InformerKey, Entry)>);

impl Informers {
    fn get(&self, key: &InformerKey) -> Option<&Entry> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, e)| e)
    }

    fn insert(&mut self, key: InformerKey, entry: Entry) {
        self.0.reserve_exact(1);
        self.0.push((key, entry));
    }

    fn values(&self) -> impl Iterator<Item = &Entry> {
        self.0.iter().map(|(_, e)| e)
    }

    fn iter(&self) -> impl Iterator<Item = (&InformerKey, &Entry)> {
        self.0.iter().map(|(k, e)| (k, e))
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

#[derive(Default)]
struct State {
    informers: Informers,
    token: Option<CancellationToken>,
}

struct Inner {
    cluster: ClusterName,
    /// The name the cluster was engaged under, once it was (see [`Cache::engaged_as`]).
    engaged_as: std::sync::OnceLock<ClusterName>,
    /// Shared with the watches' streams, which request through it.
    client: Arc<kube::Client>,
    state: Mutex<State>,
    /// Field index name -> the type and namespaces it is registered on.
    /// (A `BTreeMap`: half the bytes of an empty `HashMap`, in every cache; most have none.)
    index_names: Mutex<BTreeMap<String, (TypeTag, Vec<String>)>>,
    /// Set for a derived cache (see [`Cache::derived`]).
    /// Boxed: most caches are not derived.
    derived: Option<Box<Derived>>,
}

/// The shared informer cache of one cluster (cheap to clone: an `Arc` inside).
///
/// One watcher + reflector per (Rust type, group/version/plural, metadata-only, label
/// selector, field selector, namespace scope), shared by every user: an informer over several
/// namespaces ([`InformerOptions::namespaces`]) is one watch per namespace, each shared with
/// every other informer naming it. Inert until [`start`](Cache::start);
/// informers requested before `start` begin at `start`. Everything stops when the token given
/// to `start` is cancelled. Watch errors are retried with kube-runtime's default backoff and
/// logged with the cluster name.
///
/// ```no_run
/// # async fn f(cluster: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let a = cluster.cache().informer::<ConfigMap>();
/// let b = cluster.cache().informer::<ConfigMap>(); // same watch as `a`
/// cluster.cache().wait_for_sync(Duration::from_secs(30)).await?;
/// assert_eq!(a.list().len(), b.list().len());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("cluster", self.cluster())
            .field("informers", &self.informer_count())
            .field("started", &self.is_started())
            .finish()
    }
}

impl Cache {
    /// A new, not yet started cache for the cluster `cluster` reached through `client`.
    /// [`Cluster::new`](crate::Cluster::new) creates one for you.
    pub(crate) fn new(cluster: ClusterName, client: Arc<kube::Client>) -> Cache {
        Cache {
            inner: Arc::new(Inner {
                cluster,
                engaged_as: std::sync::OnceLock::new(),
                client,
                state: Mutex::new(State::default()),
                index_names: Mutex::new(BTreeMap::new()),
                derived: None,
            }),
        }
    }

    /// A new, not yet started cache whose informers are views of `parent`'s informers (no
    /// watch of its own): see [`CacheView`].
    ///
    /// Each informer requested here requests the informer of the same type and options from
    /// `parent` (one watch in the parent however many derived caches use it), waits for it to
    /// sync, replays the objects `view` keeps as its initial list and then follows the parent's
    /// changes. It has its own store, subscribers and field indexes, starts with
    /// [`start`](Cache::start) and stops with its own token. `parent` must be started by its
    /// owner; until it is, derived informers do not sync. `client` is only kept for the
    /// [`Cluster`](crate::Cluster) built around this cache.
    ///
    /// ```no_run
    /// # fn f(host: mcr_core::Cluster, ns_client: kube::Client, view: std::sync::Arc<dyn mcr_core::CacheView>) {
    /// use mcr_core::{Cache, Cluster};
    /// let cache = Cache::derived("team-a".into(), ns_client.clone(), host.cache(), view);
    /// let cluster = Cluster::with_cache("team-a", ns_client, cache);
    /// # }
    /// ```
    pub fn derived(
        cluster: ClusterName,
        client: kube::Client,
        parent: &Cache,
        view: Arc<dyn CacheView>,
    ) -> Cache {
        Cache {
            inner: Arc::new(Inner {
                cluster,
                engaged_as: std::sync::OnceLock::new(),
                client: Arc::new(client),
                state: Mutex::new(State::default()),
                index_names: Mutex::new(BTreeMap::new()),
                derived: Some(Box::new(Derived {
                    parent: parent.clone(),
                    view,
                })),
            }),
        }
    }

    /// A new, not yet started cache like this one (same cluster, client and, for a derived
    /// cache, the same parent and view), for a new instance of the same cluster.
    pub(crate) fn fresh(&self) -> Cache {
        Cache {
            inner: Arc::new(Inner {
                cluster: self.inner.cluster.clone(),
                engaged_as: std::sync::OnceLock::new(),
                client: self.inner.client.clone(),
                state: Mutex::new(State::default()),
                index_names: Mutex::new(BTreeMap::new()),
                derived: self.inner.derived.clone(),
            }),
        }
    }

    /// Starts every informer requested so far, and any requested later, until `token` fires.
    /// Idempotent: later calls (and their tokens) are ignored.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// c.cache().start(token.child_token());
    /// # }
    /// ```
    pub fn start(&self, token: CancellationToken) {
        let mut state = self.inner.state.lock();
        if state.token.is_some() {
            return;
        }
        tracing::debug!(cluster = %self.cluster(), informers = state.informers.len(), "starting cache");
        for entry in state.informers.values() {
            entry.erased.clone().start(token.clone());
        }
        state.token = Some(token);
    }

    /// The token the cache was started with (the engagement's), once it was.
    pub(crate) fn token(&self) -> Option<CancellationToken> {
        self.inner.state.lock().token.clone()
    }

    /// Whether [`start`](Cache::start) was called.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// assert!(!c.cache().is_started());
    /// # }
    /// ```
    pub fn is_started(&self) -> bool {
        self.inner.state.lock().token.is_some()
    }

    /// The shared informer for a typed resource (all namespaces, no selector; see
    /// [`informer_with`](Self::informer_with) for namespace-scoped watches). It is handed out
    /// at once, possibly before its initial list completed: wait for
    /// [`Informer::wait_for_sync`] when an empty store must mean "no objects".
    ///
    /// ```no_run
    /// # async fn f(c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// let deployments = c.cache().informer::<Deployment>();
    /// deployments.wait_for_sync(std::time::Duration::from_secs(30)).await?;
    /// let missing = deployments.get(Some("default"), "web").is_none(); // really absent
    /// # Ok(()) }
    /// ```
    pub fn informer<K>(&self) -> Informer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.informer_with::<K>((), InformerOptions::default())
    }

    /// The shared informer for a resource with a dynamic type (e.g. `DynamicObject` with an
    /// `ApiResource`), selectors, or namespaces (one namespaced watch per namespace, which a
    /// Role in each allows, instead of one cluster-wide watch).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    /// use mcr_core::InformerOptions;
    /// let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    /// let ar = ApiResource::from_gvk(&gvk);
    /// let widgets = c.cache().informer_with::<DynamicObject>(ar, InformerOptions::default());
    /// let teams = InformerOptions { namespaces: vec!["team-a".into(), "team-b".into()], ..Default::default() };
    /// let cms = c.cache().informer_with::<ConfigMap>((), teams); // two watches, one informer
    /// # }
    /// ```
    pub fn informer_with<K>(&self, dyntype: K::DynamicType, opts: InformerOptions) -> Informer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        self.informer_of::<K>(dyntype, opts, false)
    }

    /// `informer_with`; `metadata`: `K` is a `PartialObjectMeta<_>`, listed and watched as
    /// metadata only. One watch per namespace of `opts` (see [`InformerOptions::namespaces`]).
    fn informer_of<K>(
        &self,
        dyntype: K::DynamicType,
        opts: InformerOptions,
        metadata: bool,
    ) -> Informer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let parts = opts
            .per_namespace(key::cluster_scoped::<K>())
            .into_iter()
            .map(|opts| self.watch_of::<K>(dyntype.clone(), opts, metadata))
            .collect();
        Informer::from_parts(parts)
    }

    /// The shared watch of `K` with `opts`, whose `namespaces` hold at most one namespace.
    fn watch_of<K>(
        &self,
        dyntype: K::DynamicType,
        opts: InformerOptions,
        metadata: bool,
    ) -> Arc<Shared<K>>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let key = InformerKey {
            tag: TypeTag::of::<K>(&dyntype),
            opts: Arc::new(opts),
        };
        self.get_or_create(key, metadata, |client, key| {
            if let Some(derived) = &self.inner.derived {
                let opts = InformerOptions::clone(&key.opts);
                let stream = derived::stream::<K>(derived, dyntype.clone(), opts);
                return (dyntype, stream, reopen::<K>);
            }
            let url = K::url_path(&dyntype, key.opts.namespace());
            let stream = watch::backed_off::<K>(client, url, key.opts.clone(), metadata);
            (dyntype, stream, reopen::<K>)
        })
    }

    /// The shared metadata-only informer for a resource: a watch that receives only
    /// `metadata` (cheaper for large objects).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// use k8s_openapi::api::core::v1::Secret;
    /// let secrets = c.cache().metadata_informer::<Secret>((), Default::default());
    /// # }
    /// ```
    pub fn metadata_informer<K>(
        &self,
        dyntype: K::DynamicType,
        opts: InformerOptions,
    ) -> Informer<PartialObjectMeta<K>>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        self.informer_of::<PartialObjectMeta<K>>(dyntype, opts, true)
    }

    /// The state behind one watch of `informer_with` (for derived caches: `opts` names at most
    /// one namespace).
    fn shared<K>(&self, dyntype: K::DynamicType, opts: InformerOptions) -> Arc<Shared<K>>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        self.watch_of::<K>(dyntype, opts, false)
    }

    fn get_or_create<K>(
        &self,
        key: InformerKey,
        metadata: bool,
        make: impl FnOnce(
            Arc<kube::Client>,
            &InformerKey,
        ) -> (
            K::DynamicType,
            futures::stream::BoxStream<'static, watcher::Result<watcher::Event<K>>>,
            Reopen,
        ),
    ) -> Arc<Shared<K>>
    where
        K: Resource + Clone + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let mut state = self.inner.state.lock();
        // The key holds the Rust type, so the downcast always succeeds.
        if let Some(Ok(shared)) = state
            .informers
            .get(&key)
            .map(|e| e.any.clone().downcast::<Shared<K>>())
        {
            return shared;
        }
        let resource = key.tag.resource();
        let (dyntype, stream, reopen) = make(self.inner.client.clone(), &key);
        let keep_managed_fields = key.opts.keep_managed_fields;
        let shared = Shared::new(
            self.cluster().clone(),
            resource,
            key.opts.namespace().map(str::to_owned),
            dyntype,
            stream,
            keep_managed_fields,
        );
        if let Some(token) = &state.token {
            shared.clone().start(token.clone());
        }
        tracing::debug!(
            cluster = %self.cluster(),
            resource = %shared.resource(),
            namespace = key.opts.namespace(),
            "informer created"
        );
        state.informers.insert(
            key,
            Entry {
                any: shared.clone(),
                erased: shared.clone(),
                reopen,
                metadata,
            },
        );
        shared
    }

    /// Opens here every informer `other` has (same types, resources and options), so a new
    /// instance of a cluster can list everything the running one watches before it takes over
    /// (see [`Engagements::want`](crate::Engagements::want)).
    pub(crate) fn open_informers_of(&self, other: &Cache) {
        let reopens: Vec<_> = other
            .inner
            .state
            .lock()
            .informers
            .iter()
            .map(|(k, e)| {
                (
                    e.reopen,
                    e.any.clone(),
                    InformerOptions::clone(&k.opts),
                    e.metadata,
                )
            })
            .collect();
        for (reopen, any, opts, metadata) in reopens {
            reopen(self, &any, &opts, metadata);
        }
    }
}
