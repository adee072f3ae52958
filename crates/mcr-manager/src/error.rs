//! Errors of the manager and of the controller builder.

use std::net::SocketAddr;

/// A boxed error, as returned by user [`Runnable`](crate::Runnable)s.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A mistake in how a controller was put together, found by
/// [`Builder::register`](crate::controller::Builder::register).
///
/// Two kinds of mistake never get this far because they do not compile: calling `owns` or
/// `watches` before `for_`, and calling `for_` twice (the builder's type changes with `for_`).
///
/// ```
/// use mcr_manager::BuilderError;
/// let err = BuilderError::NoWatches { controller: "demo".into() };
/// assert!(err.to_string().contains("demo"));
/// ```
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuilderError {
    /// Nothing would ever trigger a reconcile: the primary watch was disabled and no other
    /// watch or trigger was added.
    #[error("controller {controller:?} has no watches: call for_(), watches() or reconcile_on()")]
    NoWatches {
        /// The controller's name.
        controller: String,
    },
    /// Another controller of this manager already uses this name.
    #[error("a controller named {controller:?} is already registered")]
    DuplicateName {
        /// The controller's name.
        controller: String,
    },
    /// This kube-runtime's `Action` does not show its requeue delay in the format mcr reads
    /// (see the `controller::action` module): registering fails rather than guessing delays.
    #[error("controller {controller:?}: cannot read kube-runtime's Action")]
    UnreadableAction {
        /// The controller's name.
        controller: String,
        /// What could not be read.
        #[source]
        source: crate::UnreadableAction,
    },
}

/// Errors of the [`Manager`](crate::Manager).
///
/// ```
/// use mcr_manager::Error;
/// let err = Error::from(mcr_core::Error::ClusterNotFound("gone".into()));
/// assert!(mcr_core::cluster_not_found(&err).is_some());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An error from mcr-core (cluster lookup, index registration, ...). Kept as the `source`
    /// (not repeated in the message, so `anyhow` prints it once) so that
    /// [`mcr_core::cluster_not_found`] sees it.
    #[error("fleet operation failed")]
    Core(#[from] mcr_core::Error),
    /// A controller was put together wrongly.
    #[error(transparent)]
    Builder(#[from] BuilderError),
    /// The provider's discovery loop failed.
    #[error("provider failed")]
    Provider(#[source] mcr_core::Error),
    /// A user runnable failed.
    #[error("runnable {name:?} failed")]
    Runnable {
        /// The runnable's name.
        name: String,
        /// What went wrong.
        #[source]
        source: BoxError,
    },
    /// A runnable or controller panicked outside of a reconcile.
    #[error("{name:?} panicked")]
    Panicked {
        /// The runnable's name.
        name: String,
    },
    /// The metrics / health endpoint could not listen.
    #[error("cannot serve metrics and health on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// `run` was called while the manager was already running.
    #[error("the manager is already running")]
    AlreadyRunning,
    /// This manager held the leader lease and lost it; everything that needed it was stopped.
    #[error("leader election lost: lease {lease:?} is held by someone else now")]
    LeaderElectionLost {
        /// `<namespace>/<name>` of the Lease.
        lease: String,
    },
    /// The leader election settings would let two leaders overlap (see
    /// `LeaderElection::validate`).
    #[error("invalid leader election settings for lease {lease:?}: {reason}")]
    InvalidLeaderElection {
        /// `<namespace>/<name>` of the Lease.
        lease: String,
        /// Which setting is wrong and why.
        reason: String,
    },
    /// The sharding settings would let two replicas overlap, or name no valid Lease (see
    /// [`Sharding::validate`](crate::Sharding::validate)).
    #[error("invalid sharding settings: {reason}")]
    InvalidSharding {
        /// Which setting is wrong and why.
        reason: String,
    },
    /// Talking to the host cluster about the leader Lease failed for good.
    #[error("leader election on lease {lease:?} failed")]
    LeaderElection {
        /// `<namespace>/<name>` of the Lease.
        lease: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_error_is_printed_once_under_anyhow() {
        let err = anyhow::Error::from(Error::from(mcr_core::Error::ClusterNotFound("gone".into())));
        assert_eq!(
            format!("{err:#}"),
            "fleet operation failed: cluster \"gone\" not found"
        );
        let inner = err.downcast_ref::<Error>().unwrap();
        assert!(mcr_core::cluster_not_found(inner).is_some());
    }

    #[test]
    fn an_engage_error_keeps_its_source() {
        let io = std::io::Error::other("no runtime");
        let err = Error::from(mcr_core::Error::Engage {
            cluster: "east".into(),
            source: Box::new(io),
        });
        assert_eq!(
            mcr_core::ErrorChain(&err).to_string(),
            "fleet operation failed: cluster \"east\": engage failed: no runtime"
        );
    }
}
