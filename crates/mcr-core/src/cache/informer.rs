//! [`Informer`]: one shared watcher + reflector store for one resource in one cluster, and
//! the [`CacheEvent`]s it delivers.

use std::{
    fmt::Debug,
    hash::Hash,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::{StreamExt, channel::mpsc::unbounded, stream::BoxStream};
use kube::{
    Resource,
    runtime::reflector::{Lookup, ObjectRef},
};

use super::{
    indexer::Extractor,
    shared::{Ready, Shared},
};
use crate::Error;

/// A change seen by an [`Informer`], delivered by [`Informer::subscribe`].
///
/// ```
/// use mcr_core::CacheEvent;
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// fn describe(ev: &CacheEvent<ConfigMap>) -> &'static str {
///     match ev {
///         CacheEvent::Listed(_) => "listed",
///         CacheEvent::Applied(_) => "created or updated",
///         CacheEvent::Deleted(_) => "deleted",
///     }
/// }
/// ```
#[derive(Clone, Debug)]
pub enum CacheEvent<K> {
    /// The object exists in this state, and nothing says it just changed: the informer's first
    /// list, the replay of the store to a new subscriber, or a relist that found it at the
    /// resource version it had. Work it causes can wait behind live changes.
    Listed(Arc<K>),
    /// The object was created or updated (a watch event, or a relist that found it new or at
    /// another resource version).
    Applied(Arc<K>),
    /// The object was deleted (its last known state).
    Deleted(Arc<K>),
}

impl<K> CacheEvent<K> {
    /// The object carried by the event.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use mcr_core::CacheEvent;
    /// let ev = CacheEvent::Applied(Arc::new(5));
    /// assert_eq!(**ev.object(), 5);
    /// ```
    pub fn object(&self) -> &Arc<K> {
        match self {
            CacheEvent::Listed(o) | CacheEvent::Applied(o) | CacheEvent::Deleted(o) => o,
        }
    }
}

/// A shared informer: one watch + reflector store for one resource (and selector) in one
/// cluster, or, for an informer over several namespaces ([`InformerOptions::namespaces`](crate::InformerOptions::namespaces)),
/// one per namespace, read as one. Obtained from [`Cache::informer`](crate::Cache::informer)
/// and friends.
///
/// Cheap to clone; every clone and every later request for the same resource shares the same
/// watch. Reads come from memory.
///
/// ```no_run
/// # async fn f(cluster: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
/// use std::time::Duration;
/// use futures::StreamExt;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use mcr_core::CacheEvent;
///
/// let informer = cluster.cache().informer::<ConfigMap>();
/// informer.wait_for_sync(Duration::from_secs(30)).await?;
/// let cm = informer.get(Some("default"), "settings");
/// let mut events = informer.subscribe();
/// while let Some(ev) = events.next().await {
///     if let CacheEvent::Applied(cm) = ev { println!("{:?}", cm.metadata.name); }
/// }
/// # Ok(()) }
/// ```
pub struct Informer<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// One watch per namespace, sorted by namespace, or one watch of every namespace: never
    /// empty.
    parts: Arc<[Arc<Shared<K>>]>,
}

impl<K: Lookup + Clone + 'static> Clone for Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            parts: self.parts.clone(),
        }
    }
}

impl<K: Lookup + Clone + 'static> std::fmt::Debug for Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let first = &self.parts[0];
        let namespaces: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| p.namespace.as_deref())
            .collect();
        f.debug_struct("Informer")
            .field("cluster", &first.cluster)
            .field("resource", &first.resource)
            .field("namespaces", &namespaces)
            .finish_non_exhaustive()
    }
}

