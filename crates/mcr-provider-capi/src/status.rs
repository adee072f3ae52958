//! What the provider made of each `Cluster` it was sent: [`ClusterStatus`].

use std::time::Duration;

use mcr_core::members::{Members, Tracked};
use mcr_core::{ClusterId, ClusterName, MemberState};

use crate::ObjectRef;

/// The state of one `Cluster` object, as reported by
/// [`StatusProvider::status`](crate::StatusProvider::status). The provider records what it
/// decided about the object (its workload cluster is wanted, it is not ready, paused, filtered
/// or in a name conflict); for a wanted cluster, where it stands (pending, engaged, failed,
/// refused by the policy, owned by another replica) is read from the
/// [`Engagements`](mcr_core::Engagements) table each time the status is read.
///
/// ```
/// use mcr_provider_capi::ClusterState;
/// let s = ClusterState::Elsewhere { owner: Some("replica-2".into()) };
/// assert!(!s.is_engaged());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterState {
    /// Not ready yet (by the readiness rule), not engaged.
    NotReady,
    /// Paused and [`Options::paused`](crate::Options::paused) keeps it from being engaged.
    Paused,
    /// Rejected by [`Options::predicate`](crate::Options::predicate).
    Filtered,
    /// Another `Cluster` maps to the same cluster name and owns it: it is older (by
    /// `creationTimestamp`; of two as old, the smaller `namespace/name`). This one takes the
    /// name over when it ranks first.
    Conflict {
        /// The owner of the name.
        owner: ObjectRef,
    },
    /// Its cluster name cannot be used (empty, or the host's) or names a cluster engaged by
    /// hand: nothing runs until the `Cluster` changes.
    Invalid {
        /// Why.
        reason: String,
    },
    /// Ready and wanted: its kubeconfig Secret is being read or the cluster is being built and
    /// synced.
    Pending,
    /// Engaged with the manager.
    Engaged {
        /// The engaged instance.
        id: ClusterId,
    },
    /// The last attempt failed (the kubeconfig Secret or its key missing, a kubeconfig that
    /// does not parse, an unreachable server, a sync timeout, ...); retried with a capped
    /// backoff, and at once when the Secret changes. An instance engaged before keeps serving.
    Failed {
        /// Why: the cluster name and the reason, without credential material.
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
    /// Another replica of a sharded manager owns the cluster name: this replica reads no
    /// Secret, builds no client and retries nothing for it until it comes to own the name.
    Elsewhere {
        /// The owning replica, when known.
        owner: Option<String>,
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

/// A [`ClusterState::Pending`] status follows its cluster in the table; a not-ready or paused
/// `Cluster` whose cluster is kept engaged ([`NotReady::Keep`](crate::NotReady::Keep)) reports
/// it engaged; every other state is the provider's own decision about the object.
impl Tracked for ClusterStatus {
    fn track(mut self, members: &Members) -> Self {
        let member = match self.state {
            ClusterState::Pending | ClusterState::NotReady | ClusterState::Paused => {
                members.member(&self.name)
            }
            _ => return self,
        };
        self.state = match (member, self.state) {
            (Some((MemberState::Engaged, Some(id))), _) => ClusterState::Engaged { id },
            (member, ClusterState::Pending) => match member {
                Some((MemberState::Failed { reason, retry_in }, _)) => match retry_in {
                    Some(retry_in) => ClusterState::Failed { reason, retry_in },
                    // The table retries every failure of this provider's members but a
                    // policy refusal.
                    None => ClusterState::PolicyDenied { reason },
                },
                Some((MemberState::Elsewhere { owner }, _)) => ClusterState::Elsewhere { owner },
                _ => ClusterState::Pending,
            },
            (_, held) => held,
        };
        self
    }
}
