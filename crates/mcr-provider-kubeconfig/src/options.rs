//! Configuration of the [`KubeconfigProvider`](crate::KubeconfigProvider).

use mcr_core::members::MemberOptions;

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
/// use mcr_core::members::MemberOptions;
/// use mcr_provider_kubeconfig::{Namespaces, Options};
/// let opts = Options {
///     namespaces: Namespaces::One("fleet".into()),
///     members: MemberOptions { sync_timeout: Duration::from_secs(10), ..MemberOptions::default() },
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
    /// Member clients (client options and kubeconfig [`Policy`](mcr_core::kubeconfig::Policy)),
    /// the sync timeout of a new member and the retry backoff of a failing one. Default:
    /// `MemberOptions::default()`: a Secret is untrusted input, so its kubeconfig may not run
    /// plugins or read local files (or a hostile Secret could send this controller's own
    /// service-account token to a server of its choosing), nor use a proxy.
    pub members: MemberOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespaces: Namespaces::default(),
            label: DEFAULT_LABEL.to_string(),
            data_key: DEFAULT_DATA_KEY.to_string(),
            members: MemberOptions::default(),
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
