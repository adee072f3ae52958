//! Configuration of the [`ClusterInventoryProvider`](crate::ClusterInventoryProvider).

use std::sync::Arc;
use std::time::Duration;

use mcr_core::members::MemberOptions;

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
    /// the policy of [`Options::members`] applies.
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
    /// profiles with the same value: the oldest (`creationTimestamp`, then `namespace/name`)
    /// owns the name.
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
    /// Member clients, new members and retries: client options (tuning only), the sync timeout
    /// (first request and cache sync of a new member) and the retry backoff. Its
    /// [`policy`](MemberOptions::policy) applies to kubeconfigs from Secrets (Secret strategy;
    /// default: no plugins, no local files, no proxies); the access-provider strategy ignores
    /// it: there, exactly the file's command with the resolved arguments and variables is
    /// allowed for the servers of [`AccessProviders::servers`], local files are refused and
    /// the profile's proxy only honoured with [`AccessProviders::allow_profile_proxy`]. Default:
    /// `MemberOptions::default()`.
    pub members: MemberOptions,
    /// Bound on building a member client, which includes running the credential plugin. A
    /// plugin that hangs fails the attempt for its cluster only. Default: 30 s.
    pub credential_timeout: Duration,
}

impl Options {
    /// Options for `strategy` with every other field at its default.
    ///
    /// ```
    /// use mcr_provider_cluster_inventory::{Naming, Options, Strategy};
    /// let opts = Options::new(Strategy::Secret { consumer: "c".into() });
    /// assert_eq!(opts.naming, Naming::NamespacedName);
    /// assert!(!opts.members.policy.allow_file_references);
    /// ```
    pub fn new(strategy: Strategy) -> Self {
        Options {
            strategy,
            namespaces: Namespaces::AllExcept(Vec::new()),
            label_selector: None,
            naming: Naming::default(),
            is_ready: Arc::new(ClusterProfile::control_plane_healthy),
            disengage_when_unhealthy: false,
            members: MemberOptions::default(),
            credential_timeout: Duration::from_secs(30),
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
            .field("sync_timeout", &self.members.sync_timeout)
            .finish_non_exhaustive()
    }
}
