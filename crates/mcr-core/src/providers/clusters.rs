//! [`ClustersProvider`]: pre-built clusters added and removed at runtime by code.

use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::{
    BoxFuture, Cluster, ClusterName, DEFAULT_SYNC_TIMEOUT, Engagements, Error, ProviderRunnable,
    Source,
};

struct State {
    /// Added before start.
    queued: Vec<Cluster>,
    /// A table of its own until started, then its handle on the one it was started with.
    engagements: Engagements,
    /// The run's token, while it runs.
    running: Option<CancellationToken>,
}

/// A provider whose clusters are handed to it by code, through
/// [`add`](ClustersProvider::add) and [`remove`](ClustersProvider::remove): for tests and for
/// embedding mcr in a program that discovers clusters itself.
///
/// Clusters added before [`start`](ProviderRunnable::start) are wanted at start (a failing
/// one is retried with backoff); clusters added afterwards are engaged right away.
///
/// ```no_run
/// # async fn f(client: kube::Client) -> Result<(), mcr_core::Error> {
/// use std::sync::Arc;
/// use mcr_core::{Cluster, providers::clusters::ClustersProvider};
///
/// let provider = Arc::new(ClustersProvider::new());
/// provider.add(Cluster::new("a", client)).await?; // engaged when the manager starts it
/// provider.remove(&"a".into());
/// # Ok(()) }
/// ```
pub struct ClustersProvider {
    state: Mutex<State>,
}

impl Default for ClustersProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ClustersProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClustersProvider")
            .field("engagements", &self.engagements())
            .finish_non_exhaustive()
    }
}

impl ClustersProvider {
    /// An empty provider, waiting at most 30 s for a cluster's caches to sync.
    ///
    /// ```
    /// let p = mcr_core::providers::clusters::ClustersProvider::new();
    /// ```
    pub fn new() -> Self {
        Self::with_sync_timeout(DEFAULT_SYNC_TIMEOUT)
    }

    /// An empty provider, waiting at most `sync_timeout` for a cluster's caches to sync.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcr_core::providers::clusters::ClustersProvider;
    /// let p = ClustersProvider::with_sync_timeout(Duration::from_secs(5));
    /// ```
    pub fn with_sync_timeout(sync_timeout: Duration) -> Self {
        let engagements = Engagements::new()
            .prefixed("")
            .with_sync_timeout(sync_timeout);
        Self {
            state: Mutex::new(State {
                queued: Vec::new(),
                engagements,
                running: None,
            }),
        }
    }

    /// The run's token and handle, while the provider runs.
    fn running(&self) -> Option<(CancellationToken, Engagements)> {
        let state = self.state.lock();
        let token = state.running.clone()?;
        Some((token, state.engagements.clone()))
    }

    /// Adds a cluster: engaged now if the provider runs (see [`Engagements::add`] for the steps
    /// and errors), else queued until start. A name already present is
    /// [`Error::AlreadyEngaged`].
    ///
    /// ```no_run
    /// # async fn f(p: mcr_core::providers::clusters::ClustersProvider, c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// p.add(c).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, cluster: Cluster) -> Result<(), Error> {
        let Some((token, engagements)) = self.running() else {
            let mut state = self.state.lock();
            if state.queued.iter().any(|c| c.name() == cluster.name()) {
                return Err(Error::AlreadyEngaged(cluster.name().clone()));
            }
            state.queued.push(cluster);
            return Ok(());
        };
        engagements.add(&token, cluster).await
    }

    /// Wants `cluster` under its name, replacing one of the same name unless both are the
    /// same instance or have the same connection hash (see [`Engagements::want`]): returns at
    /// once, and a cluster that fails to come up is retried with backoff. Before start,
    /// replaces the queued cluster.
    ///
    /// ```no_run
    /// # fn f(p: mcr_core::providers::clusters::ClustersProvider, c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// p.want(c)?;
    /// # Ok(()) }
    /// ```
    pub fn want(&self, cluster: Cluster) -> Result<(), Error> {
        let Some((token, engagements)) = self.running() else {
            let mut state = self.state.lock();
            state.queued.retain(|c| c.name() != cluster.name());
            state.queued.push(cluster);
            return Ok(());
        };
        let name = cluster.name().clone();
        engagements.want(&token, &name, Source::Cluster(cluster))
    }

    /// Removes a cluster (queued or engaged); false if absent.
    ///
    /// ```no_run
    /// # fn f(p: mcr_core::providers::clusters::ClustersProvider) {
    /// p.remove(&"a".into());
    /// # }
    /// ```
    pub fn remove(&self, name: &ClusterName) -> bool {
        let engagements = {
            let mut state = self.state.lock();
            let before = state.queued.len();
            state.queued.retain(|c| c.name() != name);
            if state.queued.len() < before {
                return true;
            }
            state.engagements.clone()
        };
        engagements.remove(name)
    }

    /// Its handle on the table it was started with (before that, a table of its own).
    ///
    /// ```
    /// let p = mcr_core::providers::clusters::ClustersProvider::new();
    /// assert!(p.engagements().names().is_empty());
    /// ```
    pub fn engagements(&self) -> Engagements {
        self.state.lock().engagements.clone()
    }
}

super::provider_over_clusters!(ClustersProvider);

impl ProviderRunnable for ClustersProvider {
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        engagements: Engagements,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let (queued, bound) = {
                let mut state = self.state.lock();
                if state.running.is_some() {
                    return Err(Error::AlreadyRunning {
                        provider: "clusters".to_owned(),
                    });
                }
                let bound = state.engagements.rebind(&engagements)?;
                state.engagements = bound.clone();
                state.running = Some(token.clone());
                (std::mem::take(&mut state.queued), bound)
            };
            for cluster in queued {
                let name = cluster.name().clone();
                if let Err(err) = bound.want(&token, &name, Source::Cluster(cluster)) {
                    tracing::warn!(cluster = %name, error = %crate::ErrorChain(&err), "could not engage cluster");
                }
            }
            token.cancelled().await;
            self.state.lock().running = None;
            Ok(())
        })
    }
}
