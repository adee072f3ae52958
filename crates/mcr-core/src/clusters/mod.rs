//! [`Clusters`]: the cluster lifecycle every provider uses (start, sync, index, engage, remove).

use std::{collections::HashMap, sync::Arc, time::Duration};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

mod engage;
mod shard;

pub(crate) use shard::Gate;

use crate::{Cluster, ClusterName, Error, FieldIndex, Registry};

/// Options of [`Clusters`].
///
/// ```
/// use std::time::Duration;
/// use mcr_core::ClustersOptions;
/// let opts = ClustersOptions { sync_timeout: Duration::from_secs(10) };
/// assert_eq!(ClustersOptions::default().sync_timeout, Duration::from_secs(30));
/// ```
#[derive(Clone, Debug)]
pub struct ClustersOptions {
    /// How long [`Clusters::add`] waits for the cluster's caches to sync (default 30 s).
    pub sync_timeout: Duration,
}

impl Default for ClustersOptions {
    fn default() -> Self {
        Self {
            sync_timeout: Duration::from_secs(30),
        }
    }
}

/// What [`Clusters::add_or_replace`] did.
///
/// ```
/// use mcr_core::AddOutcome;
/// assert_ne!(AddOutcome::Added, AddOutcome::Unchanged);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddOutcome {
    /// No cluster of that name was running; the new one was added.
    Added,
    /// A cluster of that name was running with a different connection; it was replaced.
    Replaced,
    /// A cluster of that name is running with the same connection hash; nothing was done.
    Unchanged,
}

/// A cluster being brought up (not yet active).
struct Pending {
    cluster: Cluster,
    token: CancellationToken,
}

#[derive(Default)]
struct State {
    /// Added, not yet active (informers opening or syncing).
    pending: HashMap<ClusterName, Pending>,
    indexes: Vec<FieldIndex>,
    /// Clusters another replica owns, kept until this one does (see [`crate::shard`]).
    parked: HashMap<ClusterName, shard::Parked>,
    /// The provider token each cluster was added under, to engage it again after a release.
    parents: HashMap<ClusterName, CancellationToken>,
    /// Whether a task follows the sharder's changes.
    watching: bool,
}

struct Inner {
    opts: ClustersOptions,
    /// What happens to a cluster another replica owns.
    gate: Gate,
    state: Mutex<State>,
    /// The active clusters: membership is kept by [`Registry`], which forgets a cluster when
    /// its token fires (the manager's fleet is a `Registry` too).
    active: Registry,
}

/// The set of clusters a provider has engaged, and the one place where a cluster's lifecycle is
/// implemented. Cheap to clone (an `Arc` inside).
///
/// [`add`](Clusters::add) starts the cluster's cache with a child token of the provider's
/// token, applies every registered field index, waits for the caches to sync and engages the
/// cluster with the manager. On any failure it cancels the child token (no task keeps
/// running), forgets the cluster and returns an error naming it. A cluster whose token is
/// cancelled (removed, or the provider stopped) is forgotten automatically.
///
/// A [`Cluster`] instance is added at most once in its life: its cache is bound to the first
/// token. To re-add a removed cluster, build a new instance.
///
/// ```no_run
/// # async fn f(client: kube::Client, aware: std::sync::Arc<dyn mcr_core::Aware>) -> Result<(), mcr_core::Error> {
/// use mcr_core::{Cluster, Clusters};
/// use tokio_util::sync::CancellationToken;
///
/// let clusters = Clusters::new();
/// let token = CancellationToken::new();
/// clusters.add(&token, Cluster::new("member-1", client), &*aware).await?;
/// assert_eq!(clusters.names(), ["member-1"]);
/// clusters.remove(&"member-1".into());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Clusters {
    inner: Arc<Inner>,
}

impl Default for Clusters {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Clusters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clusters")
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

impl Clusters {
    /// An empty set with default options.
    ///
    /// ```
    /// assert!(mcr_core::Clusters::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_options(ClustersOptions::default())
    }

    /// An empty set with the given options.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcr_core::{Clusters, ClustersOptions};
    /// let c = Clusters::with_options(ClustersOptions { sync_timeout: Duration::from_secs(5) });
    /// ```
    pub fn with_options(opts: ClustersOptions) -> Self {
        Self::gated(opts, Gate::Park)
    }

