//! [`MemberStatus`]: what a provider knows about each of its members, engaged or not, as it
//! reports it through [`Provider::member_statuses`](crate::Provider::member_statuses).

use std::{fmt, sync::Arc, time::Duration};

use crate::ClusterName;

/// Where a member stands in its provider.
///
/// ```
/// use mcr_core::MemberState;
/// let failed = MemberState::Failed { reason: "unreachable".into(), retry_in: None };
/// assert_eq!(failed.as_str(), "failed");
/// assert_eq!(MemberState::Pending.to_string(), "pending");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberState {
    /// Engaged, and no newer connection is on its way.
    Engaged,
    /// Being built, probed, started or synced (a new member, or a new instance replacing the
    /// engaged one, which serves meanwhile).
    Pending,
    /// The last attempt failed (a member that was engaged before keeps serving).
    Failed {
        /// Why, in one line: the provider's error with its sources, redacted
        /// ([`ErrorChain`](crate::ErrorChain)), never credentials.
        reason: String,
        /// When it is tried again; `None`: not before its source of truth changes (a policy
        /// denial, a kubeconfig that does not parse).
        retry_in: Option<Duration>,
    },
    /// Another replica owns it (the fleet is sharded, see [`coordinator`](crate::coordinator)): this
    /// replica keeps only its name and desired state.
    Elsewhere {
        /// The owning replica, when known.
        owner: Option<String>,
    },
}

impl MemberState {
    /// `engaged`, `pending`, `failed` or `elsewhere`: the state's word in `/clusters` and in the
    /// `mcr_members` gauge.
    ///
    /// ```
    /// assert_eq!(mcr_core::MemberState::Engaged.as_str(), "engaged");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            MemberState::Engaged => "engaged",
            MemberState::Pending => "pending",
            MemberState::Failed { .. } => "failed",
            MemberState::Elsewhere { .. } => "elsewhere",
        }
    }

    /// Every word [`as_str`](Self::as_str) returns.
    pub const ALL: [&'static str; 4] = ["engaged", "pending", "failed", "elsewhere"];
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One member of a provider and its [`MemberState`].
///
/// ```
/// use mcr_core::{MemberState, MemberStatus};
/// let s = MemberStatus::new("kubeconfig", "member-1".into(), MemberState::Pending);
/// assert_eq!(&*s.provider, "kubeconfig");
/// assert_eq!(s.name, "member-1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemberStatus {
    /// Who reports it: the provider (`kubeconfig`, `file`, `capi`, ...), or a runnable of the
    /// manager that tracks members of its own (`webhook-configurations`).
    pub provider: Arc<str>,
    /// The name it is (or would be) engaged under.
    pub name: ClusterName,
    /// Where it stands.
    pub state: MemberState,
}

impl MemberStatus {
    /// A status.
    pub fn new(provider: impl Into<Arc<str>>, name: ClusterName, state: MemberState) -> Self {
        MemberStatus {
            provider: provider.into(),
            name,
            state,
        }
    }
}
