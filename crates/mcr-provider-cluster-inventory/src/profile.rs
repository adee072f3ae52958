//! The `multicluster.x-k8s.io/v1alpha1` `ClusterProfile` (KEP-4322), as far as the provider
//! reads it.
//!
//! The types are lenient on purpose: every field has a default, so a profile written by any
//! cluster manager deserializes, and a malformed one is reported for that profile alone (the
//! provider watches `DynamicObject`s and converts each one on its own).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, GroupVersionKind};
use serde::{Deserialize, Serialize};

/// API group of ClusterProfiles.
pub const GROUP: &str = "multicluster.x-k8s.io";
/// API version of ClusterProfiles.
pub const VERSION: &str = "v1alpha1";
/// Kind of ClusterProfiles.
pub const KIND: &str = "ClusterProfile";
/// Resource (plural) of ClusterProfiles.
pub const PLURAL: &str = "clusterprofiles";
/// Condition type the default readiness check looks at.
pub const CONDITION_CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";
/// KEP-2149 property holding the cluster's portable name within its ClusterSet.
pub const PROPERTY_CLUSTER_NAME: &str = "cluster.clusterset.k8s.io";
/// Label naming the cluster manager that owns a profile (a useful label selector).
pub const LABEL_CLUSTER_MANAGER: &str = "x-k8s.io/cluster-manager";

/// A ClusterProfile: one member cluster of an inventory.
///
/// ```
/// use mcr_provider_cluster_inventory::ClusterProfile;
/// let p: ClusterProfile = serde_json::from_value(serde_json::json!({
///     "metadata": {"name": "member-1", "namespace": "fleet"},
///     "status": {
///         "conditions": [{"type": "ControlPlaneHealthy", "status": "True"}],
///         "properties": [{"name": "cluster.clusterset.k8s.io", "value": "eu-1"}],
///     },
/// })).unwrap();
/// assert!(p.control_plane_healthy());
/// assert_eq!(p.property("cluster.clusterset.k8s.io"), Some("eu-1"));
/// ```
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClusterProfile {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the cluster manager declares.
    #[serde(default)]
    pub spec: ClusterProfileSpec,
    /// What the cluster manager observed, including how to reach the cluster.
    #[serde(default)]
    pub status: Option<ClusterProfileStatus>,
}

/// `spec` of a [`ClusterProfile`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The cluster manager that owns the profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_manager: Option<ClusterManager>,
}

/// The cluster manager of a [`ClusterProfile`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClusterManager {
    /// Its name (OCM, Fleet, ...).
    #[serde(default)]
    pub name: String,
}

/// `status` of a [`ClusterProfile`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    /// Conditions (`ControlPlaneHealthy`, ...).
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// KEP-2149 properties (`cluster.clusterset.k8s.io`, `clusterset.k8s.io`, ...).
    #[serde(default)]
    pub properties: Vec<Property>,
    /// How to reach the cluster, per access provider (KEP-5339).
    #[serde(default)]
    pub access_providers: Vec<AccessProvider>,
    /// The deprecated name of `accessProviders`; on the same name, `accessProviders` wins.
    #[serde(default)]
    pub credential_providers: Vec<AccessProvider>,
}

/// One status condition (lenient: only `type` and `status` are needed).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One KEP-2149 property.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Property {
    /// Property name.
    #[serde(default)]
    pub name: String,
    /// Property value.
    #[serde(default)]
    pub value: String,
}

/// How a consumer reaches the cluster through one access provider: the provider's name (to be
/// matched with the operator's provider file) and a kubeconfig `cluster` entry (server, CA
/// data, proxy URL, extensions).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AccessProvider {
    /// The access provider's name.
    #[serde(default)]
    pub name: String,
    /// The connection details, in kubeconfig `cluster` form.
    #[serde(default)]
    pub cluster: kube::config::Cluster,
}

impl ClusterProfile {
    /// The `ApiResource` of ClusterProfiles (for `Api<DynamicObject>`).
    ///
    /// ```
    /// let ar = mcr_provider_cluster_inventory::ClusterProfile::api_resource();
    /// assert_eq!(ar.api_version, "multicluster.x-k8s.io/v1alpha1");
    /// assert_eq!(ar.plural, "clusterprofiles");
    /// ```
    pub fn api_resource() -> ApiResource {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
    }

    /// The profile's `namespace/name`, when both are set.
    ///
    /// ```
    /// let p = mcr_provider_cluster_inventory::ClusterProfile::default();
    /// assert!(p.profile_ref().is_none());
    /// ```
    pub fn profile_ref(&self) -> Option<ProfileRef> {
        Some(ProfileRef::new(
            self.metadata.namespace.clone()?,
            self.metadata.name.clone()?,
        ))
    }

    /// The status condition of that type, if any.
    ///
    /// ```
    /// let p = mcr_provider_cluster_inventory::ClusterProfile::default();
    /// assert!(p.condition("ControlPlaneHealthy").is_none());
    /// ```
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
    }

    /// Whether condition `ControlPlaneHealthy` is `True` (the default readiness rule).
    ///
    /// ```
    /// let p = mcr_provider_cluster_inventory::ClusterProfile::default();
    /// assert!(!p.control_plane_healthy());
    /// ```
    pub fn control_plane_healthy(&self) -> bool {
        self.condition(CONDITION_CONTROL_PLANE_HEALTHY)
            .is_some_and(|c| c.status == "True")
    }

    /// The value of a status property, if present.
    ///
    /// ```
    /// let p = mcr_provider_cluster_inventory::ClusterProfile::default();
    /// assert_eq!(p.property("cluster.clusterset.k8s.io"), None);
    /// ```
    pub fn property(&self, name: &str) -> Option<&str> {
        self.status
            .as_ref()?
            .properties
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.value.as_str())
    }

    /// The access provider entry of that name: from `accessProviders`, else from the
    /// deprecated `credentialProviders`.
    ///
    /// ```
    /// use mcr_provider_cluster_inventory::ClusterProfile;
    /// let p: ClusterProfile = serde_json::from_value(serde_json::json!({"status": {
    ///     "credentialProviders": [{"name": "a", "cluster": {"server": "https://old"}}],
    ///     "accessProviders": [{"name": "a", "cluster": {"server": "https://new"}}],
    /// }})).unwrap();
    /// assert_eq!(p.access_provider("a").unwrap().cluster.server.as_deref(), Some("https://new"));
    /// ```
    pub fn access_provider(&self, name: &str) -> Option<&AccessProvider> {
        let status = self.status.as_ref()?;
        status
            .access_providers
            .iter()
            .find(|a| a.name == name)
            .or_else(|| status.credential_providers.iter().find(|a| a.name == name))
    }
}

/// A ClusterProfile's `namespace/name`. Ordered by namespace, then name.
///
/// ```
/// use mcr_provider_cluster_inventory::ProfileRef;
/// assert_eq!(ProfileRef::new("fleet", "a").to_string(), "fleet/a");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProfileRef {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ProfileRef {
    /// A reference to `namespace/name`.
    ///
    /// ```
    /// let r = mcr_provider_cluster_inventory::ProfileRef::new("ns", "n");
    /// assert_eq!(r.name, "n");
    /// ```
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ProfileRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ProfileRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
