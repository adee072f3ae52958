//! Configuration of the [`ClusterInventoryProvider`](crate::ClusterInventoryProvider).

use std::sync::Arc;
use std::time::Duration;

use mcr_core::kubeconfig::{ClientOptions, Policy};

use crate::{AccessProviders, ClusterProfile, Namespaces};

/// Label on a kubeconfig Secret naming the consumer it is meant for (Secret strategy).
pub const SECRET_LABEL_CONSUMER: &str = "x-k8s.io/cluster-inventory-consumer";
/// Label on a kubeconfig Secret naming its ClusterProfile (Secret strategy).
pub const SECRET_LABEL_PROFILE: &str = "x-k8s.io/cluster-profile";
/// Data key of the kubeconfig in such a Secret.
pub const SECRET_DATA_KEY: &str = "Config";

/// Where member credentials come from. Exactly one strategy is configured.
///
/// ```
/// use mcr_provider_cluster_inventory::Strategy;
/// let s = Strategy::Secret { consumer: "my-controller".into() };
/// # let _ = s;
/// ```
#[derive(Clone, Debug)]
pub enum Strategy {
    /// KEP-5339: the profile's `status.accessProviders` entry (server, CA, proxy, extensions)
    /// plus a credential plugin from the operator's provider file. Only the file's commands run.
    AccessProviders(Arc<AccessProviders>),
    /// The deprecated Secret strategy: the one Secret in the profile's namespace labelled
    /// `x-k8s.io/cluster-inventory-consumer=<consumer>` and `x-k8s.io/cluster-profile=<profile>`,
    /// kubeconfig under data key `Config`. Such kubeconfigs are untrusted input:
    /// [`Options::secret_policy`] applies.
    Secret {
        /// This controller's consumer name.
        consumer: String,
    },
}

/// How an engaged cluster is named.
///
/// ```
/// assert_eq!(mcr_provider_cluster_inventory::Naming::default(),
///            mcr_provider_cluster_inventory::Naming::NamespacedName);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Naming {
    /// `<namespace>/<name>` of the profile (the default, as in Go).
    #[default]
    NamespacedName,
    /// The value of the KEP-2149 property `cluster.clusterset.k8s.io` in `status.properties`:
    /// the cluster's portable name. A profile without it is reported and not engaged; two
    /// profiles with the same value: the first seen keeps the name.
    ClusterSetProperty,
}

/// Decides whether a profile may be engaged. Default: [`ClusterProfile::control_plane_healthy`].
pub type ReadyFn = Arc<dyn Fn(&ClusterProfile) -> bool + Send + Sync>;

/// Options of the [`ClusterInventoryProvider`](crate::ClusterInventoryProvider). Build them with
/// [`Options::new`] (every other field has a documented default).
///
/// ```
/// use std::time::Duration;
/// use mcr_provider_cluster_inventory::{Namespaces, Naming, Options, Strategy};
/// let opts = Options {
///     namespaces: Namespaces::One("fleet".into()),
///     label_selector: Some("x-k8s.io/cluster-manager=ocm".into()),
///     naming: Naming::ClusterSetProperty,
///     ..Options::new(Strategy::Secret { consumer: "my-controller".into() })
/// };
/// assert_eq!(opts.credential_timeout, Duration::from_secs(30));
/// ```
#[derive(Clone)]
pub struct Options {
    /// Where credentials come from.
    pub strategy: Strategy,
    /// Namespaces of the hub watched for profiles (and Secrets). Default: all.
    pub namespaces: Namespaces,
    /// Label selector for profiles, e.g. `x-k8s.io/cluster-manager=ocm`. Default: none.
    pub label_selector: Option<String>,
    /// How clusters are named. Default: [`Naming::NamespacedName`].
    pub naming: Naming,
    /// Readiness rule. Default: condition `ControlPlaneHealthy` is `True`.
    pub is_ready: ReadyFn,
    /// What happens when an engaged profile stops being ready. `false` (default): the cluster
    /// stays engaged (its watches retry on their own) and is not rebuilt until the profile is
    /// ready again; `true`: it is disengaged and engaged again once ready.
    pub disengage_when_unhealthy: bool,
    /// Applied to every member client (tuning only). Default: `ClientOptions::default()`.
    pub client_options: ClientOptions,
    /// Policy for kubeconfigs from Secrets (Secret strategy): plugins, local files, proxies.
    /// Default: [`Policy::default`] (none of them). The access-provider strategy ignores it:
    /// there, exactly the file's command with the resolved arguments and variables is allowed,
    /// local files are refused and the profile's proxy is honoured.
    pub secret_policy: Policy,
    /// Bound on building a member client, which includes running the credential plugin. A
    /// plugin that hangs fails the attempt for its cluster only. Default: 30 s.
    pub credential_timeout: Duration,
    /// Bound on the first request and the cache sync of a new member. Default: 30 s.
    pub sync_timeout: Duration,
    /// First retry delay after a failed attempt; doubles per failure. Default: 1 s.
    pub backoff_initial: Duration,
    /// Cap of the retry delay. Default: 5 min.
    pub backoff_max: Duration,
}

impl Options {
    /// Options for `strategy` with every other field at its default.
    ///
    /// ```
    /// use mcr_provider_cluster_inventory::{Naming, Options, Strategy};
    /// let opts = Options::new(Strategy::Secret { consumer: "c".into() });
    /// assert_eq!(opts.naming, Naming::NamespacedName);
    /// assert!(!opts.secret_policy.allow_file_references);
    /// ```
    pub fn new(strategy: Strategy) -> Self {
        Options {
            strategy,
            namespaces: Namespaces::AllExcept(Vec::new()),
            label_selector: None,
            naming: Naming::default(),
            is_ready: Arc::new(ClusterProfile::control_plane_healthy),
            disengage_when_unhealthy: false,
            client_options: ClientOptions::default(),
            secret_policy: Policy::default(),
            credential_timeout: Duration::from_secs(30),
            sync_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("strategy", &self.strategy)
            .field("namespaces", &self.namespaces)
            .field("label_selector", &self.label_selector)
            .field("naming", &self.naming)
            .field("disengage_when_unhealthy", &self.disengage_when_unhealthy)
            .field("credential_timeout", &self.credential_timeout)
            .field("sync_timeout", &self.sync_timeout)
            .finish_non_exhaustive()
    }
}
