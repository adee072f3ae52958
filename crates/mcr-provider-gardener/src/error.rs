//! The provider's error type.

/// Why no kubeconfig could be had for a Shoot (its member's failure, retried by the
/// [`Engagements`](mcr_core::Engagements) table with its backoff; or a failed renewal, retried
/// by the renewal). Never contains credential material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig request to the garden failed.
    #[error("kubeconfig request for shoot {shoot} failed: {source}")]
    Request {
        /// `<namespace>/<name>` of the Shoot.
        shoot: String,
        /// kube's error (an API status or a transport error).
        #[source]
        source: kube::Error,
    },
    /// The kubeconfig request did not answer in time.
    #[error("kubeconfig request for shoot {shoot} timed out")]
    Timeout {
        /// `<namespace>/<name>` of the Shoot.
        shoot: String,
    },
    /// The answer or its kubeconfig is unusable.
    #[error("kubeconfig of shoot {shoot} is unusable: {reason}")]
    Kubeconfig {
        /// `<namespace>/<name>` of the Shoot.
        shoot: String,
        /// What is wrong (never the kubeconfig's content).
        reason: String,
    },
}
