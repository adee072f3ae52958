//! Errors: the provider file (a startup error) and per-profile reasons.

use std::path::PathBuf;
use std::time::Duration;

use crate::ProfileRef;

/// The operator's access-provider file cannot be used. Raised at startup, naming the file.
///
/// ```
/// use mcr_provider_cluster_inventory::AccessProviders;
/// let err = AccessProviders::from_json(b"{not json", "/etc/p.json").unwrap_err();
/// assert!(err.to_string().starts_with("access-provider file /etc/p.json: malformed JSON"), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderFileError {
    /// The file cannot be read.
    #[error("access-provider file {}: cannot be read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON of the expected shape.
    #[error("access-provider file {}: malformed JSON: {source}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where and what.
        #[source]
        source: serde_json::Error,
    },
    /// The file parses but a provider is unusable (no command, duplicate name, ...).
    #[error("access-provider file {}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Why a ClusterProfile did not (yet) become an engaged cluster.
///
/// Every message names the profile (`namespace/name`) and never contains credentials or plugin
/// output, so errors are safe to log.
///
/// ```
/// use mcr_provider_cluster_inventory::{Error, ProfileRef};
/// let err = Error::Unreachable { profile: ProfileRef::new("fleet", "a"), reason: "API server unreachable: connection refused".into() };
/// assert_eq!(err.to_string(), "cluster profile fleet/a: API server unreachable: connection refused");
/// assert!(err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The provider's options are unusable (raised by the constructor).
    #[error("cluster inventory provider: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
    },
    /// The profile cannot be turned into a connection (no matching access provider, no or
    /// several Secrets, a malformed extension, no name property, ...). Waits for the profile
    /// or its Secrets to change.
    #[error("cluster profile {profile}: {reason}")]
    Invalid {
        /// The profile.
        profile: ProfileRef,
        /// Why.
        reason: String,
    },
    /// The [`Policy`](mcr_core::kubeconfig::Policy) refused the kubeconfig (an exec plugin,
    /// auth-provider, local file or proxy: [`is_policy_denial`]). Not retried until the profile
    /// or its Secret changes.
    ///
    /// [`is_policy_denial`]: mcr_core::kubeconfig::Error::is_policy_denial
    #[error("cluster profile {profile}: refused by policy: {source}")]
    PolicyDenied {
        /// The profile.
        profile: ProfileRef,
        /// The violated rule (content-free).
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// Building the client failed: a kubeconfig that does not parse, or a credential plugin
    /// that failed or printed something that is not an `ExecCredential`.
    #[error("cluster profile {profile}: {source}")]
    Client {
        /// The profile.
        profile: ProfileRef,
        /// The kubeconfig error (content-free).
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// The credential plugin (or client construction) did not finish in time.
    #[error("cluster profile {profile}: the credential plugin did not finish within {after:?}")]
    PluginTimeout {
        /// The profile.
        profile: ProfileRef,
        /// The bound ([`Options::credential_timeout`](crate::Options::credential_timeout)).
        after: Duration,
    },
    /// The first request to the member (`GET /version`) failed: unreachable, no answer in
    /// time, or refused (the reason says which).
    #[error("cluster profile {profile}: {reason}")]
    Unreachable {
        /// The profile.
        profile: ProfileRef,
        /// Why.
        reason: String,
    },
    /// Starting, syncing or engaging the cluster failed.
    #[error("cluster profile {profile}: {source}")]
    Engage {
        /// The profile.
        profile: ProfileRef,
        /// The lifecycle error (boxed: it is large).
        #[source]
        source: Box<mcr_core::Error>,
    },
}

impl Error {
    /// Whether the provider retries with backoff. [`Error::Invalid`], [`Error::Config`],
    /// [`Error::PolicyDenied`] and kubeconfigs that do not parse wait for a change instead.
    ///
    /// ```
    /// use mcr_provider_cluster_inventory::{Error, ProfileRef};
    /// let err = Error::Invalid { profile: ProfileRef::new("ns", "a"), reason: "no Secret".into() };
    /// assert!(!err.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        use mcr_core::kubeconfig::Error as K;
        match self {
            Error::Config { .. } | Error::Invalid { .. } | Error::PolicyDenied { .. } => false,
            Error::Client { source, .. } => {
                !(source.is_policy_denial() || matches!(source, K::Parse { .. } | K::Empty))
            }
            _ => true,
        }
    }
}
