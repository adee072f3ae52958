//! What the provider made of each watched Secret, for operators and tests.

use std::fmt;
use std::time::Duration;

use mcr_core::members::{Members, Tracked};
use mcr_core::{ClusterId, ClusterName, MemberState};

/// A Secret's `namespace/name`. Ordered by namespace, then name.
///
/// ```
/// use mcr_provider_kubeconfig::SecretRef;
/// let s = SecretRef::new("fleet", "cluster-a");
/// assert_eq!(s.to_string(), "fleet/cluster-a");
/// assert!(SecretRef::new("a", "z") < SecretRef::new("b", "a"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef {
    /// The namespace.
    pub namespace: String,
    /// The name (also the cluster name).
    pub name: String,
}

impl SecretRef {
    /// A reference to `namespace/name`.
    ///
    /// ```
    /// let s = mcr_provider_kubeconfig::SecretRef::new("ns", "n");
    /// assert_eq!((s.namespace.as_str(), s.name.as_str()), ("ns", "n"));
    /// ```
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        SecretRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The cluster name a Secret maps to: its name.
    ///
    /// ```
    /// let s = mcr_provider_kubeconfig::SecretRef::new("ns", "member-1");
    /// assert_eq!(s.cluster_name().as_str(), "member-1");
    /// ```
    pub fn cluster_name(&self) -> ClusterName {
        ClusterName::new(self.name.as_str())
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the provider made of one Secret (see
/// [`StatusProvider::status`](crate::StatusProvider::status)).
///
/// ```
/// use mcr_provider_kubeconfig::{SecretState, SecretStatus};
/// fn engaged(s: &SecretStatus) -> bool { matches!(s.state, SecretState::Engaged { .. }) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretStatus {
    /// The cluster name the Secret maps to.
    pub cluster: ClusterName,
    /// `metadata.resourceVersion` of the Secret version this status is about.
    pub resource_version: Option<String>,
    /// What happened.
    pub state: SecretState,
}

/// What the provider did with a Secret. The provider records what it decided about the
/// Secret (its cluster is wanted, it is in a name conflict, its key is missing, its kubeconfig
/// does not parse); for a wanted cluster, where the cluster stands (pending, engaged, failed,
/// refused by the policy, owned by another replica) is read from the
/// [`Engagements`](mcr_core::Engagements) table each time the status is read.
///
/// ```
/// use mcr_provider_kubeconfig::SecretState;
/// let s = SecretState::MissingKey;
/// assert_ne!(s, SecretState::Pending);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretState {
    /// Its cluster is wanted and being built, probed, started and synced (or a newer
    /// kubeconfig is on its way while an earlier instance serves).
    Pending,
    /// The cluster is engaged with the Secret's current kubeconfig (the id of the running
    /// instance).
    Engaged {
        /// The engaged instance.
        id: ClusterId,
    },
    /// The last attempt failed (a client that could not be built, a server that did not
    /// answer, caches that did not sync); it is retried after `retry_in`. An instance engaged
    /// from an earlier kubeconfig keeps serving meanwhile.
    Failed {
        /// Why: the member's error with its sources (names the cluster, never credentials).
        reason: String,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// The [`Policy`](mcr_core::kubeconfig::Policy) refused the kubeconfig (an exec plugin,
    /// auth-provider, local file or proxy); not retried until the Secret changes.
    PolicyDenied {
        /// The error message.
        reason: String,
    },
    /// Another replica of a sharded manager owns the cluster name: this replica keeps the
    /// Secret's kubeconfig and builds no client, makes no request and retries nothing for it
    /// until it comes to own the name.
    Elsewhere {
        /// The owning replica, when known.
        owner: Option<String>,
    },
    /// The data key is missing or empty: ignored (an already engaged cluster is kept) until the
    /// key is added.
    MissingKey,
    /// The kubeconfig does not parse, or its current context does not resolve: nothing is
    /// tried until the Secret changes (an already engaged cluster is kept).
    Invalid {
        /// Why (names the Secret, never credentials).
        reason: String,
    },
    /// Another Secret with the same name in another watched namespace owns the cluster name
    /// (it is older, or as old and in a smaller namespace); this one takes over when that one
    /// goes away.
    Conflict {
        /// The Secret that owns the cluster name.
        owner: SecretRef,
    },
}

/// A [`SecretState::Pending`] status follows its cluster in the table; every other state is
/// the provider's own decision about the Secret and is returned as it is.
impl Tracked for SecretStatus {
    fn track(mut self, members: &Members) -> Self {
        if self.state != SecretState::Pending {
            return self;
        }
        self.state = match members.member(&self.cluster) {
            Some((MemberState::Engaged, Some(id))) => SecretState::Engaged { id },
            Some((MemberState::Failed { reason, retry_in }, _)) => match retry_in {
                Some(retry_in) => SecretState::Failed { reason, retry_in },
                // The table retries every failure of a kubeconfig but a policy refusal.
                None => SecretState::PolicyDenied { reason },
            },
            Some((MemberState::Elsewhere { owner }, _)) => SecretState::Elsewhere { owner },
            _ => SecretState::Pending,
        };
        self
    }
}
