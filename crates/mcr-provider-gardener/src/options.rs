//! [`Options`] of the Gardener provider.

use std::time::Duration;

use mcr_core::credentials::RenewalOptions;
use mcr_core::kubeconfig::ClientOptions;
use mcr_core::scope::Namespaces;

/// Which kubeconfig subresource credentials come from.
///
/// ```
/// assert_eq!(mcr_provider_gardener::KubeconfigKind::default().subresource(), "adminkubeconfig");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KubeconfigKind {
    /// `shoots/adminkubeconfig` (`AdminKubeconfigRequest`): cluster-admin.
    #[default]
    Admin,
    /// `shoots/viewerkubeconfig` (`ViewerKubeconfigRequest`): read-only controllers.
    Viewer,
}

impl KubeconfigKind {
    /// The subresource name.
    ///
    /// ```
    /// assert_eq!(mcr_provider_gardener::KubeconfigKind::Viewer.subresource(), "viewerkubeconfig");
    /// ```
    pub fn subresource(self) -> &'static str {
        match self {
            KubeconfigKind::Admin => "adminkubeconfig",
            KubeconfigKind::Viewer => "viewerkubeconfig",
        }
    }

    pub(crate) fn request_kind(self) -> &'static str {
        match self {
            KubeconfigKind::Admin => "AdminKubeconfigRequest",
            KubeconfigKind::Viewer => "ViewerKubeconfigRequest",
        }
    }
}

/// Which of a Shoot's `status.advertisedAddresses` the client connects to.
///
/// ```
/// use mcr_provider_gardener::Address;
/// let internal = Address::Named("internal".into());
/// # let _ = internal;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Address {
    /// The kubeconfig's current context: the first advertised address, as GEP-16 says.
    #[default]
    First,
    /// The advertised address of this name (`external`, `internal`, `service-account-issuer`,
    /// …); a Shoot without it is not engaged.
    Named(String),
}

/// Options of the [`GardenerProvider`](crate::GardenerProvider).
///
/// ```
/// use std::time::Duration;
/// use mcr_core::scope::Namespaces;
/// use mcr_provider_gardener::Options;
/// let opts = Options {
///     namespaces: Namespaces::One("garden-dev".into()),
///     expiration: Duration::from_secs(1800),
///     ..Options::default()
/// };
/// assert_eq!((opts.cluster_name)("garden-dev", "a"), "garden-dev/a");
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Project namespaces to watch (`mcr_core::scope`; default: all, `AllExcept(vec![])`).
    pub namespaces: Namespaces,
    /// Requested lifetime of the credentials (`spec.expirationSeconds`, default one hour; the
    /// garden may cap it).
    pub expiration: Duration,
    /// Admin or viewer kubeconfigs (default admin).
    pub kubeconfig: KubeconfigKind,
    /// Which advertised address to connect to (default: the first).
    pub address: Address,
    /// Engage hibernated Shoots (default false: a hibernated Shoot is disengaged, its API
    /// server is down).
    pub engage_hibernated: bool,
    /// When to renew credentials (default: at 80 % of their lifetime, with jitter).
    pub renewal: RenewalOptions,
    /// Bound on each kubeconfig request (default 30 s).
    pub request_timeout: Duration,
    /// How long a new cluster's cache may take to sync (default 30 s).
    pub sync_timeout: Duration,
    /// First delay before the table retries a Shoot that could not be engaged (default 1 s;
    /// doubles up to `retry_max`).
    pub retry_initial: Duration,
    /// Longest retry delay (default 60 s).
    pub retry_max: Duration,
    /// Client settings for member clients.
    pub client: ClientOptions,
    /// The cluster name of Shoot `(namespace, name)` (default `<namespace>/<name>`).
    pub cluster_name: fn(&str, &str) -> String,
}

fn default_name(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespaces: Namespaces::AllExcept(Vec::new()),
            expiration: Duration::from_secs(3600),
            kubeconfig: KubeconfigKind::Admin,
            address: Address::First,
            engage_hibernated: false,
            renewal: RenewalOptions::default(),
            request_timeout: Duration::from_secs(30),
            sync_timeout: Duration::from_secs(30),
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            client: ClientOptions::default(),
            cluster_name: default_name,
        }
    }
}
