//! What the provider made of each watched ClusterProfile, for operators and tests.

use std::time::Duration;

use mcr_core::{ClusterId, ClusterName};

/// The outcome of the last look at one profile (see
/// [`StatusProvider::status`](crate::StatusProvider::status)).
///
/// ```
/// use mcr_provider_cluster_inventory::{ProfileState, ProfileStatus};
/// fn engaged(s: &ProfileStatus) -> bool { matches!(s.state, ProfileState::Engaged { .. }) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileStatus {
    /// The cluster name the profile maps to (`None` when it has none, e.g. the name property
    /// is missing).
    pub cluster: Option<ClusterName>,
    /// `metadata.resourceVersion` of the profile version this status is about.
    pub resource_version: Option<String>,
    /// What happened.
    pub state: ProfileState,
}

/// What the provider did with a profile.
///
/// ```
/// use mcr_provider_cluster_inventory::ProfileState;
/// assert_ne!(ProfileState::Pending, ProfileState::NotReady { engaged: false });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileState {
    /// The cluster is being built (credential plugin), probed, started and synced.
    Pending,
    /// The cluster is engaged (the id of the running instance).
    Engaged {
        /// The engaged instance.
        id: ClusterId,
    },
    /// The readiness rule says no. `engaged`: a previously engaged instance is kept (see
    /// [`Options::disengage_when_unhealthy`](crate::Options::disengage_when_unhealthy)).
    NotReady {
        /// Whether an instance stays engaged meanwhile.
        engaged: bool,
    },
    /// The profile cannot be turned into a connection; waits for the profile (or its Secrets)
    /// to change. A previously engaged instance is kept.
    Invalid {
        /// Why (names the profile, never credentials).
        reason: String,
    },
    /// The last attempt failed (plugin failed or timed out, server unreachable, sync failed);
    /// retried after `retry_in`.
    Failed {
        /// The error message (names the profile, never credentials or plugin output).
        reason: String,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// The [`Policy`](mcr_core::kubeconfig::Policy) refused the profile's kubeconfig (an exec
    /// plugin, auth-provider, local file or proxy); waits for the profile or its Secret to
    /// change. A previously engaged instance is kept.
    PolicyDenied {
        /// The error message (names the profile and the refused rule, never credentials).
        reason: String,
    },
    /// Another profile maps to the same cluster name and is older (or as old and sorts first
    /// by `namespace/name`); this one takes over when that one goes away.
    Conflict {
        /// The profile owning the name.
        owner: crate::ProfileRef,
    },
}
