//! [`Registry`]: the set of engaged clusters, kept once (the manager's fleet is one too).

use std::{collections::HashMap, sync::Arc};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::{Aware, Cluster, ClusterName, Error};

struct Entry {
    cluster: Cluster,
    token: CancellationToken,
    generation: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<ClusterName, Entry>,
    next_generation: u64,
}

/// The engaged clusters: an [`Aware`] that records each engagement and forgets it when that
/// engagement's token fires. The one implementation of membership: user code mirrors a
/// provider with it, and the manager's [`Fleet`](https://docs.rs/mcr-manager) is one. Cheap to
/// clone (an `Arc` inside).
///
/// ```no_run
/// # async fn f(provider_start: impl FnOnce(std::sync::Arc<dyn mcr_core::Aware>)) -> Result<(), mcr_core::Error> {
/// use std::sync::Arc;
/// use mcr_core::Registry;
///
/// let registry = Registry::new();
/// provider_start(Arc::new(registry.clone()));
/// for name in registry.names() {
///     let cluster = registry.get(&name)?;
///     println!("{name}: {:?}", cluster.id());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("names", &self.names())
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    ///
    /// ```
    /// assert_eq!(mcr_core::Registry::new().len(), 0);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The engaged cluster of that name, or [`Error::ClusterNotFound`].
    ///
    /// ```
    /// let r = mcr_core::Registry::new();
    /// assert!(r.get(&"x".into()).is_err());
    /// ```
    pub fn get(&self, name: &ClusterName) -> Result<Cluster, Error> {
        let state = self.state.lock();
        match state.entries.get(name) {
            Some(e) if !e.token.is_cancelled() => Ok(e.cluster.clone()),
            _ => Err(Error::ClusterNotFound(name.clone())),
        }
    }

    /// The names of the engaged clusters, sorted.
    ///
    /// ```
    /// assert!(mcr_core::Registry::new().names().is_empty());
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        let state = self.state.lock();
        let mut names: Vec<ClusterName> = state
            .entries
            .iter()
            .filter(|(_, e)| !e.token.is_cancelled())
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    }

    /// How many clusters are engaged.
    ///
    /// ```
    /// assert_eq!(mcr_core::Registry::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.state
            .lock()
            .entries
            .values()
            .filter(|e| !e.token.is_cancelled())
            .count()
    }

    /// Whether no cluster is engaged.
    ///
    /// ```
    /// assert!(mcr_core::Registry::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Registry {
    /// Records `cluster` under `name` until `token` fires, and says whether anything changed:
    /// `false` when the same instance is already recorded under a live engagement (a no-op);
    /// `true` when it was added or replaced another instance. Refuses the names no member may
    /// have ([`Error::InvalidName`]) and needs a tokio runtime ([`Error::Engage`] without one).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// let registry = mcr_core::Registry::new();
    /// let token = tokio_util::sync::CancellationToken::new();
    /// assert!(registry.record(token.clone(), "a".into(), c.clone())?);
    /// assert!(!registry.record(token, "a".into(), c)?); // already there
    /// # Ok(()) }
    /// ```
    pub fn record(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<bool, Error> {
        if let Some(reason) = name.member_name_error() {
            return Err(Error::InvalidName {
                cluster: name,
                reason,
            });
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|err| Error::Engage {
            cluster: name.clone(),
            source: Box::new(err),
        })?;
        let generation = {
            let mut state = self.state.lock();
            let live_same = state
                .entries
                .get(&name)
                .is_some_and(|e| e.cluster.same_instance(&cluster) && !e.token.is_cancelled());
            if live_same {
                return Ok(false);
            }
            state.next_generation += 1;
            let generation = state.next_generation;
            let entry = Entry {
                cluster,
                token: token.clone(),
                generation,
            };
            state.entries.insert(name.clone(), entry);
            generation
        };
        let weak = Arc::downgrade(&self.state);
        runtime.spawn(async move {
            token.cancelled().await;
            if let Some(state) = weak.upgrade() {
                let mut state = state.lock();
                if state
                    .entries
                    .get(&name)
                    .is_some_and(|e| e.generation == generation)
                {
                    state.entries.remove(&name);
                }
            }
        });
        Ok(true)
    }

    /// The token of the live engagement under `name`.
    pub(crate) fn token(&self, name: &ClusterName) -> Option<CancellationToken> {
        self.state
            .lock()
            .entries
            .get(name)
            .filter(|e| !e.token.is_cancelled())
            .map(|e| e.token.clone())
    }

    /// Forgets the engagement under `name` now and returns its token (for the caller to
    /// cancel), so the name is free at once.
    pub(crate) fn take(&self, name: &ClusterName) -> Option<CancellationToken> {
        self.state.lock().entries.remove(name).map(|e| e.token)
    }

    /// Every live engagement: name, cluster and engagement token, sorted by name.
    ///
    /// ```
    /// assert!(mcr_core::Registry::new().engagements().is_empty());
    /// ```
    pub fn engagements(&self) -> Vec<(ClusterName, Cluster, CancellationToken)> {
        let state = self.state.lock();
        let mut out: Vec<_> = state
            .entries
            .iter()
            .filter(|(_, e)| !e.token.is_cancelled())
            .map(|(n, e)| (n.clone(), e.cluster.clone(), e.token.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

impl Aware for Registry {
    /// Records the cluster ([`Registry::record`]); it is forgotten when `token` fires. Engaging
    /// the same instance again while its engagement is live is a no-op; a new instance replaces
    /// the old one.
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), Error> {
        self.record(token, name, cluster).map(|_| ())
    }
}
