//! The error type of the Cluster API provider.

use crate::ObjectRef;

/// Why the kubeconfig Secret of a `Cluster` gives no connection: the reason of a
/// [`ClusterState::Failed`](crate::ClusterState) status, after the name of the cluster. Why a
/// workload cluster failed to come up from a kubeconfig (a client that could not be built, a
/// server that did not answer, a policy refusal) is the
/// [`Engagements`](mcr_core::Engagements) table's.
///
/// Messages name the Secret and the reason, never the kubeconfig or credentials.
///
/// ```
/// use mcr_provider_capi::{Error, ObjectRef};
/// let err = Error::MissingSecret { secret: ObjectRef::new("ns", "c-kubeconfig") };
/// assert_eq!(err.to_string(), "kubeconfig Secret ns/c-kubeconfig not found");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading the kubeconfig Secret failed (other than not found).
    #[error("reading kubeconfig Secret {secret} failed")]
    Secret {
        /// The Secret.
        secret: ObjectRef,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The kubeconfig Secret does not exist (yet).
    #[error("kubeconfig Secret {secret} not found")]
    MissingSecret {
        /// The Secret looked for.
        secret: ObjectRef,
    },
    /// The Secret has no (or an empty) kubeconfig under the data key.
    #[error("kubeconfig Secret {secret} has no kubeconfig under key {key}")]
    MissingKey {
        /// The Secret.
        secret: ObjectRef,
        /// The data key looked for.
        key: String,
    },
    /// The kubeconfig does not parse, or its current context does not resolve.
    #[error("kubeconfig Secret {secret}")]
    Kubeconfig {
        /// The Secret.
        secret: ObjectRef,
        /// Why (safe to log).
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
}
