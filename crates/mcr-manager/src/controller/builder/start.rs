//! [`Start`]: choosing the reconciled type (`for_`, `for_with`, `for_metadata`).

use std::{fmt::Debug, hash::Hash, sync::Arc};

use kube::{Resource, api::PartialObjectMeta, runtime::reflector::ObjectRef};
use mcr_core::{Cache, ClusterName};
use serde::de::DeserializeOwned;

use super::{Builder, Start, WatchOptions};
use crate::controller::{
    input::{Batch, PrimaryFn, Scope},
    request::Request,
};

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

    /// Reconcile `K`, triggered by changes to `K` in every engaged cluster of the
    /// controller's default [scope](crate::ClusterScope).
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
        self.for_with(WatchOptions::default())
    }

    /// Like [`for_`](Self::for_), with selectors / a predicate / a
    /// [scope](crate::ClusterScope) (which decides where reconciles run), and for a dynamic
    /// type (e.g. `DynamicObject` + `ApiResource`) its [`WatchOptions::dynamic`].
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Secret;
    /// use kube::{api::{ApiResource, DynamicObject, GroupVersionKind}};
    /// use mcr_manager::{Controller, WatchOptions};
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = Controller::new(&mgr).for_with(WatchOptions::<Secret>::new().labels("sync=true"));
    /// let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let b = Controller::new(&mgr).for_with(WatchOptions::<DynamicObject>::dynamic(ar));
    /// # }
    /// ```
    pub fn for_with<K>(self, opts: WatchOptions<K>) -> Builder<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    {
        let dyntype = opts.dyntype.clone();
        let informer = opts.informer_on(&self.mgr);
        let dt = dyntype.clone();
        let primary: PrimaryFn<K> =
            Arc::new(move |cache: &Cache| cache.informer_with::<K>(dt.clone(), informer.clone()));
        let open = primary.clone();
        let dt = dyntype.clone();
        let name = self
            .name
            .unwrap_or_else(|| K::kind(&dyntype).to_ascii_lowercase());
        let mut builder = Builder::new(self.mgr, name, dyntype, primary);
        builder.primary_scope = opts.scope;
        builder.primary_filter = opts.filter.clone();
        builder.add_input(
            Scope::In(opts.scope),
            move |cache| open(cache),
            opts.predicate,
            opts.filter,
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
        let informer = opts.informer_on(&self.mgr);
        let primary: PrimaryFn<PartialObjectMeta<K>> =
            Arc::new(move |cache: &Cache| cache.metadata_informer::<K>((), informer.clone()));
        let open = primary.clone();
        let name = self
            .name
            .unwrap_or_else(|| K::kind(&()).to_ascii_lowercase());
        let mut builder = Builder::new(self.mgr, name, (), primary);
        builder.primary_scope = opts.scope;
        builder.primary_filter = opts.filter.clone();
        builder.add_input(
            Scope::In(opts.scope),
            move |cache| open(cache),
            opts.predicate,
            opts.filter,
            |obj: &Arc<PartialObjectMeta<K>>, cluster: &ClusterName| {
                let object = ObjectRef::from_obj_with(obj.as_ref(), ());
                Some(Batch::One(Request::new(cluster.clone(), object)))
            },
        )
    }
}
