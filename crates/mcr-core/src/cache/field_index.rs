//! Field indexes on a [`Cache`]: registering a [`FieldIndex`] on a cluster and listing the
//! objects an index maps a value to.

use std::{fmt::Debug, hash::Hash, sync::Arc};

use kube::Resource;
use serde::de::DeserializeOwned;

use super::{Cache, Informer, InformerKey, InformerOptions, Shared, TypeTag};
use crate::{Error, FieldIndex};

impl Cache {
    /// Registers a field index on this cluster, on the default informer (no selector) of the
    /// index's type, which is created if needed.
    ///
    /// Registering the same index name on the same type again is a no-op; the same name on a
    /// different type is [`Error::Index`].
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use mcr_core::FieldIndex;
    /// let by_app = FieldIndex::new::<ConfigMap>("app", |cm| {
    ///     cm.metadata.labels.as_ref().and_then(|l| l.get("app").cloned()).into_iter().collect()
    /// });
    /// c.cache().index_field(&by_app)?;
    /// let web = c.cache().list_by_index::<ConfigMap>("app", "web")?;
    /// # Ok(()) }
    /// ```
    pub fn index_field(&self, index: &FieldIndex) -> Result<(), Error> {
        let mut names = self.inner.index_names.lock();
        match names.get(index.name()) {
            Some((tag, namespaces)) if tag == index.tag() && namespaces == index.namespaces() => {
                return Ok(());
            }
            Some((tag, namespaces)) if tag == index.tag() => {
                return Err(Error::Index {
                    index: index.name().to_owned(),
                    reason: format!(
                        "cluster \"{}\": already registered for {} in namespaces {:?}, cannot \
                         register it in {:?}",
                        self.cluster(),
                        tag.resource(),
                        namespaces,
                        index.namespaces()
                    ),
                });
            }
            Some((tag, _)) => {
                return Err(Error::Index {
                    index: index.name().to_owned(),
                    reason: format!(
                        "cluster \"{}\": already registered for {}, cannot register it for {}",
                        self.cluster(),
                        tag.resource(),
                        index.resource()
                    ),
                });
            }
            None => {}
        }
        index.install(self);
        names.insert(
            index.name().to_owned(),
            (index.tag().clone(), index.namespaces().to_vec()),
        );
        tracing::debug!(cluster = %self.cluster(), index = index.name(), resource = %index.resource(), "field index registered");
        Ok(())
    }

    /// Objects of type `K` whose field index `index_name` has `value`.
    ///
    /// Errors with [`Error::Index`] if no such index is registered.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let web = c.cache().list_by_index::<ConfigMap>("app", "web")?;
    /// # Ok(()) }
    /// ```
    pub fn list_by_index<K>(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.list_by_index_with::<K>(&(), index_name, value)
    }

    /// Like [`list_by_index`](Cache::list_by_index), for a resource with a dynamic type.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster, ar: kube::core::ApiResource) -> Result<(), mcr_core::Error> {
    /// use kube::core::DynamicObject;
    /// let hits = c.cache().list_by_index_with::<DynamicObject>(&ar, "owner", "x")?;
    /// # Ok(()) }
    /// ```
    pub fn list_by_index_with<K>(
        &self,
        dyntype: &K::DynamicType,
        index_name: &str,
        value: &str,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let tag = TypeTag::of::<K>(dyntype);
        // The informer the index sits on: of its namespaces (see `FieldIndex::in_namespaces`).
        let namespaces = match self.inner.index_names.lock().get(index_name) {
            Some((t, namespaces)) if *t == tag => namespaces.clone(),
            _ => Vec::new(),
        };
        let opts = InformerOptions {
            namespaces,
            ..InformerOptions::default()
        };
        let parts: Option<Vec<Arc<Shared<K>>>> = {
            let state = self.inner.state.lock();
            opts.per_namespace(super::key::cluster_scoped::<K>())
                .into_iter()
                .map(|opts| {
                    let key = InformerKey {
                        tag: tag.clone(),
                        opts: Arc::new(opts),
                    };
                    state
                        .informers
                        .get(&key)
                        .and_then(|e| e.any.clone().downcast::<Shared<K>>().ok())
                })
                .collect()
        };
        match parts {
            Some(parts) => Informer::from_parts(parts).list_by_index(index_name, value),
            None => Err(Error::Index {
                index: index_name.to_owned(),
                reason: format!("no such index on {}", tag.resource()),
            }),
        }
    }
}
