//! What the manager reports about itself: readiness, per-cluster sync and credentials.

use mcr_core::ClusterName;
use mcr_core::credentials::CredentialStatus;

use super::Manager;

/// One cluster as [`Manager::cluster_statuses`] (and `/clusters`) reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterStatus {
    /// The name it is engaged under (empty for the host cluster).
    pub name: ClusterName,
    /// Whether its caches have synced.
    pub synced: bool,
    /// The state of its credentials when its client renews them in place
    /// ([`Cluster::credentials`](mcr_core::Cluster::credentials)): expiry, renewal failures and
    /// the last failure's (redacted) reason. `None` for static credentials.
    pub credentials: Option<CredentialStatus>,
}

impl ClusterStatus {
    /// Whether the cluster can be worked with: its caches synced and its credentials, if they
    /// expire, not expired.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let unhealthy: Vec<_> = mgr.cluster_statuses().into_iter().filter(|s| !s.is_healthy()).collect();
    /// # }
    /// ```
    pub fn is_healthy(&self) -> bool {
        self.synced
            && !self
                .credentials
                .as_ref()
                .is_some_and(CredentialStatus::is_expired)
    }

    /// `valid`, `expiring` (renewal failing, not yet expired) or `expired`; `None` for static
    /// credentials. The word `/clusters` shows.
    ///
    /// ```
    /// let s = mcr_manager::ClusterStatus::new("a".into(), true, None);
    /// assert_eq!(s.credential_state(), None);
    /// ```
    pub fn credential_state(&self) -> Option<&'static str> {
        let c = self.credentials.as_ref()?;
        Some(if c.is_expired() {
            "expired"
        } else if c.is_renewal_failing() {
            "expiring"
        } else {
            "valid"
        })
    }

    /// A status (for tests and custom health endpoints).
    ///
    /// ```
    /// let s = mcr_manager::ClusterStatus::new("a".into(), false, None);
    /// assert!(!s.is_healthy());
    /// ```
    pub fn new(name: ClusterName, synced: bool, credentials: Option<CredentialStatus>) -> Self {
        ClusterStatus {
            name,
            synced,
            credentials,
        }
    }
}

impl Manager {
    /// The host cluster (once its cache started) and every engaged cluster, with whether its
    /// caches synced and the state of its credentials, sorted by name.
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
            .read()
            .iter()
            .filter(|(_, (_, t))| !t.is_cancelled())
            .map(|(n, (c, _))| ClusterStatus {
                name: n.clone(),
                synced: c.cache().is_synced(),
                credentials: c.credentials().map(|h| h.status()),
            })
            .collect();
        let host = self.inner.host.cache();
        if host.is_started() {
            out.push(ClusterStatus {
                name: ClusterName::host(),
                synced: host.is_synced(),
                credentials: self.inner.host.credentials().map(|h| h.status()),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// What `/readyz` reports: the manager runs, the host cluster's cache (if started) has
    /// synced, and the provider has started (when this manager leads; a standby waiting for
    /// the Lease does not start it). Members that have not synced (a missing CRD or RBAC in one
    /// member) do not make the pod unready, nor do a member's credentials expiring or expired
    /// with renewal failing: one bad cluster must not take the pod out of service for the
    /// others. Those show in [`cluster_statuses`](Self::cluster_statuses) (`/clusters`), the
    /// `mcr_cluster_synced` and `mcr_cluster_credentials_*` metrics, and the renewal's log
    /// lines (with the cluster name).
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

    /// Refreshes `mcr_cluster_synced` and `mcr_cluster_credentials_*` from
    /// [`cluster_statuses`](Self::cluster_statuses).
    pub(crate) fn refresh_sync_metrics(&self) {
        let statuses = self.cluster_statuses();
        let states: Vec<(String, bool)> = statuses
            .iter()
            .map(|s| (s.name.to_string(), s.synced))
            .collect();
        self.metrics().set_cluster_sync(&states);
        let credentials: Vec<_> = statuses
            .into_iter()
            .filter_map(|s| Some((s.name.to_string(), s.credentials?)))
            .collect();
        self.metrics().set_credentials(&credentials);
    }
}
