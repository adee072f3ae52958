//! The crate's error type.

/// Errors from starting, stopping and configuring emulated clusters.
///
/// API errors (404, 409, ...) are not in here: they travel to the client as `v1 Status`
/// responses and surface as [`kube::Error::Api`] on the client side.
///
/// ```
/// let err = mcr_envtest::Error::NotHttps("cluster-1".into());
/// assert!(err.to_string().contains("cluster-1"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket or file operation failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Generating certificates or building the TLS configuration failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// Building or reading a kubeconfig failed (the message never contains credentials).
    #[error("kubeconfig error: {0}")]
    Kubeconfig(String),
    /// Building a kube client from the generated kubeconfig failed.
    #[error("building a kube client failed: {0}")]
    Client(#[source] kube::Error),
    /// The operation needs an HTTPS cluster, but this cluster is served in-process only.
    #[error("cluster {0:?} is not served over HTTPS")]
    NotHttps(String),
    /// The cluster is stopped.
    #[error("cluster {0:?} is stopped")]
    Stopped(String),
    /// `MCR_ENVTEST` names no backend.
    #[error("{0}")]
    Backend(String),
    /// The binaries of the real backend were not found; the message says how to get them.
    #[error("{0}")]
    Assets(String),
    /// A real control plane failed to start or stop (the message carries its log's tail).
    #[error("real control plane: {0}")]
    ControlPlane(String),
    /// The real backend starts at most [`MAX_FLEET`](crate::real::MAX_FLEET) clusters per fleet.
    #[error(
        "a fleet of {requested} real control planes is more than the real backend's cap of {max};          guard the test with mcr_envtest::require_emulator(\"fleet of {requested}\")"
    )]
    FleetTooLarge {
        /// Clusters asked for.
        requested: usize,
        /// The cap.
        max: usize,
    },
    /// What was asked (named here) needs a real control plane (`MCR_ENVTEST=real`).
    #[error("{0} needs a real control plane (MCR_ENVTEST=real)")]
    RealOnly(&'static str),
    /// A fleet already has a cluster of that name.
    #[error("a cluster named {0:?} already exists in the fleet")]
    DuplicateName(String),
    /// A cluster on a shared port needs a name that is one URL path segment
    /// (letters, digits, `-`, `_` and `.`), since the name is its path prefix.
    #[error(
        "cluster name {0:?} cannot be a path prefix on a shared port (use letters, digits, '-', '_' and '.')"
    )]
    InvalidName(String),
}
