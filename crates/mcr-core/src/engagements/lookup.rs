//! Reading the table: [`Engagements::get`], [`phase`](Engagements::phase),
//! [`names`](Engagements::names) and the like, each as the handle sees it (its prefix, its own
//! members).

use tokio_util::sync::CancellationToken;

use super::{Engagements, Instance, Phase};
use crate::{Cluster, ClusterName, Error};

impl Engagements {
    /// The active member of that name: [`Error::NotOwned`] when another replica owns it,
    /// otherwise [`Error::ClusterNotFound`] unless it is engaged and synced.
    ///
    /// ```
    /// let e = mcr_core::Engagements::new();
    /// assert!(mcr_core::is_cluster_not_found(&e.get(&"member-1".into()).unwrap_err()));
    /// ```
    pub fn get(&self, name: &ClusterName) -> Result<Cluster, Error> {
        let full = self.full(name);
        self.refuse_elsewhere(&full, name)?;
        let state = self.table.state.lock();
        match state.active.get(&full) {
            Some(i) if !i.token.is_cancelled() && self.owns(i.origin.as_ref()) => {
                Ok(i.cluster.clone())
            }
            _ => Err(Error::ClusterNotFound(name.clone())),
        }
    }

    /// Resolves once the instance `id` is the active member `name` (at once when it is
    /// already): woken by every activation in the table, never by polling. It does not resolve
    /// for an instance that never becomes active, so callers bound it, typically by the
    /// instance's token.
    ///
    /// ```no_run
    /// # async fn f(e: mcr_core::Engagements, c: mcr_core::Cluster) {
    /// e.until_active(c.name(), c.id()).await;
    /// assert!(e.get(c.name()).is_ok_and(|active| active.same_instance(&c)));
    /// # }
    /// ```
    pub async fn until_active(&self, name: &ClusterName, id: crate::ClusterId) {
        let full = self.full(name);
        loop {
            let activated = self.table.activated.notified();
            let mut activated = std::pin::pin!(activated);
            activated.as_mut().enable();
            let active = {
                let state = self.table.state.lock();
                state.active.get(&full).is_some_and(|i| {
                    i.cluster.id() == id && !i.token.is_cancelled() && self.owns(i.origin.as_ref())
                })
            };
            if active {
                return;
            }
            activated.await;
        }
    }

    /// Where the member of that name is in its life, if the table knows it.
    ///
    /// ```
    /// assert_eq!(mcr_core::Engagements::new().phase(&"a".into()), None);
    /// ```
    pub fn phase(&self, name: &ClusterName) -> Option<Phase> {
        let full = self.full(name);
        let state = self.table.state.lock();
        let live = |i: &Instance| !i.token.is_cancelled() && self.owns(i.origin.as_ref());
        if state.active.get(&full).is_some_and(live) {
            Some(Phase::Active)
        } else if state.starting.get(&full).is_some_and(live) {
            Some(Phase::Starting)
        } else if state
            .parked
            .get(&full)
            .is_some_and(|p| self.owns(p.origin().as_ref()))
        {
            Some(Phase::Parked)
        } else {
            None
        }
    }

    /// The names of the active members, sorted.
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().names().is_empty());
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        let state = self.table.state.lock();
        let mut names: Vec<ClusterName> = state
            .active
            .iter()
            .filter(|(_, i)| !i.token.is_cancelled() && self.owns(i.origin.as_ref()))
            .filter_map(|(n, _)| self.local(n))
            .collect();
        names.sort();
        names
    }

    /// How many members are active.
    ///
    /// ```
    /// assert_eq!(mcr_core::Engagements::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        let state = self.table.state.lock();
        state
            .active
            .iter()
            .filter(|(n, i)| {
                !i.token.is_cancelled() && self.owns(i.origin.as_ref()) && self.local(n).is_some()
            })
            .count()
    }

    /// Whether no member is active.
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The active members with their engagement tokens, sorted by name (names as this view
    /// sees them).
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().active().is_empty());
    /// ```
    pub fn active(&self) -> Vec<(ClusterName, Cluster, CancellationToken)> {
        let state = self.table.state.lock();
        let mut out: Vec<_> = state
            .active
            .iter()
            .filter(|(_, i)| !i.token.is_cancelled() && self.owns(i.origin.as_ref()))
            .filter_map(|(n, i)| Some((self.local(n)?, i.cluster.clone(), i.token.clone())))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The token of the member of that name: the active instance, else the one starting.
    ///
    /// ```no_run
    /// # fn f(e: mcr_core::Engagements) {
    /// if let Some(t) = e.token(&"member-1".into()) { t.cancel(); }
    /// # }
    /// ```
    pub fn token(&self, name: &ClusterName) -> Option<CancellationToken> {
        let full = self.full(name);
        let state = self.table.state.lock();
        let live = |i: &&Instance| !i.token.is_cancelled() && self.owns(i.origin.as_ref());
        state
            .active
            .get(&full)
            .filter(live)
            .or_else(|| state.starting.get(&full).filter(live))
            .map(|i| i.token.clone())
    }
}
