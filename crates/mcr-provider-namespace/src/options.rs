//! [`Options`] of the namespace provider.

use std::time::Duration;

/// Namespaces excluded by default: the system namespaces of every cluster.
pub const DEFAULT_EXCLUDED: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// Options of [`NamespaceProvider`](crate::NamespaceProvider).
///
/// ```
/// use std::time::Duration;
/// use mcr_provider_namespace::Options;
///
/// let opts = Options {
///     label_selector: Some("tenant=true".into()),
///     excluded: vec!["kube-system".into()],
///     sync_timeout: Duration::from_secs(10),
///     ..Options::default()
/// };
/// assert!(opts.is_excluded("kube-system"));
/// assert!(!opts.is_excluded("team-a"));
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Only namespaces matching this label selector become clusters (default: all).
    pub label_selector: Option<String>,
    /// Namespaces that never become clusters (default: [`DEFAULT_EXCLUDED`]).
    pub excluded: Vec<String>,
    /// How long a new namespace cluster's cache may take to sync (default 30 s).
    pub sync_timeout: Duration,
    /// Delay before retrying a namespace whose cluster could not be engaged (default 5 s):
    /// the table's backoff for these members, fixed at this delay.
    pub retry_delay: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            label_selector: None,
            excluded: DEFAULT_EXCLUDED.iter().map(|s| (*s).to_owned()).collect(),
            sync_timeout: Duration::from_secs(30),
            retry_delay: Duration::from_secs(5),
        }
    }
}

impl Options {
    /// Whether `namespace` is excluded.
    ///
    /// ```
    /// assert!(mcr_provider_namespace::Options::default().is_excluded("kube-public"));
    /// ```
    pub fn is_excluded(&self, namespace: &str) -> bool {
        self.excluded.iter().any(|e| e == namespace)
    }
}
