//! The ownership gate of [`Clusters`] (see [`crate::shard`]): a cluster another replica owns
//! is parked (its cache not started) and engaged once this replica owns it; an engaged cluster
//! whose ownership moved away is stopped and parked again as a new instance.

use std::sync::{Arc, Weak};

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info};

use super::{Clusters, Inner, State};
use crate::shard::{Ownership, Sharder};
use crate::{Aware, Cluster, ClusterName, Error};

/// A cluster another replica owns, kept until this replica owns it.
pub(super) struct Parked {
    parent: CancellationToken,
    cluster: Cluster,
}

/// What the gate does with a cluster this replica does not own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Park it and engage it when this replica owns it (providers that hand over ready
    /// clusters).
    #[default]
    Park,
    /// Refuse it with [`Error::NotOwned`]: the caller ([`Workers`](crate::members::Workers))
    /// brings it up again when this replica owns it.
    Refuse,
}

impl Clusters {
    /// Asks `aware`'s sharder whether this replica owns `cluster`; called by `bring_in` with
    /// the state lock held, right after the cluster became pending (so a release that
    /// follows a change of ownership finds it). `None`: go on. `Some(outcome)`: the cluster
    /// was taken out of pending (parked, or refused) and `outcome` is what `add` returns.
    pub(super) fn gate(
        &self,
        state: &mut State,
        parent: &CancellationToken,
        cluster: &Cluster,
        aware: &dyn Aware,
    ) -> Option<Result<(), Error>> {
        let sharder = aware.sharder()?;
        let name = cluster.name();
        if self.inner.gate == Gate::Park {
            let shared = aware.shared()?;
            state.parents.insert(name.clone(), parent.clone());
            if !state.watching {
                state.watching = true;
                let weak = Arc::downgrade(&self.inner);
                // Subscribed before ownership is looked at below: no change goes unseen.
                let changes = sharder.changes();
                tokio::spawn(
                    watch_ownership(weak, sharder.clone(), changes, shared)
                        .instrument(tracing::info_span!("ownership")),
                );
            }
        }
        let owner = match sharder.owner(name) {
            Ownership::Owned => return None,
            Ownership::Elsewhere { owner } => owner,
        };
        if let Some(p) = state.pending.remove(name) {
            p.token.cancel();
        }
        Some(match self.inner.gate {
            Gate::Park => {
                let parked = Parked {
                    parent: parent.clone(),
                    cluster: cluster.clone(),
                };
                state.parked.insert(name.clone(), parked);
                info!(cluster = %name, owner = owner.as_deref().unwrap_or("unknown"),
                    "cluster owned by another replica: parked");
                Ok(())
            }
            Gate::Refuse => Err(Error::NotOwned {
                cluster: name.clone(),
                owner,
            }),
        })
    }

    /// After a failed bring-up: if it was stopped because ownership moved (a new instance is
    /// parked already), or the engagement was refused because another replica owns the
    /// cluster now, says so (`true`, parking a new instance in the second case); the cluster
    /// is engaged when this replica owns it.
    pub(super) fn refused(
        &self,
        parent: &CancellationToken,
        cluster: &Cluster,
        err: &Error,
        aware: &dyn Aware,
    ) -> bool {
        // Stopped because ownership moved while it came up: a new instance is parked already.
        if matches!(err, Error::Stopped(_))
            && self.inner.state.lock().parked.contains_key(cluster.name())
        {
            return true;
        }
        let not_owned = match err {
            Error::NotOwned { .. } => true,
            Error::Engage { source, .. } => {
                matches!(source.downcast_ref::<Error>(), Some(Error::NotOwned { .. }))
            }
            _ => false,
        };
        if !not_owned || self.inner.gate != Gate::Park {
            return false;
        }
        let (Some(sharder), Some(shared)) = (aware.sharder(), aware.shared()) else {
            return false;
        };
        let name = cluster.name().clone();
        let fresh = cluster.fresh();
        {
            let mut state = self.inner.state.lock();
            let parked = Parked {
                parent: parent.clone(),
                cluster: fresh,
            };
            state.parked.insert(name.clone(), parked);
        }
        info!(cluster = %name, "engagement refused, another replica owns the cluster: parked");
        // Owned again already (no change will come to wake the parked cluster): bring it in.
        if sharder.owner(&name).is_owned() {
            let taken = self.inner.state.lock().parked.remove(&name);
            if let Some(p) = taken {
                let clusters = self.clone();
                tokio::spawn(async move {
                    let _ = clusters.add(&p.parent, p.cluster, &*shared).await;
                });
            }
        }
        true
    }

