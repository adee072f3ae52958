//! [`Fleet`]: the host cluster and the engaged clusters, readable without `await`.
//!
//! The manager records every engagement here, once: the members are an
//! [`mcr_core::Registry`] (the one implementation of membership, which forgets a member when its
//! engagement token fires). Controllers hand a clone to each [`Context`](crate::Context), so a
//! reconcile reaches the host or another member without a `Manager` in its data (a `Fleet`
//! holds no controllers, so there is no reference cycle).

use std::sync::Arc;

use mcr_core::shard::{Ownership, Sharder};
use mcr_core::{Cluster, ClusterName, Registry};

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
    members: Registry,
    /// Sharded mode: who owns what (see [`crate::shard`]).
    sharder: Option<Arc<dyn Sharder>>,
}

impl Fleet {
    /// A fleet of just `host` (members join as the manager engages them).
    pub(crate) fn new(host: Cluster) -> Self {
        Self {
            host,
            members: Registry::new(),
            sharder: None,
        }
    }

    /// A fleet of just `host` whose ownership `sharder` decides.
    pub(crate) fn sharded(host: Cluster, sharder: Option<Arc<dyn Sharder>>) -> Self {
        Self {
            sharder,
            ..Self::new(host)
        }
    }

    /// Who owns `name`: this replica, unless the fleet is sharded across replicas (see
    /// [`shard`](crate::shard)) and another one owns it. The host is always owned.
    ///
    /// ```no_run
    /// # fn demo(fleet: mcr_manager::Fleet) {
    /// if let Some(owner) = fleet.owner(&"east".into()).owner() { println!("east: {owner}"); }
    /// # }
    /// ```
    pub fn owner(&self, name: &ClusterName) -> Ownership {
        match &self.sharder {
            Some(s) if !name.is_host() => s.owner(name),
            _ => Ownership::Owned,
        }
    }

    /// Whether ownership here is decided by a sharder (sharded mode).
    pub(crate) fn is_sharded(&self) -> bool {
        self.sharder.is_some()
    }

    /// Whether this replica's hold on `name` has lapsed (sharded mode, past the renew
    /// deadline: see [`Sharder::lapsed`]); never for the host or without sharding.
    pub(crate) fn lapsed(&self, name: &ClusterName) -> bool {
        match &self.sharder {
            Some(s) if !name.is_host() => s.lapsed(),
            _ => false,
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
        if let Ownership::Elsewhere { owner } = self.owner(name) {
            return Err(mcr_core::Error::NotOwned {
                cluster: name.clone(),
                owner,
            });
        }
        self.members
            .get(name)
            .map_err(|_| mcr_core::Error::ClusterNotFound(name.clone()))
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

    /// The members (the engaged clusters, not the host), kept by the manager's engagements.
    pub(crate) fn members(&self) -> &Registry {
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
