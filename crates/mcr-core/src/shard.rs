//! [`Sharder`]: whether this replica owns a cluster, the step every member passes before a
//! client is built for it.
//!
//! With several replicas of one controller, each cluster of the fleet is owned by one replica.
//! The engagement path asks the [`Sharder`] of the [`Aware`](crate::Aware) it engages with
//! ([`Aware::sharder`](crate::Aware::sharder)) before it spends anything on a member:
//!
//! - [`members::Workers`](crate::members::Workers) checks ownership before each attempt, so a
//!   member this replica does not own keeps only its name and its desired state (no client,
//!   no TLS connection, no informer). When ownership moves away, the worker removes the member
//!   (its token is cancelled: informers close, controllers disengage, in-flight reconciles
//!   are cut); when it comes back, the worker brings the member up again.
//! - [`Clusters::add`](crate::Clusters::add) and
//!   [`add_or_replace`](crate::Clusters::add_or_replace), for providers that hand over ready
//!   [`Cluster`](crate::Cluster)s, park a non-owned cluster (its cache is not started) and
//!   engage it when this replica comes to own it; an engaged cluster whose ownership moves
//!   away is stopped and parked again as a new instance.
//!
//! Without a sharder (the default: [`Aware::sharder`](crate::Aware::sharder) returns `None`)
//! this replica owns every cluster, and nothing of the above happens.
//!
//! ```
//! use std::sync::Arc;
//! use mcr_core::ClusterName;
//! use mcr_core::shard::{Ownership, Sharder};
//! use tokio::sync::watch;
//!
//! /// Owns the names that start with `a`; never changes.
//! struct FirstHalf(watch::Sender<u64>);
//!
//! impl Sharder for FirstHalf {
//!     fn owner(&self, name: &ClusterName) -> Ownership {
//!         if name.as_str().starts_with('a') {
//!             Ownership::Owned
//!         } else {
//!             Ownership::Elsewhere { owner: Some("replica-2".into()) }
//!         }
//!     }
//!     fn changes(&self) -> watch::Receiver<u64> {
//!         self.0.subscribe()
//!     }
//! }
//!
//! let sharder: Arc<dyn Sharder> = Arc::new(FirstHalf(watch::channel(0).0));
//! assert!(sharder.owner(&"alpha".into()).is_owned());
//! assert_eq!(sharder.owner(&"beta".into()).to_string(), "owned by replica-2");
//! ```

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use crate::ClusterName;

/// Who owns a cluster, as this replica sees it now.
///
/// ```
/// use mcr_core::shard::Ownership;
/// assert!(Ownership::Owned.is_owned());
/// let other = Ownership::Elsewhere { owner: None };
/// assert_eq!(other.to_string(), "not owned by this replica");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// This replica owns the cluster: it may engage and reconcile it.
    Owned,
    /// Another replica owns it, or it is in transit between replicas.
    Elsewhere {
        /// The identity of the replica that owns it, when known.
        owner: Option<String>,
    },
}

impl Ownership {
    /// Whether this replica owns the cluster.
    ///
    /// ```
    /// assert!(mcr_core::shard::Ownership::Owned.is_owned());
    /// ```
    pub fn is_owned(&self) -> bool {
        matches!(self, Ownership::Owned)
    }

    /// The owning replica, if another one owns the cluster and its identity is known.
    ///
    /// ```
    /// use mcr_core::shard::Ownership;
    /// let o = Ownership::Elsewhere { owner: Some("r2".into()) };
    /// assert_eq!(o.owner(), Some("r2"));
    /// ```
    pub fn owner(&self) -> Option<&str> {
        match self {
            Ownership::Owned => None,
            Ownership::Elsewhere { owner } => owner.as_deref(),
        }
    }
}

impl fmt::Display for Ownership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ownership::Owned => f.write_str("owned by this replica"),
            Ownership::Elsewhere { owner: Some(o) } => write!(f, "owned by {o}"),
            Ownership::Elsewhere { owner: None } => f.write_str("not owned by this replica"),
        }
    }
}

/// Decides which clusters this replica owns. Implemented by the manager's sharded mode
/// (`mcr_manager::shard`); handed to providers through
/// [`Aware::sharder`](crate::Aware::sharder).
///
/// Contract: [`owner`](Sharder::owner) is a lookup in memory (called once per member and per
/// change); [`changes`](Sharder::changes) yields a new value every time the answer of `owner`
/// may have changed for some name. Gates react to a change by releasing what is no longer
/// owned (cancelling the member's token) and by bringing up what became owned.
pub trait Sharder: Send + Sync + 'static {
    /// Who owns `name` now.
    fn owner(&self, name: &ClusterName) -> Ownership;

    /// A receiver whose value changes every time ownership may have changed.
    fn changes(&self) -> watch::Receiver<u64>;

    /// Whether this replica's hold on its clusters has lapsed (its renew deadline passed):
    /// its reconciles stop at their next poll, before the gates have even seen a change
    /// (a process resumed after a pause runs no reconcile code for a cluster another replica
    /// may own by now). A lookup in memory, asked on every poll of a reconcile. Default:
    /// never.
    fn lapsed(&self) -> bool {
        false
    }
}

impl<T: Sharder + ?Sized> Sharder for Arc<T> {
    fn owner(&self, name: &ClusterName) -> Ownership {
        (**self).owner(name)
    }

    fn changes(&self) -> watch::Receiver<u64> {
        (**self).changes()
    }

    fn lapsed(&self) -> bool {
        (**self).lapsed()
    }
}

/// A [`Sharder`] that asks another one under a mapped name (e.g. with a prefix, as the
/// multi provider engages its children's clusters).
///
/// ```
/// use std::sync::Arc;
/// use mcr_core::shard::{Mapped, Ownership, Sharder};
/// # struct Only(tokio::sync::watch::Sender<u64>);
/// # impl Sharder for Only {
/// #     fn owner(&self, n: &mcr_core::ClusterName) -> Ownership {
/// #         if n.as_str() == "kind#a" { Ownership::Owned } else { Ownership::Elsewhere { owner: None } }
/// #     }
/// #     fn changes(&self) -> tokio::sync::watch::Receiver<u64> { self.0.subscribe() }
/// # }
/// let outer: Arc<dyn Sharder> = Arc::new(Only(tokio::sync::watch::channel(0).0));
/// let inner = Mapped::new(outer, |n| format!("kind#{n}").into());
/// assert!(inner.owner(&"a".into()).is_owned());
/// ```
pub struct Mapped {
    outer: Arc<dyn Sharder>,
    map: Box<dyn Fn(&ClusterName) -> ClusterName + Send + Sync>,
}

impl Mapped {
    /// Asks `outer` about `map(name)`.
    pub fn new(
        outer: Arc<dyn Sharder>,
        map: impl Fn(&ClusterName) -> ClusterName + Send + Sync + 'static,
    ) -> Self {
        Mapped {
            outer,
            map: Box::new(map),
        }
    }
}

impl fmt::Debug for Mapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapped").finish_non_exhaustive()
    }
}

impl Sharder for Mapped {
    fn owner(&self, name: &ClusterName) -> Ownership {
        self.outer.owner(&(self.map)(name))
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.outer.changes()
    }

    fn lapsed(&self) -> bool {
        self.outer.lapsed()
    }
}
