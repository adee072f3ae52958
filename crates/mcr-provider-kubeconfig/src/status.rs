//! What the provider made of each watched Secret, for operators and tests.

use std::fmt;
use std::time::Duration;

use mcr_core::{ClusterId, ClusterName};

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

/// The outcome of the last look at one Secret (see
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

/// What the provider did with a Secret.
///
/// ```
/// use mcr_provider_kubeconfig::SecretState;
/// let s = SecretState::MissingKey;
/// assert_ne!(s, SecretState::Pending);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretState {
    /// Seen; the cluster is being built, started and synced.
    Pending,
    /// The cluster is engaged (the id of the running instance).
    Engaged {
        /// The engaged instance.
        id: ClusterId,
    },
    /// The data key is missing or empty: ignored (an already engaged cluster is kept) until the
    /// key is added.
    MissingKey,
    /// The last attempt failed; it is retried after `retry_in`.
    Failed {
        /// The error message (names the Secret, never credentials).
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
    /// Another Secret with the same name in another watched namespace owns the cluster name
    /// (it is older, or as old and in a smaller namespace); this one takes over when that one
    /// goes away.
    Conflict {
        /// The Secret that owns the cluster name.
        owner: SecretRef,
    },
}
