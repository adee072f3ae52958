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
    /// The member of a context did not come up: its client could not be built (the
    /// [`Policy`](mcr_core::kubeconfig::Policy) refused it, say), its server did not answer,
    /// or its caches did not sync. Retried after `retry_in` with backoff, if at all.
    #[error("cluster {cluster}: {reason}")]
    Failed {
        /// The cluster.
        cluster: ClusterName,
        /// Why, redacted and in one line (as `member_statuses()` says it).
        reason: String,
        /// When it is tried again (`None`: not before a file changes).
        retry_in: Option<std::time::Duration>,
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
    /// The cluster the error is about, if it is about one.
    ///
    /// ```
    /// use mcr_provider_file::Error;
    /// let err = Error::Failed { cluster: "a".into(), reason: "down".into(), retry_in: None };
    /// assert_eq!(err.cluster().map(|c| c.as_str()), Some("a"));
    /// ```
    pub fn cluster(&self) -> Option<&ClusterName> {
        match self {
            Error::Context { cluster, .. }
            | Error::NameConflict { cluster, .. }
            | Error::Failed { cluster, .. } => Some(cluster),
            Error::File { .. } | Error::Watch { .. } => None,
        }
    }

    /// Whether it is retried without a file change: members that failed with a retry
    /// scheduled, and watch errors; not file and context errors, policy refusals or name
    /// conflicts, which only a file change can fix.
    ///
    /// ```
    /// use mcr_provider_file::Error;
    /// let err = Error::File { path: "/x".into(), source: mcr_core::kubeconfig::Error::Empty };
    /// assert!(!err.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Failed {
                retry_in: Some(_),
                ..
            } | Error::Watch { .. }
        )
    }
}