    /// Forgets a parked cluster and its parent token; whether one was parked.
    pub(super) fn unpark(&self, state: &mut State, name: &ClusterName) -> bool {
        state.parents.remove(name);
        state.parked.remove(name).is_some()
    }

    /// The names of the parked clusters (another replica owns them), sorted.
    ///
    /// ```
    /// assert!(mcr_core::Clusters::new().parked().is_empty());
    /// ```
    pub fn parked(&self) -> Vec<ClusterName> {
        let mut names: Vec<ClusterName> = self.inner.state.lock().parked.keys().cloned().collect();
        names.sort();
        names
    }
}

/// Follows the sharder's changes: releases what this replica no longer owns (and parks a new
/// instance of it), engages what it came to own. Ends when the `Clusters` or the sharder is
/// dropped.
async fn watch_ownership(
    inner: Weak<Inner>,
    sharder: Arc<dyn Sharder>,
    mut changes: tokio::sync::watch::Receiver<u64>,
    aware: Arc<dyn Aware>,
) {
    loop {
        if changes.changed().await.is_err() {
            return;
        }
        let Some(inner) = inner.upgrade() else { return };
        let clusters = Clusters { inner };
        let admit = clusters.sweep(&*sharder);
        for (parent, cluster) in admit {
            let clusters = clusters.clone();
            let aware = aware.clone();
            let span = tracing::info_span!("owned", cluster = %cluster.name());
            tokio::spawn(
                async move {
                    // Errors are logged by `bring_in` (and the cluster forgotten, as for any
                    // cluster that cannot be engaged).
                    let _ = clusters.add(&parent, cluster, &*aware).await;
                }
                .instrument(span),
            );
        }
    }
}

impl Clusters {
    /// One pass over the clusters after a change of ownership: stops the engaged and pending
    /// clusters this replica no longer owns (parking a new instance of each), and returns the
    /// parked clusters it owns now, to be brought in.
    fn sweep(&self, sharder: &dyn Sharder) -> Vec<(CancellationToken, Cluster)> {
        let mut state = self.inner.state.lock();
        let state = &mut *state;
        state.parents.retain(|_, parent| !parent.is_cancelled());
        let mut release: Vec<(ClusterName, Cluster, CancellationToken)> = Vec::new();
        for (name, cluster, token) in self.inner.active.engagements() {
            if !sharder.owner(&name).is_owned() {
                release.push((name, cluster, token));
            }
        }
        for (name, p) in &state.pending {
            if !sharder.owner(name).is_owned() {
                release.push((name.clone(), p.cluster.clone(), p.token.clone()));
            }
        }
        for (name, cluster, token) in release {
            state.pending.remove(&name);
            self.inner.active.take(&name);
            token.cancel();
            let owner = sharder.owner(&name);
            info!(cluster = %name, owner = owner.owner().unwrap_or("unknown"),
                "ownership moved to another replica: cluster stopped");
            if let Some(parent) = state.parents.get(&name) {
                let parked = Parked {
                    parent: parent.clone(),
                    cluster: cluster.fresh(),
                };
                state.parked.insert(name, parked);
            }
        }
        state.parked.retain(|_, p| !p.parent.is_cancelled());
        let owned: Vec<ClusterName> = state
            .parked
            .keys()
            .filter(|name| sharder.owner(name).is_owned())
            .cloned()
            .collect();
        owned
            .into_iter()
            .filter_map(|name| state.parked.remove(&name))
            .map(|p| (p.parent, p.cluster))
            .collect()
    }
}
