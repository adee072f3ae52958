//! The ownership gate of [`Engagements`] (see [`coordinator`](crate::coordinator)): a member
//! another replica owns is parked (its cache not started) and engaged once this replica owns
//! it; an engaged member whose ownership moved away is stopped and parked again as a new
//! instance. Handles that [refuse](Engagements::refusing) instead leave bringing it back to
//! their caller.

use std::sync::{Arc, Weak};

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info};

use super::{Engagements, Gate, Parked, State, Table};
use crate::coordinator::{Coordinator, Ownership};
use crate::{Cluster, ClusterName, Error, Released};

impl Engagements {
    /// Sets the coordinator that decides which clusters this replica owns; once per table
    /// (the manager does it when sharded). A second call is refused with the coordinator
    /// handed back.
    pub fn coordinate(
        &self,
        coordinator: Arc<dyn Coordinator>,
    ) -> Result<(), Arc<dyn Coordinator>> {
        self.table.coordinator.set(coordinator)
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
    pub(super) fn owner_of_full(&self, full: &ClusterName) -> Ownership {
        match self.coordinator() {
            Some(c) if !full.is_host() => c.owner(full),
            _ => Ownership::Owned,
        }
    }

    /// [`Error::NotOwned`] (naming `shown` and the owner, when known) if another replica owns
    /// the member of that full name: the one place the table refuses a cluster it does not own.
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

    /// A receiver that changes every time ownership may have changed; `None` without a
    /// coordinator (ownership never changes).
    pub(crate) fn ownership_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.coordinator().map(|c| c.changes())
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

    /// Asks the coordinator whether this replica owns `name` (a full name); called by
    /// `bring_in` with the state lock held, right after the member became starting (so a
    /// release that follows a change of ownership finds it). `None`: go on. `Some(outcome)`:
    /// the member was taken out of starting (parked, or refused) and `outcome` is what `add`
    /// returns.
    pub(super) fn gate(
        &self,
        state: &mut State,
        parent: &CancellationToken,
        name: &ClusterName,
        cluster: &Cluster,
    ) -> Option<Result<(), Error>> {
        let coordinator = self.coordinator()?.clone();
        if self.view.gate == Gate::Park {
            state
                .parents
                .insert(name.clone(), (parent.clone(), self.view.clone()));
            if !state.following {
                state.following = true;
                // Subscribed before ownership is looked at below: no change goes unseen.
                let changes = coordinator.changes();
                let weak = Arc::downgrade(&self.table);
                tokio::spawn(
                    follow(weak, coordinator.clone(), changes)
                        .instrument(tracing::info_span!("ownership")),
                );
            }
        }
        let owner = match coordinator.owner(name) {
            Ownership::Owned => return None,
            Ownership::Elsewhere { owner } => owner,
        };
        if let Some(i) = state.starting.remove(name) {
            i.token.cancel();
        }
        Some(match self.view.gate {
            Gate::Park => {
                let parked = Parked {
                    parent: parent.clone(),
                    cluster: cluster.clone(),
                    view: self.view.clone(),
                };
                state.parked.insert(name.clone(), parked);
                info!(cluster = %name, owner = owner.as_deref().unwrap_or("unknown"),
                    "cluster owned by another replica: parked");
                Ok(())
            }
            Gate::Refuse => {
                let shown = self.local(name).unwrap_or_else(|| name.clone());
                Err(Error::NotOwned {
                    cluster: shown,
                    owner,
                })
            }
        })
    }

    /// Stops at once every member this replica no longer owns by the coordinator's answer
    /// now, as the table's follower of the coordinator would a moment later, and returns a
    /// handle on each instance it does not own that may still be alive (by name as this
    /// handle sees it): those stopped for ownership, here or by the follower, and those a
    /// refusing handle added, which their caller stops. Once every handle
    /// [is released](Released::is_released), no work of a cluster given away is left in this
    /// process. Members activated after this call are refused, since activation asks the
    /// coordinator too. Without a coordinator, nothing.
    ///
    /// Sharded mode calls it after publishing a change of ownership and waits on the handles
    /// before it lets another replica take the clusters over.
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().release_unowned().is_empty());
    /// ```
    pub fn release_unowned(&self) -> Vec<(ClusterName, Released)> {
        let Some(coordinator) = self.coordinator().cloned() else {
            return Vec::new();
        };
        let mut state = self.table.state.lock();
        release_locked(&mut state, &*coordinator)
            .into_iter()
            .filter_map(|(name, released)| Some((self.local(&name)?, released)))
            .collect()
    }

