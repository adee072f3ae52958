//! Configuration of the [`CapiProvider`](crate::CapiProvider).

use std::sync::Arc;

use kube::api::DynamicObject;
use mcr_core::ClusterName;
use mcr_core::members::MemberOptions;
use mcr_core::scope::Namespaces;

use crate::{CLUSTER_NAME_LABEL, CapiVersion, ObjectRef};

/// Default data key of the kubeconfig Secret (Cluster API's convention).
pub const DEFAULT_SECRET_KEY: &str = "value";

/// A test on a `Cluster` object (predicate, readiness rule).
pub type ClusterFn = Arc<dyn Fn(&DynamicObject) -> bool + Send + Sync>;

/// Maps a `Cluster` (`namespace/name`) to a cluster name.
pub type NameFn = Arc<dyn Fn(&ObjectRef) -> ClusterName + Send + Sync>;

/// Maps a `Cluster` (`namespace/name`) to its kubeconfig Secret.
pub type SecretFn = Arc<dyn Fn(&ObjectRef) -> ObjectRef + Send + Sync>;

/// What happens to an engaged cluster whose `Cluster` stops being ready (or, with
/// [`Options::paused`] `= Paused::Disengage`, gets paused).
///
/// ```
/// assert_eq!(mcr_provider_capi::NotReady::default(), mcr_provider_capi::NotReady::Keep);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NotReady {
    /// Keep it engaged (the default, and Go's behaviour). Readiness in Cluster API means "the
    /// control plane was initialized once"; it can flap during upgrades and remediation while
    /// the API server still answers, and tearing down every watch and queued request on each
    /// flap costs more than it saves. Credentials and deletion are still followed.
    #[default]
    Keep,
    /// Disengage it; it is engaged again when it becomes ready.
    Disengage,
}

/// How paused Clusters (`spec.paused: true` or the `cluster.x-k8s.io/paused` annotation) are
/// treated.
///
/// ```
/// assert_eq!(mcr_provider_capi::Paused::default(), mcr_provider_capi::Paused::Ignore);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Paused {
    /// Pausing changes nothing (the default, and Go's behaviour): pausing stops Cluster API's
    /// reconciliation, not the workload cluster.
    #[default]
    Ignore,
    /// A paused Cluster is treated as not ready: not engaged while paused, and an engaged one
    /// follows [`Options::not_ready`].
    NotReady,
    /// A paused Cluster is never engaged, and an engaged one is disengaged when paused.
    Disengage,
}

