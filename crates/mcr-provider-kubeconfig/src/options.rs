//! Configuration of the [`KubeconfigProvider`](crate::KubeconfigProvider).

use std::time::Duration;

use mcr_core::kubeconfig::{ClientOptions, Policy};

/// Default label key selecting kubeconfig Secrets; the label's value must be `"true"`.
pub const DEFAULT_LABEL: &str = "sigs.k8s.io/multicluster-runtime-kubeconfig";

/// Default data key holding the kubeconfig bytes inside a Secret.
pub const DEFAULT_DATA_KEY: &str = "kubeconfig";

/// Default namespace watched when [`Options::namespaces`] is left at its default.
pub const DEFAULT_NAMESPACE: &str = mcr_core::scope::DEFAULT_NAMESPACE;

/// Which namespaces of the management cluster the provider watches for kubeconfig Secrets:
/// the scope type shared by every mcr provider, [`mcr_core::scope::Namespaces`].
pub use mcr_core::scope::Namespaces;

/// Options of the [`KubeconfigProvider`](crate::KubeconfigProvider); every field has a
/// documented default (`Options::default()`).
///
/// ```
/// use std::time::Duration;
/// use mcr_provider_kubeconfig::{Namespaces, Options};
/// let opts = Options {
///     namespaces: Namespaces::One("fleet".into()),
///     sync_timeout: Duration::from_secs(10),
///     ..Options::default()
/// };
/// assert_eq!(opts.label, "sigs.k8s.io/multicluster-runtime-kubeconfig");
/// assert_eq!(opts.data_key, "kubeconfig");
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Namespaces to watch. Default: `Namespaces::One("default")`.
    pub namespaces: Namespaces,
    /// Label key a Secret must carry with the value `"true"`. Default: [`DEFAULT_LABEL`].
    pub label: String,
    /// Data key holding the kubeconfig. Default: [`DEFAULT_DATA_KEY`].
    pub data_key: String,
    /// Applied to every member client (timeouts, user agent, impersonation, ...); tuning only,
    /// replacing it cannot weaken [`policy`](Self::policy). Default: `ClientOptions::default()`.
    pub client_options: ClientOptions,
    /// What a kubeconfig from a Secret may make the controller do: run `exec` credential
    /// plugins or `auth-provider`s, read local files, use a proxy. Default: [`Policy::default`]
    /// (a Secret is untrusted input: no plugins, no local files, or a hostile Secret could send
    /// this controller's own service-account token to a server of its choosing, and no proxy).
    pub policy: Policy,
    /// How long a new member may take to answer its first request and to sync its cache before
    /// the attempt counts as failed and is retried. Default: 30 s.
    pub sync_timeout: Duration,
    /// First retry delay after a failed attempt (invalid kubeconfig, unreachable server).
    /// Doubles on every further failure of the same Secret. Default: 1 s.
    pub backoff_initial: Duration,
    /// Upper bound of the retry delay. Default: 5 min.
    pub backoff_max: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespaces: Namespaces::default(),
            label: DEFAULT_LABEL.to_string(),
            data_key: DEFAULT_DATA_KEY.to_string(),
            client_options: ClientOptions::default(),
            policy: Policy::default(),
            sync_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }
}

impl Options {
    /// The label selector used for the Secret watch: `<label>=true`.
    ///
    /// ```
    /// let sel = mcr_provider_kubeconfig::Options::default().label_selector();
    /// assert_eq!(sel, "sigs.k8s.io/multicluster-runtime-kubeconfig=true");
    /// ```
    pub fn label_selector(&self) -> String {
        format!("{}=true", self.label)
    }
}