    /// Under the state lock, at activation: `Err` if another replica owns the member now (it
    /// changed while the member came up), after taking it out of starting and parking a new
    /// instance of it when a parking handle added it, so that no instance becomes active once
    /// a change of ownership was published ([`release_unowned`](Self::release_unowned)).
    pub(super) fn refuse_at_activation(
        &self,
        state: &mut State,
        name: &ClusterName,
        cluster: &Cluster,
    ) -> Result<(), Error> {
        let Err(refused) =
            self.refuse_elsewhere(name, &self.local(name).unwrap_or_else(|| name.clone()))
        else {
            return Ok(());
        };
        if let Some(i) = state.starting.remove(name) {
            i.token.cancel();
        }
        // Its subscribers may still hold it: a release waits for it like any other.
        state.stopped.push((name.clone(), cluster.released()));
        if state.parents.contains_key(name) {
            park(state, name, cluster);
            return Err(Error::Stopped(name.clone()));
        }
        Err(refused)
    }

    /// Forgets a parked member and its parent token; whether one was parked.
    pub(super) fn unpark(&self, state: &mut State, name: &ClusterName) -> bool {
        if state
            .parked
            .get(name)
            .is_some_and(|p| !self.owns(p.origin().as_ref()))
        {
            return false;
        }
        state.parents.remove(name);
        state.parked.remove(name).is_some()
    }
}

/// Follows the coordinator's changes: releases what this replica no longer owns (and parks a
/// new instance of it), engages what it came to own. Ends when the table or the coordinator
/// is dropped.
async fn follow(
    table: Weak<Table>,
    coordinator: Arc<dyn Coordinator>,
    mut changes: tokio::sync::watch::Receiver<u64>,
) {
    loop {
        if changes.changed().await.is_err() {
            return;
        }
        let Some(table) = table.upgrade() else { return };
        for (parent, cluster, handle) in sweep(&table, &*coordinator) {
            let span = tracing::info_span!("owned", cluster = %cluster.name());
            tokio::spawn(
                async move {
                    // Errors are logged by `bring_in` (and the member forgotten, as for any
                    // member that cannot be engaged).
                    let _ = handle.add(&parent, cluster).await;
                }
                .instrument(span),
            );
        }
    }
}

/// One pass over the table after a change of ownership: stops what this replica no longer
/// owns ([`release_locked`]) and returns the parked members it owns now, with the handle to add
/// each again.
fn sweep(
    table: &Arc<Table>,
    coordinator: &dyn Coordinator,
) -> Vec<(CancellationToken, Cluster, Engagements)> {
    let mut state = table.state.lock();
    let state = &mut *state;
    release_locked(state, coordinator);
    let owned: Vec<ClusterName> = state
        .parked
        .keys()
        .filter(|name| coordinator.owner(name).is_owned())
        .cloned()
        .collect();
    owned
        .into_iter()
        .filter_map(|name| state.parked.remove(&name))
        .map(|p| {
            let handle = Engagements {
                table: table.clone(),
                view: p.view,
            };
            (p.parent, p.cluster, handle)
        })
        .collect()
}

/// Under the state lock: stops the active and starting members this replica no longer owns
/// that were added through a parking handle (parking a new instance of each), and returns a
/// handle on every instance it does not own that may still be alive: those stopped for
/// ownership, here or by an earlier pass (whichever of the follower and
/// [`Engagements::release_unowned`] came first), and those left to the refusing handle that
/// added them ([`members::Workers`](crate::members::Workers) stops its own).
fn release_locked(
    state: &mut State,
    coordinator: &dyn Coordinator,
) -> Vec<(ClusterName, Released)> {
    state
        .parents
        .retain(|_, (parent, _)| !parent.is_cancelled());
    state.stopped.retain(|(_, r)| !r.is_released());
    let mut unowned = Vec::new();
    let mut release = Vec::new();
    for (name, i) in state.active.iter().chain(state.starting.iter()) {
        if !i.token.is_cancelled() && !coordinator.owner(name).is_owned() {
            // Only members added through a parking handle: a refusing handle's caller
            // releases its own, and a member engaged by hand stays its engager's.
            if state.parents.contains_key(name) {
                release.push((name.clone(), i.cluster.clone(), i.token.clone()));
            } else {
                unowned.push((name.clone(), i.cluster.released()));
            }
        }
    }
    for (name, cluster, token) in release {
        // Only the instance found above: a replacement of it goes too (it is not owned
        // either), an entry of another name stays.
        state.starting.remove(&name);
        state.active.remove(&name);
        token.cancel();
        let owner = match coordinator.owner(&name) {
            Ownership::Elsewhere { owner: Some(owner) } => owner,
            _ => "unknown".to_owned(),
        };
        info!(cluster = %name, owner = %owner,
            "ownership moved to another replica: cluster stopped");
        park(state, &name, &cluster);
        state.stopped.push((name, cluster.released()));
    }
    state.parked.retain(|_, p| !p.parent.is_cancelled());
    unowned.extend(state.stopped.iter().cloned());
    unowned
}

/// Parks a new instance of `cluster`, if it was added under a parent token (by a parking
/// handle), to engage it again once this replica owns it.
fn park(state: &mut State, name: &ClusterName, cluster: &Cluster) {
    if let Some((parent, view)) = state.parents.get(name) {
        let parked = Parked {
            parent: parent.clone(),
            cluster: cluster.fresh(),
            view: view.clone(),
        };
        state.parked.insert(name.clone(), parked);
    }
}
