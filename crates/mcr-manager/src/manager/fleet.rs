//! [`Fleet`]: the host cluster and the engaged clusters, readable without `await`.
//!
//! The members are a read-only view of the process's one table of engaged clusters,
//! [`mcr_core::Engagements`], which the manager owns and its provider adds to: a member is
//! here from the moment it is active until its engagement token fires, exactly when the
//! provider's `get` finds it. Controllers hand a clone to each [`Context`](crate::Context), so
//! a reconcile reaches the host or another member without a `Manager` in its data (a `Fleet`
//! holds no controllers, so there is no reference cycle).

use mcr_core::{Cluster, ClusterName, Engagements, Ownership};

/// The host cluster and the clusters engaged right now. Cheap to clone (clones share the
/// membership); every lookup is synchronous and takes a read lock only.
///
/// ```no_run
/// # fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_core::Error> {
/// let fleet = mgr.fleet().clone();
/// let host_client = fleet.host().client();
/// for name in fleet.names() {
///     let member = fleet.get(&name)?;
///     println!("{name}: synced = {}", member.cache().is_synced());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Fleet {
    host: Cluster,
    members: Engagements,
    /// Whether the manager shards the fleet across replicas.
    sharded: bool,
}

impl Fleet {
    /// A fleet of just `host` (members join as the manager engages them).
    pub(crate) fn new(host: Cluster) -> Self {
        Self::over(host, Engagements::new(), false)
    }

    /// `host` and the members of `table`, `sharded` across replicas or not.
    pub(crate) fn over(host: Cluster, table: Engagements, sharded: bool) -> Self {
        Self {
            host,
            members: table,
            sharded,
        }
    }

    /// Whether the manager shards the fleet across replicas (see [`shard`](crate::shard)):
    /// then every replica engages the members it owns and work on a member is that replica's;
    /// otherwise (one replica, or leader election) every member is the leader's.
    ///
    /// ```no_run
    /// # fn demo(fleet: mcr_manager::Fleet) {
    /// let per_replica = fleet.is_sharded();
    /// # }
    /// ```
    pub fn is_sharded(&self) -> bool {
        self.sharded
    }

    /// Who owns `name`: this replica, unless the fleet is sharded across replicas (see
    /// [`shard`](crate::shard)) and another one owns it. The host is always owned.
    ///
    /// ```no_run
    /// # fn demo(fleet: mcr_manager::Fleet) {
    /// println!("east is {}", fleet.owner(&"east".into())); // "owned by replica-2", ...
    /// # }
    /// ```
    pub fn owner(&self, name: &ClusterName) -> Ownership {
        self.members.owner(name)
    }

    /// Whether this replica's hold on `name` has lapsed (sharded mode, past the renew
    /// deadline: see [`mcr_core::Coordinator::lapsed`]); never for the host or without
    /// sharding.
    pub(crate) fn lapsed(&self, name: &ClusterName) -> bool {
        !name.is_host() && self.members.lapsed()
    }

    /// Resolves once `cluster` is the instance engaged under `name` (at once for the host): a
    /// member's reconciles start only then, so that they find their own cluster through
    /// [`Fleet::get`]. Holds no clone of the instance; bounded by the caller.
    pub(crate) fn until_engaged(
        &self,
        name: &ClusterName,
        cluster: &Cluster,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (members, name, id) = (self.members.clone(), name.clone(), cluster.id());
        async move {
            if !name.is_host() {
                members.until_active(&name, id).await;
            }
        }
    }

    /// The manager's host cluster.
    ///
    /// ```no_run
    /// # fn demo(fleet: mcr_manager::Fleet) {
    /// let client = fleet.host().client();
    /// # }
    /// ```
    pub fn host(&self) -> &Cluster {
        &self.host
    }

    /// The cluster engaged under `name` (the host for [`ClusterName::host`]). Otherwise
    /// [`mcr_core::Error::NotOwned`] for a cluster another replica owns (the fleet is sharded
    /// across replicas, see [`shard`](crate::shard); the error names the owner when known: a
    /// non-owned cluster is never reachable from this replica, there is no read-only opt-in),
    /// and [`mcr_core::Error::ClusterNotFound`] for a cluster not engaged here right now.
    ///
    /// ```no_run
    /// # fn demo(fleet: mcr_manager::Fleet) {
    /// match fleet.get(&"east".into()) {
    ///     Ok(east) => println!("east is engaged: {}", east.name()),
    ///     Err(mcr_core::Error::NotOwned { owner, .. }) => println!("east is {owner:?}'s"),
    ///     Err(gone) => println!("{gone}"),
    /// }
    /// # }
    /// ```
    pub fn get(&self, name: &ClusterName) -> Result<Cluster, mcr_core::Error> {
        if name.is_host() {
            return Ok(self.host.clone());
        }
        self.members.get(name)
    }

    /// The names of the engaged clusters (not the host), sorted.
    ///
    /// ```no_run
    /// # fn demo(fleet: mcr_manager::Fleet) {
    /// for name in fleet.names() { println!("{name}"); }
    /// # }
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        self.members.names()
    }

    /// The table of engaged clusters (not the host).
    pub(crate) fn members(&self) -> &Engagements {
        &self.members
    }
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("members", &self.names())
            .finish_non_exhaustive()
    }
}