    /// An empty set whose ownership gate does `gate` with clusters another replica owns.
    pub(crate) fn gated(opts: ClustersOptions, gate: Gate) -> Self {
        Self {
            inner: Arc::new(Inner {
                opts,
                gate,
                state: Mutex::new(State::default()),
                active: Registry::new(),
            }),
        }
    }

    /// The engaged cluster of that name, or [`Error::ClusterNotFound`].
    ///
    /// ```no_run
    /// # fn f(clusters: mcr_core::Clusters) -> Result<(), mcr_core::Error> {
    /// let c = clusters.get(&"member-1".into())?;
    /// # Ok(()) }
    /// ```
    pub fn get(&self, name: &ClusterName) -> Result<Cluster, Error> {
        self.inner.active.get(name)
    }

    /// The names of the engaged clusters, sorted.
    ///
    /// ```
    /// assert!(mcr_core::Clusters::new().names().is_empty());
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        self.inner.active.names()
    }

    /// How many clusters are engaged.
    ///
    /// ```
    /// assert_eq!(mcr_core::Clusters::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.inner.active.len()
    }

    /// Whether no cluster is engaged.
    ///
    /// ```
    /// assert!(mcr_core::Clusters::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Registers a field index: applied now to every present cluster and remembered for every
    /// future one. The same index again is a no-op; the same name on another type is
    /// [`Error::Index`].
    ///
    /// ```no_run
    /// # async fn f(clusters: mcr_core::Clusters) -> Result<(), mcr_core::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let idx = mcr_core::FieldIndex::new::<ConfigMap>("app", |cm| {
    ///     cm.metadata.labels.as_ref().and_then(|l| l.get("app").cloned()).into_iter().collect()
    /// });
    /// clusters.index_field(&idx).await?;
    /// # Ok(()) }
    /// ```
    pub async fn index_field(&self, index: &FieldIndex) -> Result<(), Error> {
        let clusters: Vec<Cluster> = {
            let mut state = self.inner.state.lock();
            match state.indexes.iter().find(|i| i.name() == index.name()) {
                Some(known) if known.tag() == index.tag() => {}
                Some(known) => {
                    return Err(Error::Index {
                        index: index.name().to_owned(),
                        reason: format!(
                            "already registered for {}, cannot register it for {}",
                            known.resource(),
                            index.resource()
                        ),
                    });
                }
                None => state.indexes.push(index.clone()),
            }
            let pending = state.pending.values().map(|p| p.cluster.clone());
            let active = self
                .inner
                .active
                .engagements()
                .into_iter()
                .map(|(_, c, _)| c);
            pending.chain(active).collect()
        };
        for cluster in &clusters {
            apply_index(cluster, index)?;
        }
        Ok(())
    }

    /// The token of the cluster of that name: the engaged instance, else the one being
    /// engaged (while a replacement comes up, the instance still serving).
    ///
    /// ```no_run
    /// # fn f(clusters: mcr_core::Clusters) {
    /// if let Some(t) = clusters.token(&"member-1".into()) { t.cancel(); }
    /// # }
    /// ```
    pub fn token(&self, name: &ClusterName) -> Option<CancellationToken> {
        let state = self.inner.state.lock();
        self.inner
            .active
            .token(name)
            .or_else(|| state.pending.get(name).map(|p| p.token.clone()))
    }

    /// The cluster of that name whose token has not fired, pending or active, with its token.
    /// A pending entry whose token fired (its run ended while it came up) is on its way out
    /// and does not count.
    fn live(&self, state: &State, name: &ClusterName) -> Option<(Cluster, CancellationToken)> {
        match state.pending.get(name).filter(|p| !p.token.is_cancelled()) {
            Some(p) => Some((p.cluster.clone(), p.token.clone())),
            None => {
                let cluster = self.inner.active.get(name).ok()?;
                Some((cluster, self.inner.active.token(name)?))
            }
        }
    }
}

fn apply_index(cluster: &Cluster, index: &FieldIndex) -> Result<(), Error> {
    // The cache's errors name the cluster already.
    cluster.cache().index_field(index)
}
