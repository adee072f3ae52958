//! [`Coordinator`]: which clusters this replica owns, asked by the engagement table only.
//!
//! With several replicas of one controller, each cluster of the fleet is owned by one replica.
//! The manager's sharded mode (`mcr_manager::Sharding`) implements [`Coordinator`] and hands
//! it to the one [`Engagements`](crate::Engagements) table of the process. Two places ask it,
//! and no other:
//!
//! - the table's converge step, before it spends anything on a member: a cluster another
//!   replica owns keeps only its entry (no client, no TLS connection, no informer, no task:
//!   its name and source). On every [change](Coordinator::changes), and on the table's
//!   periodic resync, every member is converged again: what this replica no longer owns is
//!   stopped (the member's token is cancelled: informers close, controllers disengage,
//!   reconciles in flight are cut) and what it came to own is brought up;
//! - the reconcile fence (in `mcr-manager`), which stops a reconcile at its next poll once
//!   this replica's hold [lapsed](Coordinator::lapsed).
//!
//! Without a coordinator (the default) this replica owns every cluster, and nothing of the
//! above happens.
//!
//! ```
//! use mcr_core::ClusterName;
//! use mcr_core::coordinator::{Coordinator, Ownership};
//! use tokio::sync::watch;
//!
//! /// Owns the names that start with `a`; never changes.
//! struct FirstHalf(watch::Sender<u64>);
//!
//! impl Coordinator for FirstHalf {
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
//! let c = FirstHalf(watch::channel(0).0);
//! assert!(c.owner(&"alpha".into()).is_owned());
//! assert_eq!(c.owner(&"beta".into()).to_string(), "owned by replica-2");
//! ```

use std::fmt;

use tokio::sync::watch;

use crate::ClusterName;

/// Who owns a cluster, as this replica sees it now.
///
/// ```
/// use mcr_core::coordinator::Ownership;
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
    /// assert!(mcr_core::coordinator::Ownership::Owned.is_owned());
    /// ```
    pub fn is_owned(&self) -> bool {
        matches!(self, Ownership::Owned)
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

/// Decides which clusters this replica owns (see the [module docs](self)).
///
/// Contract: [`owner`](Coordinator::owner) is a lookup in memory (asked once per member and
/// per change); [`changes`](Coordinator::changes) yields a new value every time the answer of
/// `owner` may have changed for some name. A change to [`Ownership::Owned`] above all: a member
/// told "elsewhere" is parked and asked again only at the next change. (An answer that turns
/// to "elsewhere" on its own, at a deadline, may go unannounced; its return may not.)
pub trait Coordinator: Send + Sync + 'static {
    /// Who owns `name` now.
    fn owner(&self, name: &ClusterName) -> Ownership;

    /// A receiver whose value changes every time ownership may have changed.
    fn changes(&self) -> watch::Receiver<u64>;

    /// Whether this replica's hold on its clusters has lapsed (its renew deadline passed): its
    /// reconciles stop at their next poll, before the table has even seen a change (a process
    /// resumed after a pause runs no reconcile code for a cluster another replica may own by
    /// now). A lookup in memory, asked on every poll of a reconcile. Default: never.
    fn lapsed(&self) -> bool {
        false
    }
}
