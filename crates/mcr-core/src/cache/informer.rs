//! [`Informer`]: one shared watcher + reflector store for one resource in one cluster, and
//! the [`CacheEvent`]s it delivers.

use std::{
    fmt::Debug,
    hash::Hash,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use futures::{StreamExt, channel::mpsc::unbounded, stream::BoxStream};
use kube::{
    Resource,
    runtime::reflector::{Lookup, ObjectRef, Store},
};

use super::{indexer::Extractor, shared::Shared};
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
/// cluster, obtained from [`Cache::informer`](crate::Cache::informer) and friends.
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
    shared: Arc<Shared<K>>,
}

impl<K: Lookup + Clone + 'static> Clone for Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K: Lookup + Clone + 'static> std::fmt::Debug for Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("cluster", &self.shared.cluster)
            .field("resource", &self.shared.resource)
            .finish_non_exhaustive()
    }
}

impl<K> Informer<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    pub(crate) fn from_shared(shared: Arc<Shared<K>>) -> Self {
        Self { shared }
    }

    pub(crate) fn into_shared(self) -> Arc<Shared<K>> {
        self.shared
    }

    /// The kube-runtime reader store behind this informer.
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let store = i.store();
    /// println!("{} configmaps", store.len());
    /// # }
    /// ```
    pub fn store(&self) -> Store<K> {
        self.shared.store.clone()
    }

    /// The object of that namespace (`None` for cluster-scoped) and name, from memory.
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let cm = i.get(Some("default"), "settings");
    /// # }
    /// ```
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let mut key = ObjectRef::new_with(name, self.shared.dyntype.clone());
        key.namespace = namespace.map(str::to_owned);
        self.shared.store.get(&key)
    }

    /// Every object in the store.
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// for cm in i.list() { println!("{:?}", cm.metadata.name); }
    /// # }
    /// ```
    pub fn list(&self) -> Vec<Arc<K>> {
        self.shared.store.state()
    }

    /// Whether the initial list has completed and the informer still runs.
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// if !i.is_synced() { println!("still listing"); }
    /// # }
    /// ```
    pub fn is_synced(&self) -> bool {
        let state = self.shared.state.borrow();
        state.synced && !state.stopped
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
        self.shared.state.borrow().stopped
    }

    /// Waits until the initial list has completed.
    ///
    /// Errors with [`Error::SyncTimeout`] after `timeout`, or [`Error::Stopped`] once the
    /// cluster's token has fired (even if it had synced before).
    ///
    /// ```no_run
    /// # async fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// i.wait_for_sync(std::time::Duration::from_secs(30)).await.unwrap();
    /// # }
    /// ```
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), Error> {
        match tokio::time::timeout(timeout, self.shared.wait_ready_inner()).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::Stopped(self.shared.cluster.clone())),
            Err(_) => Err(Error::SyncTimeout {
                cluster: self.shared.cluster.clone(),
                resource: self.shared.resource.clone(),
                timeout,
            }),
        }
    }

    /// A stream of changes: every object currently in the store as
    /// [`Listed`](CacheEvent::Listed) first (a late subscriber misses nothing), then live
    /// changes, the first list's objects as `Listed` too. After a relist, objects present are
    /// re-sent (`Listed` when at the resource version they had, else
    /// [`Applied`](CacheEvent::Applied)) and objects that vanished as
    /// [`Deleted`](CacheEvent::Deleted). Ends when the cluster's token is
    /// cancelled. Never blocks the watcher (each subscriber has its own unbounded queue; drop
    /// the stream to unsubscribe).
    ///
    /// ```no_run
    /// # async fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// use futures::StreamExt;
    /// let mut events = i.subscribe();
    /// while let Some(ev) = events.next().await { println!("{:?}", ev.object().metadata.name); }
    /// # }
    /// ```
    pub fn subscribe(&self) -> BoxStream<'static, CacheEvent<K>> {
        let (tx, rx) = unbounded();
        let mut subs = self.shared.subscribers.lock();
        for obj in self.shared.store.state() {
            // The receiver is alive: it is in our hands.
            let _ = tx.unbounded_send(CacheEvent::Listed(obj));
        }
        if !subs.closed {
            subs.senders.push(tx);
        }
        rx.boxed()
    }

    /// Objects whose field index `index_name` has `value`.
    ///
    /// Errors with [`Error::Index`] if no index of that name is registered on this informer
    /// (see [`Cache::index_field`](crate::Cache::index_field)).
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) -> Result<(), mcr_core::Error> {
    /// let owned = i.list_by_index("owner", "my-app")?;
    /// # Ok(()) }
    /// ```
    pub fn list_by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        let Some((keys, extract)) = self.shared.indexes.read().lookup(index_name, value) else {
            return Err(Error::Index {
                index: index_name.to_owned(),
                reason: format!("no such index on {}", self.shared.resource),
            });
        };
        // Re-check against the store so that a result always reflects the store's state.
        Ok(keys
            .into_iter()
            .filter_map(|(namespace, name)| {
                let mut key = ObjectRef::new_with(&name, self.shared.dyntype.clone());
                key.namespace = namespace;
                self.shared.store.get(&key)
            })
            .filter(|obj| extract(obj).iter().any(|v| v == value))
            .collect())
    }

    /// How many watch errors this informer has seen (each one is retried with backoff).
    ///
    /// ```no_run
    /// # fn f(i: mcr_core::Informer<k8s_openapi::api::core::v1::ConfigMap>) {
    /// println!("{} watch restarts", i.watch_restarts());
    /// # }
    /// ```
    pub fn watch_restarts(&self) -> u64 {
        self.shared.restarts.load(Ordering::Relaxed)
    }

    /// Registers a field index on this informer; false if one of that name exists (no-op).
    pub(crate) fn add_index(&self, name: &str, extract: Extractor<K>) -> bool {
        self.shared
            .indexes
            .write()
            .add(name, extract, &self.shared.store)
    }
}
