//! Why a member could not be ensured: [`Error`] and [`ProbeError`].

use std::time::Duration;

use crate::{ClusterName, kubeconfig};

/// Why the first request to a new member (`GET /version`) failed.
///
/// ```
/// use std::time::Duration;
/// let err = mcr_core::members::ProbeError::Timeout(Duration::from_secs(5));
/// assert_eq!(err.to_string(), "no answer within 5s");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The request failed.
    #[error("GET /version failed")]
    Request(#[source] kube::Error),
    /// Obtaining the request's credentials failed (an exec plugin's error): its output may hold
    /// credential material, so it is not kept.
    #[error("GET /version failed: obtaining credentials failed")]
    Credentials,
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Why [`Members::ensure`](super::Members::ensure) could not engage a member.
///
/// Every message names the cluster and never contains kubeconfig contents or credentials.
/// [`is_retryable`](Error::is_retryable) tells the policy denials (which only a new kubeconfig
/// can fix) from everything else.
///
/// ```
/// use mcr_core::members::Error;
/// let err = Error::BuildTimeout { cluster: "east".into(), after: std::time::Duration::from_secs(3) };
/// assert_eq!(err.to_string(), "cluster \"east\": building the client did not finish within 3s");
/// assert!(err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig does not yield a usable client (missing context, bad CA, failed plugin).
    #[error("cluster \"{cluster}\": {source}")]
    Kubeconfig {
        /// The cluster.
        cluster: ClusterName,
        /// What is wrong with the kubeconfig.
        #[source]
        source: kubeconfig::Error,
    },
    /// The exec policy or the file-reference rule refused the kubeconfig
    /// ([`kubeconfig::Error::is_policy_denial`]). Not retried until the source changes.
    #[error("cluster \"{cluster}\": refused by policy: {source}")]
    PolicyDenied {
        /// The cluster.
        cluster: ClusterName,
        /// The violated rule.
        #[source]
        source: kubeconfig::Error,
    },
    /// Building the client (an exec plugin, typically) took longer than
    /// [`MembersOptions::build_timeout`](super::MembersOptions::build_timeout).
    #[error("cluster \"{cluster}\": building the client did not finish within {after:?}")]
    BuildTimeout {
        /// The cluster.
        cluster: ClusterName,
        /// The timeout.
        after: Duration,
    },
    /// The member's API server did not answer the first request in time.
    #[error("cluster \"{cluster}\": API server unreachable")]
    Unreachable {
        /// The cluster.
        cluster: ClusterName,
        /// The request's error, or the timeout.
        #[source]
        source: ProbeError,
    },
    /// Starting, syncing or engaging the cluster failed.
    #[error("cluster \"{cluster}\": engage failed")]
    Engage {
        /// The cluster.
        cluster: ClusterName,
        /// The lifecycle error.
        #[source]
        source: crate::Error,
    },
}

impl Error {
    /// Whether retrying (with backoff) can help without a new kubeconfig: everything but
    /// [`Error::PolicyDenied`].
    ///
    /// ```
    /// use mcr_core::members::Error;
    /// let denied = Error::PolicyDenied {
    ///     cluster: "a".into(),
    ///     source: mcr_core::kubeconfig::Error::AuthProviderNotAllowed { context: "c".into(), provider: "gcp".into() },
    /// };
    /// assert!(!denied.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Error::PolicyDenied { .. })
    }

    /// The cluster the error is about.
    ///
    /// ```
    /// let err = mcr_core::members::Error::BuildTimeout { cluster: "a".into(), after: Default::default() };
    /// assert_eq!(err.cluster().as_str(), "a");
    /// ```
    pub fn cluster(&self) -> &ClusterName {
        match self {
            Error::Kubeconfig { cluster, .. }
            | Error::PolicyDenied { cluster, .. }
            | Error::BuildTimeout { cluster, .. }
            | Error::Unreachable { cluster, .. }
            | Error::Engage { cluster, .. } => cluster,
        }
    }
}
