//! [`Store`]: a reconcile's read-only view of one of its controller's watches in its cluster,
//! shaped like kube-runtime's `reflector::Store`.

use std::{fmt::Debug, hash::Hash, sync::Arc, time::Duration};

use kube::{Resource, runtime::reflector::ObjectRef};
use mcr_core::Informer;

/// The objects one of the controller's own watches holds in one cluster, read from memory: the
/// same informer (type, selectors, namespaces) the controller watches with, so reading it costs
/// no request and no second watch. Shaped like kube-runtime's
/// [`reflector::Store`](kube::runtime::reflector::Store): [`get`](Self::get),
/// [`state`](Self::state), [`find`](Self::find), [`wait_until_ready`](Self::wait_until_ready).
/// Get one from [`Context::store`](crate::Context::store). Cheap to clone.
///
/// It holds what the watch selects: objects of the watched namespaces matching its selectors.
/// By the time a reconcile runs, every watch of its cluster has listed (a member's reconciles
/// start once its caches have synced), so an object missing from it is missing from the
/// cluster (as of the last event seen).
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
/// use kube::runtime::controller::Action;
/// use mcr_manager::Context;
///
/// async fn reconcile(summary: Arc<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
///     if let Some(pods) = ctx.store::<Pod>() {
///         let running = pods.state().iter()
///             .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
///             .count();
///         tracing::info!(cluster = %ctx.cluster_name(), running, "pods running");
///     }
///     Ok(Action::await_change())
/// }
/// ```
pub struct Store<K: Resource + Clone + 'static>
where
    K::DynamicType: Clone + Eq + Hash,
{
    informer: Informer<K>,
}

impl<K> Clone for Store<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    fn clone(&self) -> Self {
        Self {
            informer: self.informer.clone(),
        }
    }
}

impl<K> Debug for Store<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("informer", &self.informer)
            .finish()
    }
}

impl<K> Store<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// A store over `informer`.
    pub(crate) fn new(informer: Informer<K>) -> Self {
        Self { informer }
    }

    /// The object `key` (its namespace and name), if the watch holds it.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::reflector::ObjectRef;
    /// # fn demo(store: mcr_manager::Store<ConfigMap>) {
    /// let settings = store.get(&ObjectRef::new("settings").within("default"));
    /// # }
    /// ```
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.informer.get(key.namespace.as_deref(), &key.name)
    }

    /// Every object the watch holds, in no particular order.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn demo(store: mcr_manager::Store<ConfigMap>) {
    /// let names: Vec<String> = store.state().iter().filter_map(|cm| cm.metadata.name.clone()).collect();
    /// # }
    /// ```
    pub fn state(&self) -> Vec<Arc<K>> {
        self.informer.list()
    }

    /// The first object (in no particular order) for which `predicate` is true.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn demo(store: mcr_manager::Store<ConfigMap>) {
    /// let empty = store.find(|cm| cm.data.as_ref().is_none_or(|d| d.is_empty()));
    /// # }
    /// ```
    pub fn find(&self, predicate: impl Fn(&K) -> bool) -> Option<Arc<K>> {
        self.informer.list().into_iter().find(|o| predicate(o))
    }

    /// Whether the watch has listed (in every namespace it watches) and still runs.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn demo(store: mcr_manager::Store<ConfigMap>) {
    /// assert!(store.is_ready());
    /// # }
    /// ```
    pub fn is_ready(&self) -> bool {
        self.informer.is_synced()
    }

    /// Waits until the watch has listed, at most `timeout` (kube-runtime's waits without
    /// bound): the errors of [`Informer::wait_for_sync`], such as
    /// [`Error::Refused`](mcr_core::Error::Refused) at once for a list the API server refuses.
    /// Within a reconcile it returns at once: a member's reconciles start once its caches
    /// have synced.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # async fn demo(store: mcr_manager::Store<ConfigMap>) -> Result<(), mcr_core::Error> {
    /// store.wait_until_ready(std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_until_ready(&self, timeout: Duration) -> Result<(), mcr_core::Error> {
        self.informer.wait_for_sync(timeout).await
    }

    /// The namespaces the watch covers, sorted; empty when it watches every namespace.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn demo(store: mcr_manager::Store<ConfigMap>) {
    /// if store.namespaces().is_empty() { println!("every namespace"); }
    /// # }
    /// ```
    pub fn namespaces(&self) -> Vec<&str> {
        self.informer.namespaces()
    }
}
