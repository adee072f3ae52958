//! A controller's per-member hooks: [`Builder::on_join`](crate::Builder::on_join),
//! [`Builder::on_leave`](crate::Builder::on_leave) with its [`Departure`], and
//! [`Builder::sweep`](crate::Builder::sweep) with its [`Members`].

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use mcr_core::{Cluster, ClusterName};

use crate::{Fleet, error::BoxError};

/// Why a member left this controller (see [`Builder::on_leave`](crate::Builder::on_leave)).
///
/// ```
/// use mcr_manager::DepartureReason;
/// let moved = DepartureReason::MovedAway { owner: Some("replica-2".into()) };
/// assert!(!moved.left_fleet());
/// assert!(DepartureReason::LeftFleet.left_fleet());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DepartureReason {
    /// The fleet no longer has the member: its provider stopped wanting it (its Secret,
    /// file or profile went away). What it left on the host is garbage now.
    LeftFleet,
    /// The member is still in the fleet, but another replica owns it now (sharded mode):
    /// that replica engages it and runs its join hook. What this replica keeps of it alone
    /// (a per-replica cache, a metric) can go; what the fleet shares (a summary on the host)
    /// must stay.
    MovedAway {
        /// The replica that owns it, when known.
        owner: Option<String>,
    },
}

impl DepartureReason {
    /// Whether the member left the fleet (not merely moved to another replica).
    ///
    /// ```
    /// assert!(mcr_manager::DepartureReason::LeftFleet.left_fleet());
    /// ```
    pub fn left_fleet(&self) -> bool {
        matches!(self, DepartureReason::LeftFleet)
    }
}

/// A member that left a controller, as its [leave hook](crate::Builder::on_leave) sees it.
///
/// ```no_run
/// # async fn demo(departure: mcr_manager::Departure) {
/// if departure.reason().left_fleet() {
///     let host = departure.host().client();
///     // delete what this member had on the host
/// }
/// println!("{} left (attempt {})", departure.cluster_name(), departure.attempt());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Departure {
    pub(crate) cluster: ClusterName,
    pub(crate) reason: DepartureReason,
    pub(crate) fleet: Fleet,
    pub(crate) attempt: u32,
}

impl Departure {
    /// The name the member was engaged under.
    ///
    /// ```no_run
    /// # fn demo(d: mcr_manager::Departure) {
    /// let key = d.cluster_name().key();
    /// # }
    /// ```
    pub fn cluster_name(&self) -> &ClusterName {
        &self.cluster
    }

    /// Why it left.
    ///
    /// ```no_run
    /// # fn demo(d: mcr_manager::Departure) {
    /// if let mcr_manager::DepartureReason::MovedAway { owner } = d.reason() {
    ///     println!("now owned by {owner:?}");
    /// }
    /// # }
    /// ```
    pub fn reason(&self) -> &DepartureReason {
        &self.reason
    }

    /// The manager's host cluster, where cleanup usually happens.
    ///
    /// ```no_run
    /// # fn demo(d: mcr_manager::Departure) {
    /// let client = d.host().client();
    /// # }
    /// ```
    pub fn host(&self) -> &Cluster {
        self.fleet.host()
    }

    /// The fleet as it is now (the member is no longer in it).
    ///
    /// ```no_run
    /// # fn demo(d: mcr_manager::Departure) {
    /// assert!(!d.fleet().names().contains(d.cluster_name()));
    /// # }
    /// ```
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// Which attempt this is: 1 the first time, then one more per retry.
    ///
    /// ```no_run
    /// # fn demo(d: mcr_manager::Departure) {
    /// if d.attempt() > 3 { tracing::warn!(cluster = %d.cluster_name(), "cleanup keeps failing"); }
    /// # }
    /// ```
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

/// The members the fleet wants, as a [sweep](crate::Builder::sweep) sees them: every member
/// the manager's provider reports (engaged, pending, failed, or owned by another replica)
/// and every member engaged now.
///
/// ```
/// use mcr_manager::Members;
/// let members = Members::new(["member-1".into(), "/etc/fleet/a.kubeconfig+b".into()]);
/// assert!(members.is_wanted(&"member-1".into()));
/// assert!(!members.is_wanted(&"member-2".into()));
/// assert!(members.wants_key("member-1"));
/// assert!(members.wants_object_name("member-1"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Members {
    names: BTreeSet<ClusterName>,
}

impl Members {
    /// These members (for tests of a sweep; the runtime builds them itself).
    ///
    /// ```
    /// let members = mcr_manager::Members::new(["a".into()]);
    /// assert_eq!(members.names().count(), 1);
    /// ```
    pub fn new(names: impl IntoIterator<Item = ClusterName>) -> Self {
        Self {
            names: names.into_iter().collect(),
        }
    }

    /// Whether the fleet wants the member of that name.
    ///
    /// ```
    /// assert!(!mcr_manager::Members::default().is_wanted(&"a".into()));
    /// ```
    pub fn is_wanted(&self, name: &ClusterName) -> bool {
        self.names.contains(name)
    }

    /// Whether a wanted member has this [key](ClusterName::key) (a label value or data key
    /// written for it).
    ///
    /// ```
    /// let members = mcr_manager::Members::new(["kind#dev".into()]);
    /// let key = mcr_core::ClusterName::new("kind#dev").key().into_owned();
    /// assert!(members.wants_key(&key));
    /// ```
    pub fn wants_key(&self, key: &str) -> bool {
        self.names.iter().any(|n| n.key() == key)
    }

    /// Whether a wanted member has this [object name](ClusterName::object_name).
    ///
    /// ```
    /// let members = mcr_manager::Members::new(["Team_A".into()]);
    /// let object = mcr_core::ClusterName::new("Team_A").object_name().into_owned();
    /// assert!(members.wants_object_name(&object));
    /// ```
    pub fn wants_object_name(&self, object_name: &str) -> bool {
        self.names.iter().any(|n| n.object_name() == object_name)
    }

    /// The names of the wanted members, sorted.
    ///
    /// ```
    /// let members = mcr_manager::Members::new(["b".into(), "a".into()]);
    /// assert_eq!(members.names().map(|n| n.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &ClusterName> {
        self.names.iter()
    }
}

/// A controller's join hook: the requests to queue when a member joins.
pub(crate) type JoinFn<K> =
    Arc<dyn Fn(&ClusterName) -> Vec<crate::Request<K>> + Send + Sync + 'static>;

/// A controller's leave hook, type-erased.
pub(crate) type LeaveFn =
    Arc<dyn Fn(Departure) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync + 'static>;

/// A controller's sweep (`Builder::sweep`): how often, and the hook, type-erased.
#[derive(Clone)]
pub(crate) struct Sweep {
    pub(crate) period: Duration,
    pub(crate) run:
        Arc<dyn Fn(Members) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync + 'static>,
}
