//! What the manager reports about itself: readiness and per-cluster sync.

use mcr_core::ClusterName;

use super::Manager;

/// One cluster as [`Manager::cluster_statuses`] (and `/clusters`) reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterStatus {
    /// The name it is engaged under (empty for the host cluster).
    pub name: ClusterName,
    /// Whether its caches have synced.
    pub synced: bool,
}

impl Manager {
    /// The host cluster (once its cache started) and every engaged cluster, with whether its
    /// caches synced, sorted by name.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// for s in mgr.cluster_statuses().iter().filter(|s| !s.synced) {
    ///     println!("{} has not synced", s.name);
    /// }
    /// # }
    /// ```
    pub fn cluster_statuses(&self) -> Vec<ClusterStatus> {
        let mut out: Vec<ClusterStatus> = self
            .inner
            .fleet
            .members()
            .engagements()
            .into_iter()
            .map(|(name, c, _)| ClusterStatus {
                name,
                synced: c.cache().is_synced(),
            })
            .collect();
        let host = self.inner.host.cache();
        if host.is_started() {
            out.push(ClusterStatus {
                name: ClusterName::host(),
                synced: host.is_synced(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// What `/readyz` reports: the manager runs, the host cluster's cache (if started) has
    /// synced, and the provider has started (when this manager leads; a standby waiting for
    /// the Lease does not start it). Members that have not synced (a missing CRD or RBAC in one
    /// member) do not make the pod unready; see [`cluster_statuses`](Self::cluster_statuses).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// if mgr.is_ready() { println!("ready"); }
    /// # }
    /// ```
    pub fn is_ready(&self) -> bool {
        let (running, provider_started) = {
            let state = self.state();
            (state.running.is_some(), state.provider_started)
        };
        let host = self.inner.host.cache();
        let host_ok = !host.is_started() || host.is_synced();
        let provider_ok = self.inner.provider.is_none() || provider_started || self.is_standby();
        running && host_ok && provider_ok
    }

    /// True while leader election is on and this manager does not lead.
    fn is_standby(&self) -> bool {
        #[cfg(feature = "leader-election")]
        {
            self.inner.leader_election.is_some() && !self.is_leader()
        }
        #[cfg(not(feature = "leader-election"))]
        {
            false
        }
    }

    /// Refreshes `mcr_cluster_synced` from [`cluster_statuses`](Self::cluster_statuses).
    pub(crate) fn refresh_sync_metrics(&self) {
        let states: Vec<(String, bool)> = self
            .cluster_statuses()
            .into_iter()
            .map(|s| (s.name.to_string(), s.synced))
            .collect();
        self.metrics().set_cluster_sync(&states);
    }
}
