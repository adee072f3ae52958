//! The [`Error`] type of the namespace provider.

/// Errors of the namespace provider and of its namespace clients.
///
/// Errors raised inside a namespace cluster's client reach callers as
/// `kube::Error::Service` wrapping this type. Requests the virtual cluster refuses (other
/// namespaces, namespace writes) are not errors of this type: they are answered with a
/// Kubernetes `Status` (404 or 403), so callers see an ordinary `kube::Error::Api`.
///
/// ```
/// use mcr_provider_namespace::Error;
/// let err = Error::Request { namespace: "team-a".into(), reason: "bad path".into() };
/// assert_eq!(err.to_string(), "namespace cluster \"team-a\": invalid rewritten request: bad path");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request to the host cluster failed.
    #[error("namespace cluster \"{namespace}\": request to the host cluster failed")]
    Host {
        /// The namespace (= cluster name).
        namespace: String,
        /// The host client's error.
        #[source]
        source: kube::Error,
    },

    /// A request or response body could not be read.
    #[error("namespace cluster \"{namespace}\": reading a body failed")]
    Body {
        /// The namespace (= cluster name).
        namespace: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },

    /// A rewritten request could not be built.
    #[error("namespace cluster \"{namespace}\": invalid rewritten request: {reason}")]
    Request {
        /// The namespace (= cluster name).
        namespace: String,
        /// What was wrong.
        reason: String,
    },
}
