//! The error type of the Cluster API provider.

use crate::ObjectRef;

/// Why a workload cluster could not be engaged. Messages name the `Cluster` and the reason,
/// never the kubeconfig or credentials.
///
/// ```
/// use mcr_provider_capi::{Error, ObjectRef};
/// let err = Error::Unreachable { cluster: ObjectRef::new("ns", "c"), reason: "API server unreachable: timeout".into() };
/// assert_eq!(err.to_string(), "Cluster ns/c: API server unreachable: timeout");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading the kubeconfig Secret failed (other than not found).
    #[error("Cluster {cluster}: reading Secret {secret} failed")]
    Secret {
        /// The Cluster.
        cluster: ObjectRef,
        /// The Secret.
        secret: ObjectRef,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The kubeconfig cannot be parsed or turned into a client.
    #[error("Cluster {cluster}: invalid kubeconfig")]
    Kubeconfig {
        /// The Cluster.
        cluster: ObjectRef,
        /// Why (safe to log).
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// The [`Policy`](mcr_core::kubeconfig::Policy) refused the kubeconfig (an exec plugin,
    /// auth-provider, local file or proxy). Not retried until the Secret changes.
    #[error("Cluster {cluster}: kubeconfig refused by policy")]
    PolicyDenied {
        /// The Cluster.
        cluster: ObjectRef,
        /// Which rule (safe to log).
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// The first request to the workload cluster (`GET /version`) failed: unreachable, no
    /// answer in time, or refused (the reason says which), or reading its Secret timed out.
    #[error("Cluster {cluster}: {reason}")]
    Unreachable {
        /// The Cluster.
        cluster: ObjectRef,
        /// Why.
        reason: String,
    },
    /// Starting, syncing or engaging the cluster failed.
    #[error("Cluster {cluster}: engage failed")]
    Engage {
        /// The Cluster.
        cluster: ObjectRef,
        /// The lifecycle error.
        #[source]
        source: mcr_core::Error,
    },
    /// Any other failure of the member helper (e.g. a client build that did not finish in
    /// time).
    #[error("Cluster {cluster}")]
    Member {
        /// The Cluster.
        cluster: ObjectRef,
        /// What went wrong.
        #[source]
        source: mcr_core::members::Error,
    },
}

impl Error {
    /// Whether retrying can help without the Secret changing.
    pub(crate) fn is_retryable(&self) -> bool {
        !matches!(self, Error::PolicyDenied { .. })
    }

    /// The message with its sources, for status and logs.
    pub(crate) fn chain(&self) -> String {
        mcr_core::ErrorChain(self).to_string()
    }
}
