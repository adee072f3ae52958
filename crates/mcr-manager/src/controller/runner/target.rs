//! [`Target`]: what a reconciler receives first, the cached object or the request itself.

use std::sync::Arc;

use kube::{Resource, runtime::reflector::ObjectRef};
use mcr_core::ClusterName;

use crate::controller::request::Request;

/// The first argument of a reconciler, built from a popped key and the cached object.
pub(crate) trait Target<K: Resource>: Clone + Send + 'static {
    /// `None` skips the key (the object-keyed model: a key missing from the cache is not
    /// reconciled).
    fn target(cluster: &ClusterName, key: &ObjectRef<K>, cached: Option<Arc<K>>) -> Option<Self>;
}

/// kube-runtime's model ([`register`](crate::Builder::register)): the object, or nothing.
impl<K> Target<K> for Arc<K>
where
    K: Resource + Send + Sync + 'static,
{
    fn target(_: &ClusterName, _: &ObjectRef<K>, cached: Option<Arc<K>>) -> Option<Self> {
        cached
    }
}

/// The request-keyed model ([`register_request`](crate::Builder::register_request)): every
/// key, also when its object is gone.
impl<K> Target<K> for Request<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync,
{
    fn target(cluster: &ClusterName, key: &ObjectRef<K>, _: Option<Arc<K>>) -> Option<Self> {
        Some(Request::new(cluster.clone(), key.clone()))
    }
}
