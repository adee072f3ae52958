//! Type-erased watch inputs: how one input turns one cluster's cache into a stream of requests.

use std::{collections::HashMap, fmt::Debug, hash::Hash, panic::AssertUnwindSafe, sync::Arc};

use futures::{StreamExt, stream::BoxStream};
use kube::{
    Resource, ResourceExt,
    runtime::{Predicate, reflector::ObjectRef},
};
use mcr_core::{Cache, CacheEvent, Cluster, ClusterName, Informer};
use serde::de::DeserializeOwned;

use super::{
    request::{IntoRequest, Request},
    scope::ClusterScope,
};
use mcr_core::panic_message;

use crate::controller::scope::ClusterFilter;

/// Requests produced by one event: almost always exactly one, so that case does not allocate.
pub(crate) enum Batch<K: Resource> {
    One(Request<K>),
    Many(Vec<Request<K>>),
}

/// The requests of one event, and whether they can wait behind live changes: the event was
/// an informer's first list, a replay or an unchanged relist ([`CacheEvent::Listed`]).
pub(crate) struct Arrival<K: Resource> {
    pub(crate) batch: Batch<K>,
    pub(crate) initial: bool,
}

/// One input's live subscription on one cluster.
pub(crate) struct Subscription<K: Resource> {
    pub(crate) stream: BoxStream<'static, Arrival<K>>,
    pub(crate) restarts: Box<dyn Fn() -> u64 + Send + Sync>,
    /// The informer subscribed to (an `Informer<O>`), for [`Context::store`](crate::Context::store).
    pub(crate) informer: ErasedInformer,
}

/// An `Informer<O>` of some type `O`.
pub(crate) type ErasedInformer = Arc<dyn std::any::Any + Send + Sync>;

/// Subscribes an input on a cluster.
pub(crate) type InputFn<K> =
    Arc<dyn Fn(&Cluster, &ClusterName) -> Subscription<K> + Send + Sync + 'static>;

/// Opens the primary informer of a cluster's cache.
pub(crate) type PrimaryFn<K> = Arc<dyn Fn(&Cache) -> Informer<K> + Send + Sync + 'static>;

/// A type-erased predicate (see `kube::runtime::predicates`).
pub(crate) type PredicateFn<O> = Arc<dyn Fn(&O) -> Option<u64> + Send + Sync + 'static>;

/// Wraps any kube-runtime predicate.
pub(crate) fn erase_predicate<O>(p: impl Predicate<O> + Send + Sync + 'static) -> PredicateFn<O> {
    Arc::new(move |o: &O| p.hash_property(o))
}

/// Where an input watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The engaged clusters of this scope (`None` until `register` resolves the controller's
    /// default).
    In(Option<ClusterScope>),
    /// The host cluster's cache, subscribed once per cluster the controller reconciles in (for
    /// that cluster's lifetime, current objects first) and mapped into that cluster.
    HostPerCluster,
}

impl Scope {
    /// Whether this input watches a cluster (the host if `host`) the controller engaged, given
    /// whether the controller reconciles in it (`target`).
    pub(crate) fn watches(self, host: bool, target: bool) -> bool {
        match self {
            Self::In(scope) => scope.is_some_and(|s| s.includes(host)),
            Self::HostPerCluster => target,
        }
    }
}

/// One declared input of a controller.
pub(crate) struct Input<K: Resource> {
    pub(crate) scope: Scope,
    /// Which provider clusters the input watches (`WatchOptions::cluster_filter`).
    pub(crate) filter: Option<ClusterFilter>,
    pub(crate) subscribe: InputFn<K>,
    /// Opens the input's informer in a cache (shared, so the later subscription finds it).
    pub(crate) open: OpenFn,
}

/// Opens an informer in a cluster's cache without subscribing to it.
pub(crate) type OpenFn = Arc<dyn Fn(&Cache) + Send + Sync + 'static>;

