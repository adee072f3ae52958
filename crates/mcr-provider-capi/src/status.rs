//! What the provider made of each `Cluster` it was sent: [`ClusterStatus`].

use std::time::Duration;

use mcr_core::{ClusterId, ClusterName};

use crate::ObjectRef;

/// The state of one `Cluster` object, as reported by
/// [`StatusProvider::status`](crate::StatusProvider::status).
///
/// ```
/// use mcr_provider_capi::ClusterState;
/// let s = ClusterState::MissingSecret { secret: mcr_provider_capi::ObjectRef::new("ns", "c-kubeconfig") };
/// assert!(!s.is_engaged());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterState {
    /// Not ready yet (by the readiness rule), not engaged.
    NotReady,
    /// Paused and [`Options::paused`](crate::Options::paused) keeps it from being engaged.
    Paused,
    /// Rejected by [`Options::predicate`](crate::Options::predicate).
    Filtered,
    /// Another `Cluster` maps to the same cluster name and owns it.
    Conflict {
        /// The owner of the name.
        owner: ObjectRef,
    },
    /// Ready, its kubeconfig is being read or the cluster is being built and synced.
    Pending,
    /// The kubeconfig Secret does not exist (yet); resolved when it appears.
    MissingSecret {
        /// The Secret looked for.
        secret: ObjectRef,
    },
    /// The Secret has no (or an empty) kubeconfig under the data key; resolved when it is added.
    MissingKey {
        /// The Secret.
        secret: ObjectRef,
        /// The data key looked for.
        key: String,
    },
    /// Engaged with the manager.
    Engaged {
        /// The engaged instance.
        id: ClusterId,
    },
    /// Failed (malformed kubeconfig, unreachable server, sync timeout, ...); retried with a
    /// capped backoff.
    Failed {
        /// Why, without credential material.
        reason: String,
        /// When the next attempt is made.
        retry_in: Duration,
    },
    /// The [`Policy`](mcr_core::kubeconfig::Policy) refused the kubeconfig (an exec plugin,
    /// auth-provider, local file or proxy); not retried until the Secret changes.
    PolicyDenied {
        /// Why.
        reason: String,
    },
}

impl ClusterState {
    /// Whether the cluster is engaged.
    ///
    /// ```
    /// assert!(!mcr_provider_capi::ClusterState::NotReady.is_engaged());
    /// ```
    pub fn is_engaged(&self) -> bool {
        matches!(self, ClusterState::Engaged { .. })
    }
}

/// The status of one `Cluster` object.
///
/// ```no_run
/// use mcr_provider_capi::StatusProvider;
/// # fn f(p: &mcr_provider_capi::CapiProvider) {
/// for (cluster, status) in p.statuses() {
///     println!("{cluster} as {}: {:?}", status.name, status.state);
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterStatus {
    /// The cluster name it maps to.
    pub name: ClusterName,
    /// Its state.
    pub state: ClusterState,
}
