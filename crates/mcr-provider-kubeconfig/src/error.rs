//! Why a kubeconfig Secret did not (yet) become an engaged cluster.

use crate::SecretRef;

/// Why the first request to a member (`GET /version`) failed (the type shared by every
/// provider).
pub use mcr_core::members::ProbeError;

/// The reason a Secret could not be turned into an engaged cluster.
///
/// Every message names the Secret (`namespace/name`) and never contains kubeconfig contents or
/// credentials, so errors are safe to log.
///
/// ```
/// use mcr_provider_kubeconfig::{Error, SecretRef};
/// use std::time::Duration;
/// use mcr_provider_kubeconfig::ProbeError;
/// let err = Error::Unreachable { secret: SecretRef::new("fleet", "a"), source: ProbeError::Timeout(Duration::from_secs(5)) };
/// assert_eq!(err.to_string(), "secret fleet/a");
/// assert_eq!(
///     mcr_core::ErrorChain(&err).to_string(),
///     "secret fleet/a: API server unreachable: no answer to GET /version within the probe timeout (5s)"
/// );
/// assert!(err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig could not be parsed or does not yield a usable client configuration.
    #[error("secret {secret}: {source}")]
    Kubeconfig {
        /// The Secret.
        secret: SecretRef,
        /// What is wrong with the kubeconfig.
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// The kubeconfig uses an `exec` plugin or `auth-provider` the exec policy refuses, or reads
    /// a local file or uses a proxy, which the [`Policy`] does not allow. Not retried until the
    /// Secret changes.
    ///
    /// [`Policy`]: mcr_core::kubeconfig::Policy
    #[error("secret {secret}: refused by policy: {source}")]
    PolicyDenied {
        /// The Secret.
        secret: SecretRef,
        /// The policy violation.
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// The first request to the member (`GET /version`) failed: the server could not be
    /// reached, did not answer in time, or refused the request (the source says which).
    #[error("secret {secret}")]
    Unreachable {
        /// The Secret.
        secret: SecretRef,
        /// Why: the request's error, or the timeout.
        #[source]
        source: ProbeError,
    },
    /// Starting, syncing or engaging the cluster failed.
    #[error("secret {secret}: {source}")]
    Engage {
        /// The Secret.
        secret: SecretRef,
        /// The lifecycle error.
        #[source]
        source: mcr_core::Error,
    },
    /// Any other failure of the member helper (e.g. a client build that did not finish in
    /// time).
    #[error("secret {secret}")]
    Member {
        /// The Secret.
        secret: SecretRef,
        /// What went wrong.
        #[source]
        source: mcr_core::members::Error,
    },
}

impl Error {
    /// Whether the provider retries the Secret with backoff (everything but policy
    /// violations, which wait for the Secret to change).
    ///
    /// ```
    /// use mcr_provider_kubeconfig::{Error, SecretRef};
    /// let err = Error::PolicyDenied {
    ///     secret: SecretRef::new("fleet", "a"),
    ///     source: mcr_core::kubeconfig::Error::Empty,
    /// };
    /// assert!(!err.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Error::PolicyDenied { .. })
    }

    /// The Secret the error is about.
    ///
    /// ```
    /// use mcr_provider_kubeconfig::{Error, SecretRef};
    /// let err = Error::Unreachable { secret: SecretRef::new("ns", "a"), source: mcr_provider_kubeconfig::ProbeError::Timeout(std::time::Duration::from_secs(1)) };
    /// assert_eq!(err.secret().to_string(), "ns/a");
    /// ```
    pub fn secret(&self) -> &SecretRef {
        match self {
            Error::Kubeconfig { secret, .. }
            | Error::PolicyDenied { secret, .. }
            | Error::Unreachable { secret, .. }
            | Error::Engage { secret, .. }
            | Error::Member { secret, .. } => secret,
        }
    }
}
