//! Errors reported by the file provider (logged, and listed in a [`PassReport`](crate::PassReport)).

use std::path::PathBuf;

use mcr_core::ClusterName;

/// Why a file or a context did not (fully) make it into the fleet.
///
/// Messages name the file or cluster and the reason, never kubeconfig contents or credentials.
///
/// ```
/// use mcr_provider_file::Error;
/// let err = Error::Watch { path: "/etc/fleet".into(), reason: "too many watches".into() };
/// assert_eq!(err.to_string(), "cannot watch \"/etc/fleet\": too many watches");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A kubeconfig file could not be read or parsed. Its last good clusters are kept.
    #[error("kubeconfig file {path:?}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// A context does not yield a usable client.
    #[error("cluster {cluster}: {source}")]
    Context {
        /// The cluster (`<path><separator><context>`).
        cluster: ClusterName,
        /// What is wrong with the context.
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// The [`Policy`](mcr_core::kubeconfig::Policy) refused the context (its `exec` or
    /// `auth-provider` stanza, a local file or a `proxy-url`); retried only when a file changes.
    #[error("cluster {cluster}: refused by policy: {source}")]
    PolicyDenied {
        /// The cluster.
        cluster: ClusterName,
        /// The policy violation.
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
    /// Two contexts map to one cluster name (`<path><separator><context>` reads alike for both:
    /// a context name containing the separator, or non-UTF-8 paths). The pair whose path (then
    /// context) sorts first owns the name; this one is ignored until that changes.
    #[error(
        "cluster {cluster}: context {context:?} of {path:?} maps to the same cluster name as context {owner_context:?} of {owner_path:?}, which sorts first and owns it; ignored"
    )]
    NameConflict {
        /// The cluster name both map to.
        cluster: ClusterName,
        /// The file of the ignored context.
        path: PathBuf,
        /// The ignored context.
        context: String,
        /// The file of the owning context.
        owner_path: PathBuf,
        /// The owning context.
        owner_context: String,
    },
    /// Starting, syncing or engaging the cluster failed.
    #[error("cluster {cluster}: {source}")]
    Engage {
        /// The cluster.
        cluster: ClusterName,
        /// The lifecycle error.
        #[source]
        source: mcr_core::Error,
    },
    /// The member did not answer its first request in time, or its client could not be
    /// built in time; retried with backoff.
    #[error(transparent)]
    Member {
        /// What went wrong (names the cluster).
        source: mcr_core::members::Error,
    },
    /// A directory could not be watched, or the watcher reported an error.
    #[error("cannot watch {path:?}: {reason}")]
    Watch {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl Error {
    /// Whether the provider retries on its own (with backoff): true for failed engagements,
    /// unreachable members and watch errors; false for file and context errors and policy
    /// refusals and name conflicts, which only a file change can fix.
    ///
    /// ```
    /// use mcr_provider_file::Error;
    /// let err = Error::File { path: "/x".into(), source: mcr_core::kubeconfig::Error::Empty };
    /// assert!(!err.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Engage { .. } | Error::Member { .. } | Error::Watch { .. }
        )
    }
}
