//! How informers are told apart ([`InformerOptions`], the type tag and key).

use std::{any::TypeId, sync::Arc, time::Duration};

use kube::{
    Resource,
    api::{ListParams, VersionMatch, WatchParams},
    runtime::watcher,
};

/// Selectors and list/watch settings of an informer. Informers with different options are
/// different watches. Built from kube-runtime's `watcher::Config` with `From`, so every setting
/// of it (selectors, timeout, page size, list semantic, bookmarks, initial list strategy)
/// reaches the watch.
///
/// ```
/// use kube::runtime::watcher;
/// use mcr_core::InformerOptions;
///
/// let opts = InformerOptions {
///     label_selector: Some("app=web".into()),
///     ..Default::default()
/// };
/// let same = InformerOptions::from(watcher::Config::default().labels("app=web"));
/// assert_eq!(opts, same);
/// let tuned = InformerOptions::from(watcher::Config::default().labels("app=web").page_size(50));
/// assert_ne!(opts, tuned);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InformerOptions {
    /// A label selector, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// A field selector, e.g. `metadata.name=x`.
    pub field_selector: Option<String>,
    /// The server-side timeout of each watch call, in seconds (`watcher::Config::timeout`).
    pub timeout: Option<u32>,
    /// The page size of list calls (`watcher::Config::page_size`; default 500).
    pub page_size: Option<u32>,
    /// Whether lists may be served from the API server's cache (`ListSemantic::Any`).
    pub any_semantic: bool,
    /// Whether the initial list is a streaming list (`InitialListStrategy::StreamingList`).
    pub streaming_list: bool,
    /// Whether to ask for bookmarks (default true).
    pub bookmarks: bool,
    /// Whether cached objects keep `metadata.managedFields` (default false). API servers send
    /// every object with its field-ownership records, which reconcilers rarely read and which
    /// can outweigh the object's own data (in B4 they took ~60% of the cache's memory), so
    /// informers drop them as each object arrives, before it is stored or handed to anyone
    /// (what controller-runtime's `cache.TransformStripManagedFields` does when asked). Set it
    /// to read them from the cache; informers that differ only here are different watches.
    pub keep_managed_fields: bool,
    /// The namespaces watched. Empty (the default): every namespace, through one cluster-wide
    /// watch (`GET /api/v1/configmaps`), which needs a ClusterRole. Else one namespaced watch
    /// per namespace (`GET /api/v1/namespaces/<ns>/configmaps`), which a Role in that
    /// namespace allows; the informer merges them. Each namespace's watch is shared by every
    /// informer of the cache that names it with the same other options, so an informer of
    /// `[a, b]` and one of `[a]` cost two watches, not three. Order and duplicates do not
    /// matter. Ignored for cluster-scoped types; a `DynamicObject`'s scope is not known, so
    /// leave it empty for a cluster-scoped dynamic type.
    pub namespaces: Vec<String>,
}

impl Default for InformerOptions {
    fn default() -> Self {
        Self::from(watcher::Config::default())
    }
}

impl From<watcher::Config> for InformerOptions {
    fn from(config: watcher::Config) -> Self {
        Self {
            label_selector: config.label_selector,
            field_selector: config.field_selector,
            timeout: config.timeout,
            page_size: config.page_size,
            any_semantic: config.list_semantic == watcher::ListSemantic::Any,
            streaming_list: config.initial_list_strategy
                == watcher::InitialListStrategy::StreamingList,
            bookmarks: config.bookmarks,
            keep_managed_fields: false,
            namespaces: Vec::new(),
        }
    }
}

/// The identity of a resource type: its Rust type (`PartialObjectMeta<K>` for metadata-only)
/// and its group/version/plural.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TypeTag {
    type_id: TypeId,
    group: String,
    version: String,
    plural: String,
}

impl TypeTag {
    pub(crate) fn of<K: Resource + 'static>(dyntype: &K::DynamicType) -> Self {
        TypeTag {
            type_id: TypeId::of::<K>(),
            group: K::group(dyntype).into_owned(),
            version: K::version(dyntype).into_owned(),
            plural: K::plural(dyntype).into_owned(),
        }
    }

    /// `configmaps`, `deployments.apps`, `widgets.example.com`.
    pub(crate) fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// One watch of a cache: its type and options, `opts.namespaces` holding at most one namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct InformerKey {
    pub(super) tag: TypeTag,
    /// Shared with the watch's stream, which lists and watches with them.
    pub(super) opts: Arc<InformerOptions>,
}

