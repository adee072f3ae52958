//! A request to reconcile one object in one cluster.

use std::{fmt, hash::Hash};

use kube::{Resource, runtime::reflector::ObjectRef};
use mcr_core::ClusterName;

/// A request to reconcile the object `object` in the cluster `cluster`.
///
/// Displays as `cluster://<cluster>/<namespace>/<name>` (the namespace is empty for
/// cluster-scoped objects, the cluster name is empty for the host cluster).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::runtime::reflector::ObjectRef;
/// use mcr_manager::Request;
///
/// let req = Request::new("east", ObjectRef::<ConfigMap>::new("settings").within("default"));
/// assert_eq!(req.to_string(), "cluster://east/default/settings");
/// ```
pub struct Request<K: Resource> {
    /// The cluster the object lives in.
    pub cluster: ClusterName,
    /// The object.
    pub object: ObjectRef<K>,
}

impl<K: Resource> Request<K> {
    /// A request for `object` in `cluster`.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::reflector::ObjectRef;
    /// # use mcr_manager::Request;
    /// let req = Request::new(mcr_core::ClusterName::host(), ObjectRef::<ConfigMap>::new("x").within("ns"));
    /// assert!(req.cluster.is_host());
    /// ```
    pub fn new(cluster: impl Into<ClusterName>, object: ObjectRef<K>) -> Self {
        Self {
            cluster: cluster.into(),
            object,
        }
    }
}

impl<K: Resource> Clone for Request<K>
where
    K::DynamicType: Clone,
{
    fn clone(&self) -> Self {
        Self {
            cluster: self.cluster.clone(),
            object: self.object.clone(),
        }
    }
}

impl<K: Resource> PartialEq for Request<K>
where
    K::DynamicType: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        self.cluster == other.cluster && self.object == other.object
    }
}

impl<K: Resource> Eq for Request<K> where K::DynamicType: Eq {}

impl<K: Resource> Hash for Request<K>
where
    K::DynamicType: Hash,
{
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.cluster.hash(state);
        self.object.hash(state);
    }
}

impl<K: Resource> fmt::Debug for Request<K>
where
    K::DynamicType: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("cluster", &self.cluster)
            .field("object", &self.object)
            .finish()
    }
}

impl<K: Resource> fmt::Display for Request<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cluster://{}/{}/{}",
            self.cluster,
            self.object.namespace.as_deref().unwrap_or_default(),
            self.object.name
        )
    }
}

/// What a mapper (see [`Builder::watches`](crate::controller::Builder::watches)) may return:
/// a [`Request`] for any cluster, or a bare [`ObjectRef`] meaning "in the cluster the
/// watched object came from" (so kube-runtime mappers port unchanged).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::runtime::reflector::ObjectRef;
/// use mcr_manager::{IntoRequest, Request};
///
/// let same = ObjectRef::<ConfigMap>::new("a").within("ns").into_request(&"east".into());
/// assert_eq!(same.cluster, "east");
/// let other = Request::new("west", ObjectRef::<ConfigMap>::new("a")).into_request(&"east".into());
/// assert_eq!(other.cluster, "west");
/// ```
pub trait IntoRequest<K: Resource> {
    /// Converts into a request; `source` is the cluster the triggering object lives in.
    fn into_request(self, source: &ClusterName) -> Request<K>;
}

impl<K: Resource> IntoRequest<K> for Request<K> {
    fn into_request(self, _source: &ClusterName) -> Request<K> {
        self
    }
}

impl<K: Resource> IntoRequest<K> for ObjectRef<K> {
    fn into_request(self, source: &ClusterName) -> Request<K> {
        Request::new(source.clone(), self)
    }
}
