//! [`SingleProvider`]: one pre-built cluster under a fixed name.

use std::time::Duration;

use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use crate::{BoxFuture, Cluster, ClusterName, Engagements, Error, ProviderRunnable};

/// A provider of exactly one cluster, built beforehand. Its discovery loop engages the cluster
/// (through [`Engagements::add`](crate::Engagements::add)) when started and returns when the token is cancelled.
///
/// ```no_run
/// # async fn f(client: kube::Client) {
/// use std::sync::Arc;
/// use mcr_core::{Cluster, Provider, providers::single::SingleProvider};
///
/// let provider = Arc::new(SingleProvider::new("east", Cluster::new("east", client)));
/// let p: Arc<dyn Provider> = provider.clone();
/// assert!(p.runnable().is_some());
/// # }
/// ```
#[derive(Debug)]
pub struct SingleProvider {
    cluster: Cluster,
    /// A table of its own until started, then its handle on the one it was started with.
    engagements: RwLock<Engagements>,
}

impl SingleProvider {
    /// A provider of `cluster` under `name`. If the cluster was built under another name, a new
    /// instance with the same client and connection hash is made under `name`.
    ///
    /// ```no_run
    /// # fn f(client: kube::Client) {
    /// use mcr_core::{Cluster, providers::single::SingleProvider};
    /// let p = SingleProvider::new("east", Cluster::new("east", client));
    /// # }
    /// ```
    pub fn new(name: impl Into<ClusterName>, cluster: Cluster) -> Self {
        Self::with_sync_timeout(name, cluster, crate::DEFAULT_SYNC_TIMEOUT)
    }

    /// Like [`new`](SingleProvider::new), waiting at most `sync_timeout` for the cluster's
    /// caches to sync.
    pub(crate) fn with_sync_timeout(
        name: impl Into<ClusterName>,
        cluster: Cluster,
        sync_timeout: Duration,
    ) -> Self {
        let name = name.into();
        let cluster = if cluster.name() == &name {
            cluster
        } else {
            let renamed = Cluster::new(name, cluster.client());
            match cluster.connection_hash() {
                Some(hash) => renamed.with_connection_hash(hash),
                None => renamed,
            }
        };
        Self {
            cluster,
            engagements: RwLock::new(
                Engagements::new()
                    .prefixed("")
                    .with_sync_timeout(sync_timeout),
            ),
        }
    }

    /// Its handle on the table it was started with (before that, a table of its own).
    pub(crate) fn engagements(&self) -> Engagements {
        self.engagements.read().clone()
    }
}

super::provider_over_clusters!(SingleProvider);

impl ProviderRunnable for SingleProvider {
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        engagements: Engagements,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let bound = self.engagements().rebind(&engagements)?;
            *self.engagements.write() = bound.clone();
            bound.add(&token, self.cluster.clone()).await?;
            token.cancelled().await;
            bound.remove(self.cluster.name());
            Ok(())
        })
    }
}
