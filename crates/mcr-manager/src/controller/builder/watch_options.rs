//! [`WatchOptions`]: kube's `watcher::Config` and a predicate for one watched input.

use std::fmt::Debug;

use std::sync::Arc;

use kube::{
    Resource,
    runtime::{Predicate, watcher},
};
use mcr_core::{Cluster, ClusterName, InformerOptions};

use crate::controller::{
    input::{PredicateFn, erase_predicate},
    scope::ClusterFilter,
    scope::ClusterScope,
};

/// kube-runtime's [`watcher::Config`] (selectors, timeout, page size, list semantic, ...), a
/// predicate and the [clusters](ClusterScope) of one watched input, and the input's dynamic
/// type: none to give for a typed resource ([`new`](Self::new)), an `ApiResource` for a
/// `DynamicObject` ([`dynamic`](Self::dynamic)). A `watcher::Config` converts into it, so a kube-runtime
/// input's configuration ports unchanged:
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::runtime::watcher;
/// use mcr_manager::WatchOptions;
///
/// let opts: WatchOptions<ConfigMap> = watcher::Config::default().labels("app=web").page_size(100).into();
/// ```
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
pub struct WatchOptions<O: Resource> {
    pub(super) dyntype: O::DynamicType,
    pub(super) informer: InformerOptions,
    pub(super) predicate: Option<PredicateFn<O>>,
    pub(super) scope: Option<ClusterScope>,
    pub(super) filter: Option<ClusterFilter>,
    /// The namespaces watched (`None`: the manager's default; empty: every namespace).
    pub(super) namespaces: Option<Vec<String>>,
}

impl<O: Resource> Default for WatchOptions<O>
where
    O::DynamicType: Default,
{
    fn default() -> Self {
        Self::dynamic(O::DynamicType::default())
    }
}

impl<O: Resource> WatchOptions<O> {
    /// Options for a resource whose dynamic type must be given, such as `DynamicObject` with
    /// its `ApiResource`; no selectors, no predicate.
    ///
    /// ```
    /// use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    /// let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let opts = mcr_manager::WatchOptions::<DynamicObject>::dynamic(ar).labels("sync=true");
    /// ```
    pub fn dynamic(dyntype: O::DynamicType) -> Self {
        Self {
            dyntype,
            informer: InformerOptions::default(),
            predicate: None,
            scope: None,
            filter: None,
            namespaces: None,
        }
    }

    /// The informer options of this input on `mgr`: its namespaces, else the manager's
    /// default.
    pub(super) fn informer_on(&self, mgr: &crate::Manager) -> InformerOptions {
        InformerOptions {
            namespaces: self
                .namespaces
                .clone()
                .unwrap_or_else(|| mgr.default_namespaces().to_vec()),
            ..self.informer.clone()
        }
    }
}

impl<O: Resource> Debug for WatchOptions<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchOptions")
            .field("informer", &self.informer)
            .field("predicate", &self.predicate.is_some())
            .field("scope", &self.scope)
            .field("namespaces", &self.namespaces)
            .field("cluster_filter", &self.filter.is_some())
            .finish()
    }
}

impl<O: Resource> From<watcher::Config> for WatchOptions<O>
where
    O::DynamicType: Default,
{
    fn from(config: watcher::Config) -> Self {
        Self {
            informer: config.into(),
            ..Self::default()
        }
    }
}

impl<O: Resource> WatchOptions<O>
where
    O::DynamicType: Default,
{
    /// These watcher settings (every field of kube-runtime's `watcher::Config`), no predicate.
    ///
    /// ```
    /// use kube::runtime::watcher;
    /// let opts = mcr_manager::WatchOptions::<k8s_openapi::api::core::v1::Secret>::config(
    ///     watcher::Config::default().fields("type=Opaque").any_semantic(),
    /// );
    /// ```
    pub fn config(config: watcher::Config) -> Self {
        config.into()
    }

    /// No selectors, no predicate.
    ///
    /// ```
    /// let opts = mcr_manager::WatchOptions::<k8s_openapi::api::core::v1::Secret>::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }
}

impl<O: Resource> WatchOptions<O> {
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

    /// Watch only this namespace: one namespaced watch
    /// (`GET /api/v1/namespaces/<ns>/configmaps`), which a Role in that namespace allows,
    /// instead of a cluster-wide one, which needs a ClusterRole. Overrides the manager's
    /// [default](crate::ManagerBuilder::default_namespaces). In every cluster the input
    /// watches; ignored for cluster-scoped types. Controllers asking for the same namespace
    /// (and selectors) share its watch. The cache then holds only that namespace: see
    /// [`Context::cached`](crate::Context::cached) for reads outside it.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// let opts = mcr_manager::WatchOptions::<ConfigMap>::new().namespace("team-a");
    /// ```
    #[must_use]
    pub fn namespace(self, namespace: impl Into<String>) -> Self {
        self.namespaces([namespace])
    }

    /// Watch only these namespaces: one namespaced watch per namespace, merged into one
    /// input (see [`namespace`](Self::namespace)); each namespace's watch is shared with every
    /// input naming it. An empty list watches every namespace, like
    /// [`all_namespaces`](Self::all_namespaces).
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// let opts = mcr_manager::WatchOptions::<ConfigMap>::new().namespaces(["team-a", "team-b"]);
    /// ```
    #[must_use]
    pub fn namespaces<I, S>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.namespaces = Some(namespaces.into_iter().map(Into::into).collect());
        self
    }

    /// Watch every namespace (one cluster-wide watch), whatever the manager's
    /// [default](crate::ManagerBuilder::default_namespaces).
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Namespace;
    /// let opts = mcr_manager::WatchOptions::<Namespace>::new().all_namespaces();
    /// ```
    #[must_use]
    pub fn all_namespaces(mut self) -> Self {
        self.namespaces = Some(Vec::new());
        self
    }

    /// Keep `metadata.managedFields` in the cached objects of this input (informers drop them
    /// by default: see [`InformerOptions::keep_managed_fields`]). A separate watch from the
    /// same input without it.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// let opts = mcr_manager::WatchOptions::<ConfigMap>::new().keep_managed_fields();
    /// ```
    #[must_use]
    pub fn keep_managed_fields(mut self) -> Self {
        self.informer.keep_managed_fields = true;
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

    /// Watch in these clusters: the host, the provider's clusters, or both (default: the
    /// controller's, see [`ClusterScope`]). On the reconciled type (`for_*`) it decides where
    /// reconciles run.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Secret;
    /// use mcr_manager::{ClusterScope, WatchOptions};
    /// let opts = WatchOptions::<Secret>::new().labels("sync=true").scope(ClusterScope::Host);
    /// ```
    #[must_use]
    pub fn scope(mut self, scope: ClusterScope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Watch only in the provider clusters for which `filter` returns true (Go's
    /// `WithClusterFilter`, per input). The host is governed by [`scope`](Self::scope) alone.
    /// On the reconciled type (`for_*`) it also decides where reconciles run: a provider
    /// cluster the filter refuses is only watched by the inputs that take it. A refused
    /// cluster costs this input nothing: its informer is not even opened there. The
    /// controller-wide [`Builder::cluster_filter`](crate::Builder::cluster_filter) applies
    /// first.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Secret;
    /// use mcr_manager::WatchOptions;
    /// let opts = WatchOptions::<Secret>::new()
    ///     .cluster_filter(|name, _cluster| name.as_str().starts_with("prod-"));
    /// ```
    #[must_use]
    pub fn cluster_filter(
        mut self,
        filter: impl Fn(&ClusterName, &Cluster) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.filter = Some(Arc::new(filter));
        self
    }
}
