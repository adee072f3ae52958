//! Reading Cluster API `Cluster` objects untyped: references, API versions, readiness, pause.

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

/// The API group of Cluster API's core types.
pub const GROUP: &str = "cluster.x-k8s.io";

/// The annotation that pauses a Cluster (any value).
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";

/// The label Cluster API puts on a cluster's Secrets (kubeconfig, CA, ...), valued with the
/// cluster's name.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// The label Cluster API controllers started with `--watch-filter=<value>` select on.
pub const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";

/// The `cluster.x-k8s.io` API version of the `Cluster` objects to watch.
///
/// ```
/// use mcr_provider_capi::CapiVersion;
/// assert_eq!(CapiVersion::default(), CapiVersion::V1Beta2);
/// assert_eq!(CapiVersion::V1Beta1.api_resource().api_version, "cluster.x-k8s.io/v1beta1");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CapiVersion {
    /// `cluster.x-k8s.io/v1beta1`, for Cluster API releases before v1.11.
    V1Beta1,
    /// `cluster.x-k8s.io/v1beta2` (Cluster API v1.11 and later). The default.
    #[default]
    V1Beta2,
}

impl CapiVersion {
    /// `v1beta1` or `v1beta2`.
    ///
    /// ```
    /// assert_eq!(mcr_provider_capi::CapiVersion::V1Beta2.as_str(), "v1beta2");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            CapiVersion::V1Beta1 => "v1beta1",
            CapiVersion::V1Beta2 => "v1beta2",
        }
    }

    /// The `ApiResource` of `clusters.cluster.x-k8s.io` in this version.
    ///
    /// ```
    /// let ar = mcr_provider_capi::CapiVersion::V1Beta2.api_resource();
    /// assert_eq!((ar.group.as_str(), ar.plural.as_str()), ("cluster.x-k8s.io", "clusters"));
    /// ```
    pub fn api_resource(self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(GROUP, self.as_str(), "Cluster");
        ApiResource::from_gvk_with_plural(&gvk, "clusters")
    }

    /// The default readiness rule of this version:
    /// * v1beta2: `status.initialization.controlPlaneInitialized == true`;
    /// * v1beta1: `status.controlPlaneReady == true` or `status.phase == "Provisioned"`.
    ///
    /// ```
    /// use kube::api::DynamicObject;
    /// use mcr_provider_capi::CapiVersion;
    /// let obj: DynamicObject = serde_json::from_value(serde_json::json!({
    ///     "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
    ///     "metadata": {"name": "c", "namespace": "ns"},
    ///     "status": {"initialization": {"controlPlaneInitialized": true}},
    /// })).unwrap();
    /// assert!(CapiVersion::V1Beta2.is_ready(&obj));
    /// assert!(!CapiVersion::V1Beta1.is_ready(&obj));
    /// ```
    pub fn is_ready(self, cluster: &DynamicObject) -> bool {
        let status = &cluster.data["status"];
        match self {
            CapiVersion::V1Beta2 => {
                status["initialization"]["controlPlaneInitialized"].as_bool() == Some(true)
            }
            CapiVersion::V1Beta1 => {
                status["controlPlaneReady"].as_bool() == Some(true)
                    || status["phase"].as_str() == Some("Provisioned")
            }
        }
    }
}

/// A namespaced object: a `Cluster` or its kubeconfig Secret. Displays as `namespace/name`.
///
/// ```
/// let r = mcr_provider_capi::ObjectRef::new("fleet", "prod-1");
/// assert_eq!(r.to_string(), "fleet/prod-1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectRef {
    /// A reference to `namespace/name`.
    ///
    /// ```
    /// let r = mcr_provider_capi::ObjectRef::new("fleet", "prod-1");
    /// assert_eq!(r.name, "prod-1");
    /// ```
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The reference of an object with a namespace and a name.
    pub(crate) fn of(meta: &kube::api::ObjectMeta) -> Option<Self> {
        Some(ObjectRef::new(meta.namespace.clone()?, meta.name.clone()?))
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Whether the Cluster is paused: `spec.paused: true` or the `cluster.x-k8s.io/paused`
/// annotation (any value), as Cluster API's own controllers read it.
///
/// ```
/// use kube::api::DynamicObject;
/// let obj: DynamicObject = serde_json::from_value(serde_json::json!({
///     "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
///     "metadata": {"name": "c", "namespace": "ns", "annotations": {"cluster.x-k8s.io/paused": ""}},
/// })).unwrap();
/// assert!(mcr_provider_capi::is_paused(&obj));
/// ```
pub fn is_paused(cluster: &DynamicObject) -> bool {
    let annotated = cluster
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION));
    annotated || cluster.data["spec"]["paused"] == Value::Bool(true)
}
