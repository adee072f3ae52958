//! The secondary inputs of the builder: `owns*` and `watches*`.

use std::{fmt::Debug, hash::Hash, sync::Arc};

use kube::{Resource, api::PartialObjectMeta};
use mcr_core::{Cache, ClusterName};
use serde::de::DeserializeOwned;

use super::{
    super::input::{Scope, mapped_requests, owner_requests},
    Builder, IntoRequest, WatchOptions,
};

impl<K> Builder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    /// Reconcile the owner (a `K`, found through `ownerReferences`, in the same cluster and
    /// namespace) whenever a `C` changes.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = mcr_manager::Controller::new(&mgr).for_::<Deployment>().owns::<ConfigMap>();
    /// # }
    /// ```
    #[must_use]
    pub fn owns<C>(self) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.owns_with::<C>(WatchOptions::default())
    }

    /// [`owns`](Self::owns) with selectors / a predicate / a scope (and, for a dynamic type,
    /// [`WatchOptions::dynamic`]).
    ///
    /// ```no_run
    /// # use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// use kube::runtime::predicates;
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = mcr_manager::Controller::new(&mgr)
    ///     .for_::<Deployment>()
    ///     .owns_with::<ConfigMap>(mcr_manager::WatchOptions::new().predicate(predicates::resource_version));
    /// # }
    /// ```
    #[must_use]
    pub fn owns_with<C>(self, opts: WatchOptions<C>) -> Self
    where
        C: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        C::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let dyntype = opts.dyntype.clone();
        let owner = self.dyntype.clone();
        let informer = opts.informer_on(&self.mgr);
        self.add_input(
            Scope::In(opts.scope),
            move |cache: &Cache| cache.informer_with::<C>(dyntype.clone(), informer.clone()),
            opts.predicate,
            opts.filter,
            move |child: &Arc<C>, cluster: &ClusterName| {
                owner_requests::<C, K>(child.as_ref(), &owner, cluster)
            },
        )
    }

    /// [`owns`](Self::owns) through a metadata-only watch of `C` (cheaper for big objects).
    ///
    /// ```no_run
    /// # use k8s_openapi::api::{apps::v1::Deployment, core::v1::Secret};
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = mcr_manager::Controller::new(&mgr)
    ///     .for_::<Deployment>()
    ///     .owns_metadata::<Secret>(Default::default());
    /// # }
    /// ```
    #[must_use]
    pub fn owns_metadata<C>(self, opts: WatchOptions<PartialObjectMeta<C>>) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let owner = self.dyntype.clone();
        let informer = opts.informer_on(&self.mgr);
        self.add_input(
            Scope::In(opts.scope),
            move |cache: &Cache| cache.metadata_informer::<C>((), informer.clone()),
            opts.predicate,
            opts.filter,
            move |child: &Arc<PartialObjectMeta<C>>, cluster: &ClusterName| {
                owner_requests::<PartialObjectMeta<C>, K>(child.as_ref(), &owner, cluster)
            },
        )
    }

    /// Reconcile whatever `mapper` returns when an `O` changes in an engaged cluster. The
    /// mapper gets the object and its cluster, and returns [`ObjectRef`](kube::runtime::reflector::ObjectRef)s
    /// (same cluster) or [`Request`](crate::Request)s (any cluster: the sync-local-to-remote
    /// pattern).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// # use kube::{ResourceExt, runtime::reflector::ObjectRef};
    /// # use mcr_core::ClusterName;
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = mcr_manager::Controller::new(&mgr)
    ///     .for_::<ConfigMap>()
    ///     .watches::<Secret, _>(|secret: Arc<Secret>, _cluster: &ClusterName| {
    ///         let ns = secret.namespace().unwrap_or_default();
    ///         Some(ObjectRef::<ConfigMap>::new(&secret.name_any()).within(&ns))
    ///     });
    /// # }
    /// ```
    #[must_use]
    pub fn watches<O, I>(
        self,
        mapper: impl Fn(Arc<O>, &ClusterName) -> I + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        I: IntoIterator,
        I::Item: IntoRequest<K>,
    {
        self.watches_with::<O, I>(WatchOptions::default(), mapper)
    }

    /// [`watches`](Self::watches) with selectors / a predicate / a
    /// [scope](crate::ClusterScope) (for instance the host only: the sync-local-to-remote
    /// pattern), and for a dynamic type its [`WatchOptions::dynamic`].
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::{ResourceExt, api::{ApiResource, DynamicObject, GroupVersionKind}, runtime::reflector::ObjectRef};
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let b = mcr_manager::Controller::new(&mgr).for_::<ConfigMap>().watches_with::<DynamicObject, _>(
    ///     mcr_manager::WatchOptions::dynamic(ar).labels("sync=true"),
    ///     |w: Arc<DynamicObject>, _| Some(ObjectRef::<ConfigMap>::new(&w.name_any())),
    /// );
    /// # }
    /// ```
    #[must_use]
    pub fn watches_with<O, I>(
        self,
        opts: WatchOptions<O>,
        mapper: impl Fn(Arc<O>, &ClusterName) -> I + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        O::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
        I: IntoIterator,
        I::Item: IntoRequest<K>,
    {
        let informer = opts.informer_on(&self.mgr);
        let dyntype = opts.dyntype;
        self.add_input(
            Scope::In(opts.scope),
            move |cache: &Cache| cache.informer_with::<O>(dyntype.clone(), informer.clone()),
            opts.predicate,
            opts.filter,
            move |obj: &Arc<O>, cluster: &ClusterName| mapped_requests(&mapper, obj, cluster),
        )
    }

    /// [`watches`](Self::watches) through a metadata-only watch of `O`.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// # use kube::{ResourceExt, api::PartialObjectMeta, runtime::reflector::ObjectRef};
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = mcr_manager::Controller::new(&mgr).for_::<ConfigMap>().watches_metadata::<Secret, _>(
    ///     Default::default(),
    ///     |s: Arc<PartialObjectMeta<Secret>>, _| Some(ObjectRef::<ConfigMap>::new(&s.name_any())),
    /// );
    /// # }
    /// ```
    #[must_use]
    pub fn watches_metadata<O, I>(
        self,
        opts: WatchOptions<PartialObjectMeta<O>>,
        mapper: impl Fn(Arc<PartialObjectMeta<O>>, &ClusterName) -> I + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        I: IntoIterator,
        I::Item: IntoRequest<K>,
    {
        let informer = opts.informer_on(&self.mgr);
        self.add_input(
            Scope::In(opts.scope),
            move |cache: &Cache| cache.metadata_informer::<O>((), informer.clone()),
            opts.predicate,
            opts.filter,
            move |obj: &Arc<PartialObjectMeta<O>>, cluster: &ClusterName| {
                mapped_requests(&mapper, obj, cluster)
            },
        )
    }

    /// Watch `O` in the manager's host cluster **on behalf of each engaged cluster**: every
    /// cluster the controller engages gets its own subscription to the host's cache (the host
    /// objects present at that moment first, then changes, until the cluster leaves), and
    /// `mapper` gets that cluster's name, so a bare [`ObjectRef`](kube::runtime::reflector::ObjectRef)
    /// lands in it. A member that joins late is therefore handed every host object at once:
    /// the sync-local-to-remote pattern without a fan-out over a list of names. One watch on
    /// the host, shared, whatever the number of clusters.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::reflector::ObjectRef;
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// // a host ConfigMap triggers the ConfigMap of the same name in every member
    /// let b = mcr_manager::Controller::new(&mgr)
    ///     .for_::<ConfigMap>()
    ///     .watches_host_per_cluster::<ConfigMap, _>(
    ///         mcr_manager::WatchOptions::new().labels("sync=true"),
    ///         |source: Arc<ConfigMap>, _member| Some(ObjectRef::from_obj(source.as_ref())),
    ///     );
    /// # }
    /// ```
    #[must_use]
    pub fn watches_host_per_cluster<O, I>(
        self,
        opts: WatchOptions<O>,
        mapper: impl Fn(Arc<O>, &ClusterName) -> I + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        I: IntoIterator,
        I::Item: IntoRequest<K>,
    {
        let informer = opts.informer_on(&self.mgr);
        self.add_input(
            Scope::HostPerCluster,
            move |cache: &Cache| cache.informer_with::<O>((), informer.clone()),
            opts.predicate,
            opts.filter,
            move |obj: &Arc<O>, cluster: &ClusterName| mapped_requests(&mapper, obj, cluster),
        )
    }
}