/// Subscribes to `informer` (of `cluster`), drops applied events whose predicate value did not
/// change (per object), and maps each remaining object to requests with `map`. A panic in the
/// user's predicate or mapper drops that one event, logged with the cluster and the object; the
/// controller keeps running.
pub(crate) fn subscribe_filtered<O, K>(
    informer: Informer<O>,
    cluster: ClusterName,
    predicate: Option<PredicateFn<O>>,
    mut map: impl FnMut(&Arc<O>) -> Option<Batch<K>> + Send + 'static,
) -> Subscription<K>
where
    O: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    O::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    K: Resource + Send + 'static,
{
    let mut seen: HashMap<String, u64> = HashMap::new();
    let erased: ErasedInformer = Arc::new(informer.clone());
    // Each event is filtered and mapped as it is polled: a `filter_map` with a future would
    // keep room for a pending result (a whole request batch) in every subscription.
    let mut events = informer.subscribe();
    let mut arrival = move |event: CacheEvent<O>| {
        let object = event.object().clone();
        let initial = matches!(event, CacheEvent::Listed(_));
        let out = std::panic::catch_unwind(AssertUnwindSafe(|| match event {
            CacheEvent::Listed(obj) | CacheEvent::Applied(obj) => {
                let pass = match (&predicate, obj.meta().uid.as_deref()) {
                    (Some(pred), Some(uid)) => match pred(&obj) {
                        Some(value) => match seen.get_mut(uid) {
                            Some(old) if *old == value => false,
                            Some(old) => {
                                *old = value;
                                true
                            }
                            None => {
                                seen.insert(uid.to_owned(), value);
                                true
                            }
                        },
                        None => true,
                    },
                    _ => true,
                };
                if pass { map(&obj) } else { None }
            }
            CacheEvent::Deleted(obj) => {
                if let Some(uid) = obj.meta().uid.as_deref() {
                    seen.remove(uid);
                }
                map(&obj)
            }
        }));
        let out = out.unwrap_or_else(|panic| {
            tracing::error!(
                cluster = %cluster,
                namespace = object.meta().namespace.as_deref().unwrap_or(""),
                name = object.meta().name.as_deref().unwrap_or(""),
                panic = %panic_message(panic.as_ref()),
                "a watch mapper or predicate panicked; this event is dropped"
            );
            None
        });
        out.map(|batch| Arrival { batch, initial })
    };
    let stream = futures::stream::poll_fn(move |cx| {
        loop {
            match std::task::ready!(events.poll_next_unpin(cx)) {
                Some(event) => {
                    if let Some(arrival) = arrival(event) {
                        return std::task::Poll::Ready(Some(arrival));
                    }
                }
                None => return std::task::Poll::Ready(None),
            }
        }
    })
    .boxed();
    Subscription {
        stream,
        restarts: Box::new(move || informer.watch_restarts()),
        informer: erased,
    }
}

/// Maps the owner references of `child` that point to a `K` into requests (same namespace,
/// same cluster).
pub(crate) fn owner_requests<C: Resource, K: Resource>(
    child: &C,
    dyntype: &K::DynamicType,
    cluster: &ClusterName,
) -> Option<Batch<K>>
where
    K::DynamicType: Clone,
{
    let ns = child.namespace();
    let mut refs = child
        .owner_references()
        .iter()
        .filter_map(|o| ObjectRef::<K>::from_owner_ref(ns.as_deref(), o, dyntype.clone()));
    let first = refs.next()?;
    let first = Request::new(cluster.clone(), first);
    match refs.next() {
        None => Some(Batch::One(first)),
        Some(second) => {
            let mut all = vec![first, Request::new(cluster.clone(), second)];
            all.extend(refs.map(|r| Request::new(cluster.clone(), r)));
            Some(Batch::Many(all))
        }
    }
}

/// Runs a user mapper and collects its output.
pub(crate) fn mapped_requests<O, K, I>(
    mapper: &(impl Fn(Arc<O>, &ClusterName) -> I + ?Sized),
    obj: &Arc<O>,
    cluster: &ClusterName,
) -> Option<Batch<K>>
where
    K: Resource,
    I: IntoIterator,
    I::Item: IntoRequest<K>,
{
    let mut iter = mapper(obj.clone(), cluster).into_iter();
    let first = iter.next()?.into_request(cluster);
    match iter.next() {
        None => Some(Batch::One(first)),
        Some(second) => {
            let mut all = vec![first, second.into_request(cluster)];
            all.extend(iter.map(|r| r.into_request(cluster)));
            Some(Batch::Many(all))
        }
    }
}
