//! [`Fleet`]: the host cluster and the engaged clusters, readable without `await`.
//!
//! The manager records every engagement here, once: the members are an
//! [`mcr_core::Registry`] (the one implementation of membership, which forgets a member when its
//! engagement token fires). Controllers hand a clone to each [`Context`](crate::Context), so a
//! reconcile reaches the host or another member without a `Manager` in its data (a `Fleet`
//! holds no controllers, so there is no reference cycle).

use mcr_core::{Cluster, ClusterName, ClusterNotFound, Registry};

/// The host cluster and the clusters engaged right now. Cheap to clone (clones share the
/// membership); every lookup is synchronous and takes a read lock only.
///
/// ```no_run
/// # fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_core::ClusterNotFound> {
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
}

impl Fleet {
    /// A fleet of just `host` (members join as the manager engages them).
    pub(crate) fn new(host: Cluster) -> Self {
        Self {
            host,
            members: Registry::new(),
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

    /// The cluster engaged under `name` (the host for [`ClusterName::host`]), or
    /// [`ClusterNotFound`] if none is engaged under that name right now.
    ///
    /// ```no_run
    /// # fn demo(fleet: mcr_manager::Fleet) {
    /// match fleet.get(&"east".into()) {
    ///     Ok(east) => println!("east is engaged: {}", east.name()),
    ///     Err(gone) => println!("{gone}"),
    /// }
    /// # }
    /// ```
    pub fn get(&self, name: &ClusterName) -> Result<Cluster, ClusterNotFound> {
        if name.is_host() {
            return Ok(self.host.clone());
        }
        self.members
            .get(name)
            .map_err(|_| ClusterNotFound(name.clone()))
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
