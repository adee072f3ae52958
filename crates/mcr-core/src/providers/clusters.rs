//! [`ClustersProvider`]: pre-built clusters added and removed at runtime by code.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::{
    AddOutcome, Aware, BoxFuture, Cluster, ClusterName, Clusters, ClustersOptions, Error,
    ProviderRunnable,
};

#[derive(Default)]
struct State {
    pending: Vec<Cluster>,
    running: Option<(CancellationToken, Arc<dyn Aware>)>,
}

/// A provider whose clusters are handed to it by code, through
/// [`add`](ClustersProvider::add) and [`remove`](ClustersProvider::remove): for tests and for
/// embedding mcr in a program that discovers clusters itself.
///
/// Clusters added before [`start`](ProviderRunnable::start) are engaged at start (a failing
/// one is logged and skipped); clusters added afterwards are engaged right away.
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
    clusters: Clusters,
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
            .field("clusters", &self.clusters)
            .finish_non_exhaustive()
    }
}

impl ClustersProvider {
    /// An empty provider with default lifecycle options.
    ///
    /// ```
    /// let p = mcr_core::providers::clusters::ClustersProvider::new();
    /// ```
    pub fn new() -> Self {
        Self::with_options(ClustersOptions::default())
    }

    /// An empty provider with the given lifecycle options.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcr_core::{ClustersOptions, providers::clusters::ClustersProvider};
    /// let p = ClustersProvider::with_options(ClustersOptions { sync_timeout: Duration::from_secs(5) });
    /// ```
    pub fn with_options(opts: ClustersOptions) -> Self {
        Self {
            clusters: Clusters::with_options(opts),
            state: Mutex::new(State::default()),
        }
    }

    /// Adds a cluster: engaged now if the provider runs (see [`Clusters::add`] for the steps
    /// and errors), else queued until start. A name already present is
    /// [`Error::AlreadyEngaged`].
    ///
    /// ```no_run
    /// # async fn f(p: mcr_core::providers::clusters::ClustersProvider, c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// p.add(c).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, cluster: Cluster) -> Result<(), Error> {
        let (token, aware) = {
            let mut state = self.state.lock();
            match &state.running {
                Some((token, aware)) => (token.clone(), aware.clone()),
                None => {
                    if state.pending.iter().any(|c| c.name() == cluster.name()) {
                        return Err(Error::AlreadyEngaged(cluster.name().clone()));
                    }
                    state.pending.push(cluster);
                    return Ok(());
                }
            }
        };
        self.clusters.add(&token, cluster, &*aware).await
    }

    /// Adds a cluster, replacing one of the same name unless both have the same connection
    /// hash (see [`Clusters::add_or_replace`]). Before start, replaces the queued cluster.
    ///
    /// ```no_run
    /// # async fn f(p: mcr_core::providers::clusters::ClustersProvider, c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// let outcome = p.add_or_replace(c).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_or_replace(&self, cluster: Cluster) -> Result<AddOutcome, Error> {
        let (token, aware) = {
            let mut state = self.state.lock();
            match &state.running {
                Some((token, aware)) => (token.clone(), aware.clone()),
                None => {
                    let before = state.pending.len();
                    state.pending.retain(|c| c.name() != cluster.name());
                    let outcome = if state.pending.len() < before {
                        AddOutcome::Replaced
                    } else {
                        AddOutcome::Added
                    };
                    state.pending.push(cluster);
                    return Ok(outcome);
                }
            }
        };
        self.clusters.add_or_replace(&token, cluster, &*aware).await
    }

    /// Removes a cluster (queued or engaged); false if absent.
    ///
    /// ```no_run
    /// # fn f(p: mcr_core::providers::clusters::ClustersProvider) {
    /// p.remove(&"a".into());
    /// # }
    /// ```
    pub fn remove(&self, name: &ClusterName) -> bool {
        {
            let mut state = self.state.lock();
            let before = state.pending.len();
            state.pending.retain(|c| c.name() != name);
            if state.pending.len() < before {
                return true;
            }
        }
        self.clusters.remove(name)
    }

    /// The lifecycle helper holding the engaged clusters.
    ///
    /// ```
    /// let p = mcr_core::providers::clusters::ClustersProvider::new();
    /// assert!(p.clusters().is_empty());
    /// ```
    pub fn clusters(&self) -> &Clusters {
        &self.clusters
    }
}

super::provider_over_clusters!(ClustersProvider);

impl ProviderRunnable for ClustersProvider {
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        aware: Arc<dyn Aware>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let pending = {
                let mut state = self.state.lock();
                state.running = Some((token.clone(), aware.clone()));
                std::mem::take(&mut state.pending)
            };
            for cluster in pending {
                let name = cluster.name().clone();
                if let Err(err) = self.clusters.add(&token, cluster, &*aware).await {
                    tracing::warn!(cluster = %name, error = %crate::ErrorChain(&err), "could not engage cluster");
                }
            }
            token.cancelled().await;
            self.state.lock().running = None;
            Ok(())
        })
    }
}
