//! [`Target`]: what a reconciler receives first, the cached object or the request itself.

mod sealed {
    /// Only mcr's two models implement [`Target`](super::Target).
    pub trait Sealed {}
    impl<K> Sealed for std::sync::Arc<K> {}
    impl<K: kube::Resource> Sealed for crate::Request<K> {}
}

use std::sync::Arc;

use kube::{Resource, runtime::reflector::ObjectRef};
use mcr_core::ClusterName;

use crate::controller::request::Request;

/// The first argument of a reconciler, which chooses how its keys are reconciled (see
/// [`Builder::register`](crate::Builder::register)): `Arc<K>` (the cached object; a key
/// whose object is not in the cache is skipped) or [`Request<K>`] (every key). Sealed: these
/// two are the only ones.
pub trait Target<K: Resource>: sealed::Sealed + Clone + Send + 'static {
    /// `None` skips the key (the object-keyed model: a key missing from the cache is not
    /// reconciled).
    #[doc(hidden)]
    fn target(cluster: &ClusterName, key: &ObjectRef<K>, cached: Option<Arc<K>>) -> Option<Self>;
}

/// kube-runtime's model: the object, or nothing.
impl<K> Target<K> for Arc<K>
where
    K: Resource + Send + Sync + 'static,
{
    fn target(_: &ClusterName, _: &ObjectRef<K>, cached: Option<Arc<K>>) -> Option<Self> {
        cached
    }
}

/// Go controller-runtime's model: every key, also when its object is gone.
impl<K> Target<K> for Request<K>
where
    K: Resource + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync,
{
    fn target(cluster: &ClusterName, key: &ObjectRef<K>, _: Option<Arc<K>>) -> Option<Self> {
        Some(Request::new(cluster.clone(), key.clone()))
    }
}
