//! What the provider made of each watched ClusterProfile, for operators and tests.

use std::time::Duration;

use mcr_core::members::{Members, Tracked};
use mcr_core::{ClusterId, ClusterName, MemberState};

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

/// What the provider did with a profile. The provider records what it decided about the
/// profile (its connection is wanted, it is not ready, it cannot be resolved, it is in a name
/// conflict); for a wanted cluster, where it stands (pending, engaged, failed, refused by the
/// policy, owned by another replica) and whether a not-ready profile's cluster stays engaged
/// are read from the [`Engagements`](mcr_core::Engagements) table each time the status is read.
///
/// ```
/// use mcr_provider_cluster_inventory::ProfileState;
/// assert_ne!(ProfileState::Pending, ProfileState::NotReady { engaged: false });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileState {
    /// Its connection is wanted and the cluster is being built (credential plugin), probed,
    /// started and synced (or a newer connection is on its way while an earlier instance
    /// serves).
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
    /// retried after `retry_in`. An instance engaged before keeps serving.
    Failed {
        /// The error message (names the cluster, never credentials or plugin output).
        reason: String,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// The [`Policy`](mcr_core::kubeconfig::Policy) refused the profile's kubeconfig (an exec
    /// plugin, auth-provider, local file or proxy); waits for the profile or its Secret to
    /// change. A previously engaged instance is kept.
    PolicyDenied {
        /// The error message (names the cluster and the refused rule, never credentials).
        reason: String,
    },
    /// Another replica of a sharded manager owns the cluster name: this replica builds no
    /// client, runs no plugin and retries nothing for it until it comes to own the name.
    Elsewhere {
        /// The owning replica, when known.
        owner: Option<String>,
    },
    /// Another profile maps to the same cluster name and is older (or as old and sorts first
    /// by `namespace/name`); this one takes over when that one goes away.
    Conflict {
        /// The profile owning the name.
        owner: crate::ProfileRef,
    },
}

/// A [`ProfileState::Pending`] status follows its cluster in the table, and a
/// [`ProfileState::NotReady`] one reads whether its cluster stays engaged; every other state is
/// the provider's own decision about the profile.
impl Tracked for ProfileStatus {
    fn track(mut self, members: &Members) -> Self {
        let Some(name) = &self.cluster else {
            return self;
        };
        self.state = match self.state {
            ProfileState::Pending => match members.member(name) {
                Some((MemberState::Engaged, Some(id))) => ProfileState::Engaged { id },
                Some((MemberState::Failed { reason, retry_in }, _)) => match retry_in {
                    Some(retry_in) => ProfileState::Failed { reason, retry_in },
                    // The table retries every failure of a profile's connection but a policy
                    // refusal.
                    None => ProfileState::PolicyDenied { reason },
                },
                Some((MemberState::Elsewhere { owner }, _)) => ProfileState::Elsewhere { owner },
                _ => ProfileState::Pending,
            },
            ProfileState::NotReady { .. } => ProfileState::NotReady {
                engaged: matches!(members.member(name), Some((MemberState::Engaged, _))),
            },
            other => other,
        };
        self
    }
}