/// Options of the [`CapiProvider`](crate::CapiProvider); `Options::default()` follows Cluster
/// API's conventions.
///
/// ```
/// use std::sync::Arc;
/// use mcr_core::scope::Namespaces;
/// use mcr_provider_capi::{CapiVersion, Options};
/// let opts = Options {
///     version: CapiVersion::V1Beta1,
///     namespaces: Namespaces::AllExcept(vec!["capi-tenant-a".into()]),
///     label_selector: Some("cluster.x-k8s.io/watch-filter=fleet-1".into()),
///     predicate: Some(Arc::new(|c| c.metadata.labels.as_ref().is_some_and(|l| l.contains_key("env")))),
///     ..Options::default()
/// };
/// assert_eq!(opts.secret_key, "value");
/// ```
#[derive(Clone)]
pub struct Options {
    /// API version of the `Cluster` objects. Default: [`CapiVersion::V1Beta2`].
    pub version: CapiVersion,
    /// Namespaces to watch (Clusters and their Secrets). Default: every namespace
    /// (`Namespaces::AllExcept(vec![])`).
    pub namespaces: Namespaces,
    /// Label selector of the Cluster watch, applied by the server. Cluster API's convention for
    /// splitting clusters between controllers is the `cluster.x-k8s.io/watch-filter` label: a
    /// controller started with `--watch-filter=x` only handles objects labelled
    /// `cluster.x-k8s.io/watch-filter=x`; use `Some("cluster.x-k8s.io/watch-filter=x")` to do
    /// the same. Default: `None` (every Cluster).
    pub label_selector: Option<String>,
    /// A test on the `Cluster` object: Clusters for which it returns `false` are not engaged
    /// (and are disengaged if they were). Default: `None` (every Cluster).
    pub predicate: Option<ClusterFn>,
    /// Readiness rule. Default: `None`, the rule of [`Options::version`]
    /// ([`CapiVersion::is_ready`]).
    pub is_ready: Option<ClusterFn>,
    /// What happens when an engaged Cluster stops being ready. Default: [`NotReady::Keep`].
    pub not_ready: NotReady,
    /// How paused Clusters are treated. Default: [`Paused::Ignore`].
    pub paused: Paused,
    /// Cluster name of a `Cluster`. Default: `None`, `<namespace>/<name>` (as Go's provider,
    /// so names interoperate). When several `Cluster`s map to one name, the oldest
    /// (`creationTimestamp`, then `namespace/name`) owns it, whatever the order they are listed
    /// in; the others are [`ClusterState::Conflict`](crate::ClusterState::Conflict).
    pub name: Option<NameFn>,
    /// The kubeconfig Secret of a `Cluster`. Default: `None`, `<name>-kubeconfig` in the
    /// Cluster's namespace (Cluster API's convention). Rotations are seen at once only for
    /// Secrets the Secret watch covers (in a watched namespace, matching
    /// [`Options::secret_label_selector`]); others are read again on `Cluster` events while
    /// missing, and otherwise only when the Cluster becomes ready again.
    pub secret: Option<SecretFn>,
    /// Data key of the kubeconfig in the Secret. Default: [`DEFAULT_SECRET_KEY`] (`value`).
    pub secret_key: String,
    /// Label selector of the (metadata-only) Secret watch that picks up rotations. Default:
    /// `Some("cluster.x-k8s.io/cluster-name")`, the label Cluster API puts on the kubeconfig
    /// Secrets it writes; `None` watches every Secret in scope (needed when your kubeconfig
    /// Secrets do not carry that label).
    pub secret_label_selector: Option<String>,
    /// How workload-cluster clients are built and retried: client options (tuning only), the
    /// kubeconfig [`Policy`](mcr_core::kubeconfig::Policy) (default: none of `exec` plugins,
    /// `auth-provider`s, local files or proxies — a Secret may not make the controller run
    /// programs or read local files), the sync timeout (which also bounds the member's first
    /// request and the read of its Secret) and the retry backoff. Default:
    /// `MemberOptions::default()`.
    pub members: MemberOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            version: CapiVersion::default(),
            namespaces: Namespaces::AllExcept(Vec::new()),
            label_selector: None,
            predicate: None,
            is_ready: None,
            not_ready: NotReady::default(),
            paused: Paused::default(),
            name: None,
            secret: None,
            secret_key: DEFAULT_SECRET_KEY.to_string(),
            secret_label_selector: Some(CLUSTER_NAME_LABEL.to_string()),
            members: MemberOptions::default(),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |o: bool| if o { "custom" } else { "default" };
        f.debug_struct("Options")
            .field("version", &self.version)
            .field("namespaces", &self.namespaces)
            .field("label_selector", &self.label_selector)
            .field("predicate", &self.predicate.is_some())
            .field("is_ready", &set(self.is_ready.is_some()))
            .field("not_ready", &self.not_ready)
            .field("paused", &self.paused)
            .field("name", &set(self.name.is_some()))
            .field("secret", &set(self.secret.is_some()))
            .field("secret_key", &self.secret_key)
            .field("secret_label_selector", &self.secret_label_selector)
            .field("members", &self.members)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// The cluster name of a `Cluster`.
    ///
    /// ```
    /// use mcr_provider_capi::{ObjectRef, Options};
    /// assert_eq!(Options::default().cluster_name(&ObjectRef::new("ns", "c")).as_str(), "ns/c");
    /// ```
    pub fn cluster_name(&self, cluster: &ObjectRef) -> ClusterName {
        match &self.name {
            Some(f) => f(cluster),
            None => ClusterName::from(cluster.to_string()),
        }
    }

    /// The kubeconfig Secret of a `Cluster`.
    ///
    /// ```
    /// use mcr_provider_capi::{ObjectRef, Options};
    /// let s = Options::default().secret_ref(&ObjectRef::new("ns", "c"));
    /// assert_eq!(s, ObjectRef::new("ns", "c-kubeconfig"));
    /// ```
    pub fn secret_ref(&self, cluster: &ObjectRef) -> ObjectRef {
        match &self.secret {
            Some(f) => f(cluster),
            None => ObjectRef::new(&cluster.namespace, format!("{}-kubeconfig", cluster.name)),
        }
    }

    /// Whether the Cluster is ready, by [`Options::is_ready`] or the version's rule.
    ///
    /// ```
    /// use kube::api::DynamicObject;
    /// let obj: DynamicObject = serde_json::from_value(serde_json::json!({
    ///     "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c"},
    /// })).unwrap();
    /// assert!(!mcr_provider_capi::Options::default().ready(&obj));
    /// ```
    pub fn ready(&self, cluster: &DynamicObject) -> bool {
        match &self.is_ready {
            Some(f) => f(cluster),
            None => self.version.is_ready(cluster),
        }
    }
}