impl<K> Informer<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An informer over these watches (at least one).
    pub(crate) fn from_parts(parts: Vec<Arc<Shared<K>>>) -> Self {
        debug_assert!(!parts.is_empty(), "an informer has at least one watch");
        Self {
            parts: parts.into(),
        }
    }

    /// The first watch: the only one unless the informer spans several namespaces.
    fn first(&self) -> &Arc<Shared<K>> {
        &self.parts[0]
    }

    /// The namespaces this informer watches, sorted; empty when it watches every namespace
    /// (one cluster-wide watch).
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// if i.namespaces().is_empty() { println!("every namespace"); }
    /// # }
    /// ```
    pub fn namespaces(&self) -> Vec<&str> {
        self.parts
            .iter()
            .filter_map(|p| p.namespace.as_deref())
            .collect()
    }

    /// Whether objects of `namespace` (`None`: cluster-scoped objects) are watched here:
    /// always for an informer of every namespace, else when `namespace` is one of
    /// [`namespaces`](Self::namespaces).
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// if !i.covers(Some("kube-system")) { println!("not watched: read it from the API"); }
    /// # }
    /// ```
    pub fn covers(&self, namespace: Option<&str>) -> bool {
        self.part_for(namespace).is_some()
    }

    /// The watch whose store holds objects of `namespace`.
    fn part_for(&self, namespace: Option<&str>) -> Option<&Arc<Shared<K>>> {
        self.parts
            .iter()
            .find(|p| p.namespace.is_none() || p.namespace.as_deref() == namespace)
    }

    /// The object of that namespace (`None` for cluster-scoped) and name, from memory.
    ///
    /// `None` also for an object of a namespace this informer does not watch (see
    /// [`covers`](Self::covers)): it is not in the cache, whether or not it exists. That case
    /// is logged at debug level; read such objects from the API.
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let cm = i.get(Some("default"), "settings");
    /// # }
    /// ```
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let Some(part) = self.part_for(namespace) else {
            tracing::debug!(
                cluster = %self.first().cluster,
                resource = %self.first().resource,
                namespace = namespace.unwrap_or(""),
                name,
                watched = ?self.namespaces(),
                "cache lookup outside the watched namespaces: not cached"
            );
            return None;
        };
        let mut key = ObjectRef::new_with(name, part.dyntype.clone());
        key.namespace = namespace.map(str::to_owned);
        part.store.get(&key)
    }

    /// Every object in the store (every watched namespace's).
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// for cm in i.list() { println!("{:?}", cm.metadata.name); }
    /// # }
    /// ```
    pub fn list(&self) -> Vec<Arc<K>> {
        match &*self.parts {
            [one] => one.store.state(),
            parts => parts.iter().flat_map(|p| p.store.state()).collect(),
        }
    }

    /// Whether the initial list has completed (in every watched namespace) and the informer
    /// still runs.
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// if !i.is_synced() { println!("still listing"); }
    /// # }
    /// ```
    pub fn is_synced(&self) -> bool {
        self.parts.iter().all(|p| {
            let state = p.state.borrow();
            state.synced && !state.stopped
        })
    }

    /// Whether the informer has stopped for good (its cluster's token fired and its watch task
    /// has exited).
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// if i.is_stopped() { println!("cluster left"); }
    /// # }
    /// ```
    pub fn is_stopped(&self) -> bool {
        self.parts.iter().any(|p| p.state.borrow().stopped)
    }

    /// Waits until the initial list has completed (in every watched namespace).
    ///
    /// Errors with [`Error::Refused`] as soon as the API server refuses its list or watch
    /// with 401, 403, or 404 of the resource, with [`Error::SyncTimeout`] after `timeout` when
    /// nothing better is known, or [`Error::Stopped`] once the cluster's token has fired (even
    /// if it had synced before).
    ///
    /// ```no_run
    /// # async fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// i.wait_for_sync(std::time::Duration::from_secs(30)).await.unwrap();
    /// # }
    /// ```
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), Error> {
        // Which watch is being waited for, to name it on timeout. `timeout` may be
        // `Duration::MAX`: no deadline is computed from it.
        let waiting = AtomicUsize::new(0);
        let all = async {
            for (i, part) in self.parts.iter().enumerate() {
                waiting.store(i, Ordering::Relaxed);
                match part.wait_ready_inner().await {
                    Ready::Synced => {}
                    Ready::Stopped => return Err(Error::Stopped(part.cluster.clone())),
                    Ready::Refused(refusal) => {
                        let namespace = part.namespace.as_deref();
                        return Err(refusal.error(&part.cluster, &part.resource, namespace));
                    }
                }
            }
            Ok(())
        };
        match tokio::time::timeout(timeout, all).await {
            Ok(done) => done,
            Err(_) => {
                let part = &self.parts[waiting.load(Ordering::Relaxed)];
                Err(Error::SyncTimeout {
                    cluster: part.cluster.clone(),
                    resource: part.resource.clone(),
                    timeout,
                    last_error: part.last_error.lock().as_deref().map(str::to_owned),
                })
            }
        }
    }

    /// A stream of changes: every object currently in the store as
    /// [`Listed`](CacheEvent::Listed) first (a late subscriber misses nothing), then live
    /// changes, the first list's objects as `Listed` too. After a relist, objects present are
    /// re-sent (`Listed` when at the resource version they had, else
    /// [`Applied`](CacheEvent::Applied)) and objects that vanished as
    /// [`Deleted`](CacheEvent::Deleted). Ends when the cluster's token is
    /// cancelled. Never blocks the watcher (each subscriber has its own unbounded queue; drop
    /// the stream to unsubscribe). Over several namespaces, the namespaces' streams merged.
    ///
    /// ```no_run
    /// # async fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// use futures::StreamExt;
    /// let mut events = i.subscribe();
    /// while let Some(ev) = events.next().await { println!("{:?}", ev.object().metadata.name); }
    /// # }
    /// ```
    pub fn subscribe(&self) -> BoxStream<'static, CacheEvent<K>> {
        match &*self.parts {
            [one] => subscribe(one),
            parts => futures::stream::select_all(parts.iter().map(subscribe)).boxed(),
        }
    }

    /// Objects whose field index `index_name` has `value`.
    ///
    /// Errors with [`Error::Index`] if no index of that name is registered on this informer
    /// (see [`Cache::index_field`](crate::Cache::index_field)).
    pub(crate) fn list_by_index(
        &self,
        index_name: &str,
        value: &str,
    ) -> Result<Vec<Arc<K>>, Error> {
        let mut out = Vec::new();
        for part in self.parts.iter() {
            out.extend(list_by_index(part, index_name, value)?);
        }
        Ok(out)
    }

    /// How many watch errors this informer has seen (each one is retried with backoff).
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// println!("{} watch restarts", i.watch_restarts());
    /// # }
    /// ```
    pub fn watch_restarts(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| p.restarts.load(Ordering::Relaxed))
            .sum()
    }

    /// Registers a field index on this informer's watches; false if one of that name exists
    /// (no-op).
    pub(crate) fn add_index(&self, name: &str, extract: Extractor<K>) -> bool {
        let mut added = false;
        for part in self.parts.iter() {
            added |= part.indexes.write().add(name, extract.clone(), &part.store);
        }
        added
    }
}

/// [`Informer::subscribe`] of one watch.
fn subscribe<K>(shared: &Arc<Shared<K>>) -> BoxStream<'static, CacheEvent<K>>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    let (tx, rx) = unbounded();
    let mut subs = shared.subscribers.lock();
    for obj in shared.store.state() {
        // The receiver is alive: it is in our hands.
        let _ = tx.unbounded_send(CacheEvent::Listed(obj));
    }
    if !subs.closed {
        subs.senders.push(tx);
    }
    rx.boxed()
}

/// [`Informer::list_by_index`] of one watch.
fn list_by_index<K>(shared: &Shared<K>, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    let Some((keys, extract)) = shared.indexes.read().lookup(index_name, value) else {
        return Err(Error::Index {
            index: index_name.to_owned(),
            reason: format!("no such index on {}", shared.resource),
        });
    };
    // Re-check against the store so that a result always reflects the store's state.
    Ok(keys
        .into_iter()
        .filter_map(|(namespace, name)| {
            let mut key = ObjectRef::new_with(&name, shared.dyntype.clone());
            key.namespace = namespace;
            shared.store.get(&key)
        })
        .filter(|obj| extract(obj).iter().any(|v| v == value))
        .collect())
}