impl InformerOptions {
    /// The options of each watch these options take: one per namespace (sorted, without
    /// duplicates), or these options unchanged for every namespace. `cluster_scoped`: the
    /// type has no namespaces, so the namespaces are dropped.
    pub(super) fn per_namespace(&self, cluster_scoped: bool) -> Vec<InformerOptions> {
        if self.namespaces.is_empty() || cluster_scoped {
            return vec![InformerOptions {
                namespaces: Vec::new(),
                ..self.clone()
            }];
        }
        let mut namespaces = self.namespaces.clone();
        namespaces.sort();
        namespaces.dedup();
        namespaces
            .into_iter()
            .map(|ns| InformerOptions {
                namespaces: vec![ns],
                ..self.clone()
            })
            .collect()
    }

    /// The one namespace of a watch's options (see [`per_namespace`](Self::per_namespace)).
    pub(super) fn namespace(&self) -> Option<&str> {
        self.namespaces.first().map(String::as_str)
    }
}

/// Whether `K` is a cluster-scoped type (`k8s_openapi::ClusterResourceScope`); a dynamic
/// type's scope is not known, and counts as namespaced.
pub(super) fn cluster_scoped<K: Resource>() -> bool {
    std::any::type_name::<K::Scope>() == std::any::type_name::<kube::core::ClusterResourceScope>()
}

impl InformerOptions {
    /// The parameters of the initial list's pages (kube-runtime's `watcher::Config` semantics:
    /// `any_semantic` lists from the API server's cache at any resource version).
    pub(super) fn list_params(&self) -> ListParams {
        let mut params = ListParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            limit: self.page_size,
            ..ListParams::default()
        };
        if self.any_semantic {
            params.resource_version = Some("0".into());
            params.version_match = Some(VersionMatch::NotOlderThan);
        }
        params
    }

    /// The parameters of a watch (`initial`: a streaming list's first watch, which asks for
    /// the initial events).
    pub(super) fn watch_params(&self, initial: bool) -> WatchParams {
        WatchParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            timeout: self.timeout,
            bookmarks: self.bookmarks,
            send_initial_events: initial && self.streaming_list,
        }
    }

    /// How long a watch may stay silent: the server-side timeout (290 s unless set), or no
    /// limit when it is set to 0.
    pub(super) fn idle_timeout(&self) -> Option<Duration> {
        match self.timeout {
            Some(0) => None,
            t => Some(Duration::from_secs(u64::from(t.unwrap_or(290)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_watch_per_namespace_sorted_without_duplicates_and_none_for_cluster_scoped_types() {
        use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
        let opts = InformerOptions {
            namespaces: vec!["b".into(), "a".into(), "b".into()],
            label_selector: Some("x=y".into()),
            ..InformerOptions::default()
        };
        let parts = opts.per_namespace(cluster_scoped::<ConfigMap>());
        let namespaces: Vec<_> = parts.iter().map(|p| p.namespace()).collect();
        assert_eq!(namespaces, [Some("a"), Some("b")]);
        assert!(
            parts
                .iter()
                .all(|p| p.label_selector.as_deref() == Some("x=y"))
        );
        let parts = opts.per_namespace(cluster_scoped::<Namespace>());
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].namespace(), None);
        assert!(cluster_scoped::<kube::core::PartialObjectMeta<Namespace>>());
        assert!(!cluster_scoped::<kube::core::DynamicObject>());
        let every = InformerOptions::default().per_namespace(false);
        assert_eq!(every, [InformerOptions::default()]);
    }

    #[test]
    fn every_watcher_setting_reaches_the_requests() {
        let config = watcher::Config::default()
            .labels("a=b")
            .fields("metadata.name=x")
            .timeout(42)
            .page_size(7)
            .any_semantic()
            .streaming_lists();
        let opts = InformerOptions::from(config);
        let list = opts.list_params();
        assert_eq!(list.label_selector.as_deref(), Some("a=b"));
        assert_eq!(list.field_selector.as_deref(), Some("metadata.name=x"));
        assert_eq!(list.limit, Some(7));
        assert_eq!(list.resource_version.as_deref(), Some("0"));
        assert_eq!(list.version_match, Some(VersionMatch::NotOlderThan));
        let first = opts.watch_params(true);
        assert_eq!(first.label_selector.as_deref(), Some("a=b"));
        assert_eq!(first.field_selector.as_deref(), Some("metadata.name=x"));
        assert_eq!(first.timeout, Some(42));
        assert!(first.bookmarks && first.send_initial_events);
        assert!(!opts.watch_params(false).send_initial_events);
        assert_eq!(opts.idle_timeout(), Some(Duration::from_secs(42)));

        let plain = InformerOptions::default();
        let list = plain.list_params();
        assert_eq!((list.resource_version, list.version_match), (None, None));
        assert!(!plain.watch_params(true).send_initial_events);
        assert_eq!(plain.idle_timeout(), Some(Duration::from_secs(290)));
        let off = InformerOptions::from(watcher::Config::default().timeout(0).disable_bookmarks());
        assert_eq!(off.idle_timeout(), None);
        assert!(!off.watch_params(false).bookmarks);
    }
}
