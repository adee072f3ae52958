//! Reading the table: [`Engagements::get`], [`member_state`](Engagements::member_state),
//! [`names`](Engagements::names), [`member_states`](Engagements::member_states) and the like,
//! each as the handle sees it (its prefix, its own members).

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Engagements, Entry};
use crate::{Cluster, ClusterName, Error, MemberState};

impl Engagements {
    /// The entries this handle sees, with their names as it sees them.
    fn visible<'a>(
        &'a self,
        entries: &'a std::collections::BTreeMap<ClusterName, Box<Entry>>,
    ) -> impl Iterator<Item = (ClusterName, &'a Entry)> + 'a {
        entries
            .iter()
            .filter(|(_, e)| e.live() && self.owns(&e.view))
            .filter_map(|(n, e)| Some((self.local(n)?, &**e)))
    }

    /// The active member of that name: [`Error::NotOwned`] when another replica owns it,
    /// otherwise [`Error::ClusterNotFound`] unless it is engaged and synced.
    ///
    /// ```
    /// let e = mcr_core::Engagements::new();
    /// assert!(mcr_core::cluster_not_found(&e.get(&"member-1".into()).unwrap_err()).is_some());
    /// ```
    pub fn get(&self, name: &ClusterName) -> Result<Cluster, Error> {
        let full = self.full(name);
        self.refuse_elsewhere(&full, name)?;
        let state = self.table.state.lock();
        match state.entries.get(&full) {
            Some(e) if e.live() && self.owns(&e.view) => match e.serving() {
                Some(r) => Ok(r.cluster.clone()),
                None => Err(Error::ClusterNotFound(name.clone())),
            },
            _ => Err(Error::ClusterNotFound(name.clone())),
        }
    }

    /// Resolves once the instance `id` is the active member `name` (at once when it is
    /// already): woken by every change of the table, never by polling. It does not resolve
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
            let changed = self.table.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            let active = {
                let state = self.table.state.lock();
                state.entries.get(&full).is_some_and(|e| {
                    e.live()
                        && self.owns(&e.view)
                        && e.serving().is_some_and(|r| r.cluster.id() == id)
                })
            };
            if active {
                return;
            }
            changed.await;
        }
    }

    /// Every member this handle wanted (or engaged by hand), with where it stands, sorted by
    /// name: engaged, pending (being brought up, or a newer source on its way), failed (with
    /// the redacted reason and when it is tried again) or owned elsewhere. What
    /// [`Provider::member_statuses`](crate::Provider::member_statuses) reports.
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().member_states().is_empty());
    /// ```
    pub fn member_states(&self) -> Vec<(ClusterName, MemberState)> {
        let now = Instant::now();
        let state = self.table.state.lock();
        self.visible(&state.entries)
            .map(|(name, e)| (name, state_of(e, now)))
            .collect()
    }

    /// Where the member of that name stands (see [`member_states`](Self::member_states)).
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().member_state(&"a".into()).is_none());
    /// ```
    pub fn member_state(&self, name: &ClusterName) -> Option<MemberState> {
        let full = self.full(name);
        let state = self.table.state.lock();
        state
            .entries
            .get(&full)
            .filter(|e| e.live() && self.owns(&e.view))
            .map(|e| state_of(e, Instant::now()))
    }

    /// Waits until the member of that name has settled (engaged with the source wanted now,
    /// failed, or owned elsewhere: not [pending](MemberState::Pending)) and returns where it
    /// stands; `None` at once when this handle wants no member of that name. Woken by every
    /// change of the table, never by polling; an attempt is bounded by the member's build,
    /// probe and sync timeouts, so this is too, unless the member keeps changing.
    ///
    /// ```no_run
    /// # async fn f(e: mcr_core::Engagements) {
    /// if let Some(state) = e.until_settled(&"member-1".into()).await {
    ///     println!("member-1 is {state}");
    /// }
    /// # }
    /// ```
    pub async fn until_settled(&self, name: &ClusterName) -> Option<MemberState> {
        loop {
            let changed = self.table.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            match self.member_state(name)? {
                MemberState::Pending => changed.await,
                settled => return Some(settled),
            }
        }
    }

    /// The names of the active members, sorted.
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().names().is_empty());
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        let state = self.table.state.lock();
        self.visible(&state.entries)
            .filter(|(_, e)| e.serving().is_some())
            .map(|(n, _)| n)
            .collect()
    }

    /// The active members with their engagement tokens, sorted by name (names as this view
    /// sees them).
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().active().is_empty());
    /// ```
    pub fn active(&self) -> Vec<(ClusterName, Cluster, CancellationToken)> {
        let state = self.table.state.lock();
        self.visible(&state.entries)
            .filter_map(|(n, e)| {
                let r = e.serving()?;
                Some((n, r.cluster.clone(), r.token.clone()))
            })
            .collect()
    }
}

/// Where an entry stands.
fn state_of(e: &Entry, now: Instant) -> MemberState {
    if let Some(owner) = &e.elsewhere {
        return MemberState::Elsewhere {
            owner: owner.clone(),
        };
    }
    match (e.failure(), e.serving()) {
        (Some(f), _) if f.key == e.key && e.attempt().is_none() => MemberState::Failed {
            reason: f.reason.clone(),
            retry_in: f.retry_at.map(|at| at.saturating_duration_since(now)),
        },
        (_, Some(r)) if r.key == e.key => MemberState::Engaged,
        _ => MemberState::Pending,
    }
}
