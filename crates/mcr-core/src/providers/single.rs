//! [`SingleProvider`]: one pre-built cluster under a fixed name.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::{
    Aware, BoxFuture, Cluster, ClusterName, Clusters, ClustersOptions, Error, ProviderRunnable,
};

/// A provider of exactly one cluster, built beforehand. Its discovery loop engages the cluster
/// (through [`Clusters::add`]) when started and returns when the token is cancelled.
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
    clusters: Clusters,
}

impl SingleProvider {
    /// A provider of `cluster` under `name`. If the cluster was built under another name, a new
    /// instance with the same client and connection hash is made under `name`.
    ///
    /// ```no_run
    /// # fn f(client: kube::Client) {
    /// use mcr_core::{Cluster, providers::single::SingleProvider};
    /// let p = SingleProvider::new("east", Cluster::new("east", client));
    /// assert_eq!(p.name(), "east");
    /// # }
    /// ```
    pub fn new(name: impl Into<ClusterName>, cluster: Cluster) -> Self {
        Self::with_options(name, cluster, ClustersOptions::default())
    }

    /// Like [`new`](SingleProvider::new), with lifecycle options (e.g. the sync timeout).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// use std::time::Duration;
    /// use mcr_core::{ClustersOptions, providers::single::SingleProvider};
    /// let opts = ClustersOptions { sync_timeout: Duration::from_secs(5) };
    /// let p = SingleProvider::with_options("east", c, opts);
    /// # }
    /// ```
    pub fn with_options(
        name: impl Into<ClusterName>,
        cluster: Cluster,
        opts: ClustersOptions,
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
            clusters: Clusters::with_options(opts),
        }
    }

    /// The cluster's name.
    ///
    /// ```no_run
    /// # fn f(p: mcr_core::providers::single::SingleProvider) {
    /// println!("{}", p.name());
    /// # }
    /// ```
    pub fn name(&self) -> &ClusterName {
        self.cluster.name()
    }

    /// The lifecycle helper holding the cluster once engaged.
    ///
    /// ```no_run
    /// # fn f(p: mcr_core::providers::single::SingleProvider) {
    /// println!("{} engaged", p.clusters().len());
    /// # }
    /// ```
    pub fn clusters(&self) -> &Clusters {
        &self.clusters
    }
}

super::provider_over_clusters!(SingleProvider);

impl ProviderRunnable for SingleProvider {
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        aware: Arc<dyn Aware>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.clusters
                .add(&token, self.cluster.clone(), &*aware)
                .await?;
            token.cancelled().await;
            self.clusters.remove(self.cluster.name());
            Ok(())
        })
    }
}
