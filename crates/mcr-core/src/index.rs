//! [`FieldIndex`]: a named, type-erased field index that providers fan out to every cluster.

use std::{fmt, hash::Hash, sync::Arc};

use kube::{
    Resource,
    core::{ApiResource, DynamicObject},
};
use serde::de::DeserializeOwned;

use crate::{
    Cache, InformerOptions,
    cache::{Extractor, TypeTag},
};

type Installer = Arc<dyn Fn(&Cache, &str, &[String]) + Send + Sync>;

struct Inner {
    name: String,
    tag: TypeTag,
    install: Installer,
    /// The namespaces of the informer it sits on (empty: every namespace), sorted.
    namespaces: Vec<String>,
}

/// A named field index on one resource type, applied to a cluster's [`Cache`] with
/// [`Cache::index_field`] (or to every cluster with
/// [`Provider::index_field`](crate::Provider::index_field)).
///
/// The extractor returns the index values of an object (none, one or several). Cheap to clone.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use mcr_core::FieldIndex;
///
/// let by_owner = FieldIndex::new::<ConfigMap>("owner", |cm| {
///     cm.metadata
///         .owner_references
///         .iter()
///         .flatten()
///         .map(|o| o.name.clone())
///         .collect()
/// });
/// assert_eq!(by_owner.name(), "owner");
/// assert_eq!(by_owner.resource(), "configmaps");
/// ```
#[derive(Clone)]
pub struct FieldIndex {
    inner: Arc<Inner>,
}

impl FieldIndex {
    /// An index on a typed resource.
    ///
    /// ```
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// let by_team = mcr_core::FieldIndex::new::<Deployment>("team", |d| {
    ///     d.metadata.labels.iter().flat_map(|l| l.get("team").cloned()).collect()
    /// });
    /// assert_eq!(by_team.resource(), "deployments.apps");
    /// ```
    pub fn new<K>(
        name: impl Into<String>,
        extract: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> FieldIndex
    where
        K: Resource<DynamicType = ()>
            + Clone
            + DeserializeOwned
            + fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let extract: Extractor<K> = Arc::new(extract);
        FieldIndex::erase::<K>(name.into(), (), extract)
    }

    /// An index on a dynamic resource (`DynamicObject` of the given `ApiResource`).
    ///
    /// ```
    /// use kube::core::{ApiResource, GroupVersionKind};
    /// let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let by_color = mcr_core::FieldIndex::new_dynamic(ar, "color", |w| {
    ///     w.data["spec"]["color"].as_str().map(str::to_owned).into_iter().collect()
    /// });
    /// assert_eq!(by_color.resource(), "widgets.example.com");
    /// ```
    pub fn new_dynamic(
        resource: ApiResource,
        name: impl Into<String>,
        extract: impl Fn(&DynamicObject) -> Vec<String> + Send + Sync + 'static,
    ) -> FieldIndex {
        let extract: Extractor<DynamicObject> = Arc::new(extract);
        FieldIndex::erase::<DynamicObject>(name.into(), resource, extract)
    }

    fn erase<K>(name: String, dyntype: K::DynamicType, extract: Extractor<K>) -> FieldIndex
    where
        K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let tag = TypeTag::of::<K>(&dyntype);
        let install: Installer =
            Arc::new(move |cache: &Cache, name: &str, namespaces: &[String]| {
                let opts = InformerOptions {
                    namespaces: namespaces.to_vec(),
                    ..InformerOptions::default()
                };
                let informer = cache.informer_with::<K>(dyntype.clone(), opts);
                informer.add_index(name, extract.clone());
            });
        FieldIndex {
            inner: Arc::new(Inner {
                name,
                tag,
                install,
                namespaces: Vec::new(),
            }),
        }
    }

    /// This index on the informer of these namespaces instead of the cluster-wide one: one
    /// namespaced watch per namespace (see [`InformerOptions::namespaces`]), which a Role in
    /// each allows; lookups then cover those namespaces only. An empty list is every namespace.
    /// mcr-manager's `Manager::index_field` applies the manager's default namespaces to an
    /// index that names none.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// let i = mcr_core::FieldIndex::new::<ConfigMap>("owner", |_| vec![]).in_namespaces(["b", "a"]);
    /// assert_eq!(i.namespaces(), ["a", "b"]);
    /// ```
    #[must_use]
    pub fn in_namespaces<I, S>(&self, namespaces: I) -> FieldIndex
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut namespaces: Vec<String> = namespaces.into_iter().map(Into::into).collect();
        namespaces.sort();
        namespaces.dedup();
        FieldIndex {
            inner: Arc::new(Inner {
                name: self.inner.name.clone(),
                tag: self.inner.tag.clone(),
                install: self.inner.install.clone(),
                namespaces,
            }),
        }
    }

    /// The namespaces of the informer the index sits on, sorted (empty: every namespace).
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// let i = mcr_core::FieldIndex::new::<ConfigMap>("owner", |_| vec![]);
    /// assert!(i.namespaces().is_empty());
    /// ```
    pub fn namespaces(&self) -> &[String] {
        &self.inner.namespaces
    }

    /// The index name.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// let i = mcr_core::FieldIndex::new::<ConfigMap>("n", |_| vec![]);
    /// assert_eq!(i.name(), "n");
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The indexed resource, for messages: `configmaps`, `widgets.example.com`.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Secret;
    /// let i = mcr_core::FieldIndex::new::<Secret>("n", |_| vec![]);
    /// assert_eq!(i.resource(), "secrets");
    /// ```
    pub fn resource(&self) -> String {
        self.inner.tag.resource()
    }

    pub(crate) fn tag(&self) -> &TypeTag {
        &self.inner.tag
    }

    /// Adds the index to the informer of its type and namespaces in `cache` (no-op if
    /// present).
    pub(crate) fn install(&self, cache: &Cache) {
        (self.inner.install)(cache, &self.inner.name, &self.inner.namespaces)
    }
}

impl fmt::Debug for FieldIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FieldIndex")
            .field("name", &self.inner.name)
            .field("resource", &self.resource())
            .field("namespaces", &self.inner.namespaces)
            .finish_non_exhaustive()
    }
}
