//! The table's side of sharding (see [`coordinator`](crate::coordinator)): the coordinator
//! it asks, and handing back what another replica came to own. Deciding what runs is the
//! converge step's ([`converge`](super::converge)): a member another replica owns keeps only
//! its entry (no client, no task), and is brought up once this replica owns it.

use std::sync::Arc;

use tokio::time::Instant;

use super::Engagements;
use super::converge::{converge, drive};
use crate::coordinator::{Coordinator, Ownership};
use crate::{ClusterName, Error, Released};

impl Engagements {
    /// Sets the coordinator that decides which clusters this replica owns; once per table
    /// (the manager does it when sharded). A second call is refused with the coordinator
    /// handed back. From then on, every change the coordinator announces converges every
    /// member.
    pub fn coordinate(
        &self,
        coordinator: Arc<dyn Coordinator>,
    ) -> Result<(), Arc<dyn Coordinator>> {
        self.table.coordinator.set(coordinator)?;
        self.table.wake.notify_one();
        Ok(())
    }

    /// The coordinator, if one was set.
    pub(crate) fn coordinator(&self) -> Option<&Arc<dyn Coordinator>> {
        self.table.coordinator.get()
    }

    /// Who owns `name` (this replica, without a coordinator).
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().owner(&"a".into()).is_owned());
    /// ```
    pub fn owner(&self, name: &ClusterName) -> Ownership {
        self.owner_of_full(&self.full(name))
    }

    /// Who owns the member of that full name.
    fn owner_of_full(&self, full: &ClusterName) -> Ownership {
        match self.coordinator() {
            Some(c) if !full.is_host() => c.owner(full),
            _ => Ownership::Owned,
        }
    }

    /// [`Error::NotOwned`] (naming `shown` and the owner, when known) if another replica owns
    /// the member of that full name.
    pub(super) fn refuse_elsewhere(
        &self,
        full: &ClusterName,
        shown: &ClusterName,
    ) -> Result<(), Error> {
        match self.owner_of_full(full) {
            Ownership::Owned => Ok(()),
            Ownership::Elsewhere { owner } => Err(Error::NotOwned {
                cluster: shown.clone(),
                owner,
            }),
        }
    }

    /// Whether this replica's hold on its clusters has lapsed (see
    /// [`Coordinator::lapsed`]); never without a coordinator.
    ///
    /// ```
    /// assert!(!mcr_core::Engagements::new().lapsed());
    /// ```
    pub fn lapsed(&self) -> bool {
        self.coordinator().is_some_and(|c| c.lapsed())
    }

    /// Converges every member at once against the coordinator's answer now (stopping what
    /// this replica no longer owns, as the table's driver would a moment later), and returns a
    /// handle on each instance it does not own that may still be alive (by name as this
    /// handle sees it). Once every handle [is released](Released::is_released), no work of a
    /// cluster given away is left in this process. Members activated after this call are
    /// refused, since activation asks the coordinator too. Without a coordinator, nothing.
    ///
    /// Sharded mode calls it after publishing a change of ownership and waits on the handles
    /// before it lets another replica take the clusters over.
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().release_unowned().is_empty());
    /// ```
    pub fn release_unowned(&self) -> Vec<(ClusterName, Released)> {
        if self.coordinator().is_none() {
            return Vec::new();
        }
        let now = Instant::now();
        let mut state = self.table.state.lock();
        let names: Vec<ClusterName> = state.entries.keys().cloned().collect();
        for name in &names {
            converge(&self.table, &mut state, name, now);
        }
        drive(&self.table, &mut state);
        state.stopped.retain(|(_, r)| !r.is_released());
        let mut held: Vec<(ClusterName, Released)> = state.stopped.clone();
        // Engaged by hand on a table that got its coordinator later: still its engager's.
        held.extend(
            state
                .entries
                .iter()
                .filter(|(n, e)| e.by_hand && !self.owner_of_full(n).is_owned())
                .filter_map(|(n, e)| Some((n.clone(), e.serving()?.cluster.released()))),
        );
        drop(state);
        self.table.changed.notify_waiters();
        held.into_iter()
            .filter_map(|(name, released)| Some((self.local(&name)?, released)))
            .collect()
    }
}
