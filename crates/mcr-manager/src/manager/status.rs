//! What the manager reports about itself: readiness, per-cluster sync and credentials.

use std::collections::BTreeMap;

use mcr_core::credentials::CredentialStatus;
use mcr_core::{ClusterName, MemberState};

use super::Manager;

/// One cluster as [`Manager::cluster_statuses`] (and `/clusters`) reports it: an engaged
/// cluster, or a member the provider knows but has not engaged (pending or failed).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterStatus {
    /// The name it is (or would be) engaged under ([`ClusterName::host`] for the host).
    pub name: ClusterName,
    /// Whether it is engaged and its caches have synced.
    pub synced: bool,
    /// The state of its credentials when its client renews them in place
    /// ([`Cluster::credentials`](mcr_core::Cluster::credentials)): expiry, renewal failures and
    /// the last failure's (redacted) reason. `None` for static credentials.
    pub credentials: Option<CredentialStatus>,
    /// What the provider, or a runnable, reports when the member is not simply engaged
    /// ([`Manager::member_statuses`]): pending (being built or synced) or failed, with the
    /// redacted reason; the most severe when several report it. A member that is not engaged
    /// at all has `synced: false` (a member gone from the provider whose webhook
    /// configurations are still being removed, for one); an engaged one keeps serving
    /// meanwhile. `None` otherwise.
    pub member: Option<MemberState>,
    /// In sharded mode, the replica that owns the cluster (this one's identity for an
    /// engaged cluster), when known; `None` without sharding.
    pub owner: Option<String>,
}

impl ClusterStatus {
    /// Whether the cluster can be worked with: its caches synced, its credentials, if they
    /// expire, not expired, and the provider's last attempt for it not failed.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let unhealthy: Vec<_> = mgr.cluster_statuses().into_iter().filter(|s| !s.is_healthy()).collect();
    /// # }
    /// ```
    pub fn is_healthy(&self) -> bool {
        self.synced
            && !matches!(self.member, Some(MemberState::Failed { .. }))
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
            member: None,
            owner: None,
        }
    }

    /// The same status with what the provider reports about the member.
    ///
    /// ```
    /// use mcr_core::MemberState;
    /// let s = mcr_manager::ClusterStatus::new("a".into(), false, None)
    ///     .with_member(Some(MemberState::Pending));
    /// assert_eq!(s.member, Some(MemberState::Pending));
    /// ```
    #[must_use]
    pub fn with_member(mut self, member: Option<MemberState>) -> Self {
        self.member = member;
        self
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
        let mut out: BTreeMap<ClusterName, ClusterStatus> = self
            .inner
            .fleet
            .members()
            .active()
            .into_iter()
            .map(|(name, c, _)| {
                let status = ClusterStatus::new(
                    name.clone(),
                    c.cache().is_synced(),
                    c.credentials().map(|h| h.status()),
                );
                (name, status)
            })
            .collect();
        // Members the provider (or a runnable) reports beyond the engaged ones: pending,
        // failed or elsewhere; when several report one member, the most severe state shows.
        for m in self.member_statuses() {
            if m.state == MemberState::Engaged {
                continue;
            }
            let status = out
                .entry(m.name.clone())
                .or_insert_with(|| ClusterStatus::new(m.name, false, None));
            if status
                .member
                .as_ref()
                .is_none_or(|shown| severity(&m.state) > severity(shown))
            {
                status.member = Some(m.state);
            }
        }
        if let Some(shard) = &self.inner.shard {
            for s in out.values_mut() {
                s.owner = match self.inner.fleet.owner(&s.name) {
                    mcr_core::Ownership::Owned => Some(shard.options().identity_str().to_owned()),
                    mcr_core::Ownership::Elsewhere { owner } => owner,
                };
            }
        }
        let host = self.inner.host.cache();
        if host.is_started() {
            let status = ClusterStatus::new(
                ClusterName::host(),
                host.is_synced(),
                self.inner.host.credentials().map(|h| h.status()),
            );
            out.insert(ClusterName::host(), status);
        }
        out.into_values().collect()
    }

    /// What the provider reports about each of its members: engaged, pending or failed with
    /// the redacted reason ([`Provider::member_statuses`](mcr_core::Provider::member_statuses)),
    /// then what each added runnable reports ([`Runnable::member_statuses`](crate::Runnable::member_statuses):
    /// for example `mcr-webhook`'s member configurations, under the provider name
    /// `webhook-configurations`, with a departed member whose cleanup keeps failing). A member
    /// may so be listed once per reporter: tell them apart by
    /// [`provider`](mcr_core::MemberStatus::provider). [`cluster_statuses`](Self::cluster_statuses)
    /// and `/clusters` include the ones not engaged (the most severe state when several report
    /// one member: failed, then pending, then elsewhere), and the `mcr_members` gauge counts
    /// them by reporter.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// for m in mgr.member_statuses() {
    ///     println!("{} {}: {}", m.provider, m.name, m.state);
    /// }
    /// # }
    /// ```
    pub fn member_statuses(&self) -> Vec<mcr_core::MemberStatus> {
        let mut statuses = self
            .inner
            .provider
            .as_ref()
            .map(|p| p.member_statuses())
            .unwrap_or_default();
        // Asked outside the lock: a runnable's report must not hold the manager's state.
        let runnables = self.state().runnables.clone();
        for runnable in runnables {
            statuses.extend(runnable.member_statuses());
        }
        statuses
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
    /// [`cluster_statuses`](Self::cluster_statuses), and `mcr_members` from
    /// [`member_statuses`](Self::member_statuses).
    pub(crate) fn refresh_sync_metrics(&self) {
        self.metrics().set_members(&self.member_statuses());
        let statuses = self.cluster_statuses();
        // A member the provider has not engaged (pending, failed) counts as not synced.
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

/// How much a member state says is wrong, for showing one state of several.
fn severity(state: &MemberState) -> u8 {
    match state {
        MemberState::Failed { .. } => 3,
        MemberState::Pending => 2,
        MemberState::Elsewhere { .. } => 1,
        _ => 0,
    }
}
