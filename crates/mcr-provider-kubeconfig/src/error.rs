//! Why a kubeconfig Secret is not wanted as a cluster.

use crate::SecretRef;

/// What is wrong with a Secret: the reason of a [`SecretState::Invalid`](crate::SecretState)
/// status. Why a wanted cluster failed to come up (a client that could not be built, a server
/// that did not answer, a policy refusal) is the [`Engagements`](mcr_core::Engagements)
/// table's, reported by [`SecretState::Failed`](crate::SecretState) and
/// [`SecretState::PolicyDenied`](crate::SecretState).
///
/// Every message names the Secret (`namespace/name`) and never contains kubeconfig contents or
/// credentials, so errors are safe to log.
///
/// ```
/// use mcr_provider_kubeconfig::{Error, SecretRef};
/// let err = Error::Kubeconfig {
///     secret: SecretRef::new("fleet", "a"),
///     source: mcr_core::kubeconfig::Error::Empty,
/// };
/// assert!(err.to_string().starts_with("secret fleet/a: "), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig does not parse, or its current context does not resolve.
    #[error("secret {secret}: {source}")]
    Kubeconfig {
        /// The Secret.
        secret: SecretRef,
        /// What is wrong with the kubeconfig.
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
}
