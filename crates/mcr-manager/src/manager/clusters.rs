//! The manager's view of the fleet: looking clusters up, readiness, field indexes, and
//! engaging clusters by hand (the [`Aware`] side).

use mcr_core::{Aware, Cluster, ClusterName, FieldIndex};
use tokio_util::sync::CancellationToken;

use super::Manager;
use crate::Error;

impl Manager {
    /// The cluster of that name: the host cluster for [`ClusterName::host`], otherwise the
    /// engaged member ([`Fleet::get`](crate::Fleet::get): the one table the provider adds
    /// to, so the provider's `get` answers the same); `Error::NotOwned` (naming the owner when
    /// known) for a cluster another replica of a sharded fleet owns, and
    /// `Error::ClusterNotFound` if none is engaged.
    ///
    /// ```no_run
    /// # async fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_core::Error> {
    /// let host = mgr.cluster(mcr_core::ClusterName::host()).await?;
    /// let east = mgr.cluster("east").await?;
    /// # Ok(()) }
    /// ```
    pub async fn cluster(&self, name: impl Into<ClusterName>) -> Result<Cluster, mcr_core::Error> {
        self.inner.fleet.get(&name.into())
    }

    /// Names of engaged clusters (and [`ClusterName::host`] for the host) whose caches have not synced yet.
    /// `/readyz` does not wait for these (see [`Manager::is_ready`]); `/clusters` and the
    /// `mcr_cluster_synced` metric report them.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let all_synced = mgr.unsynced_clusters().is_empty();
    /// # }
    /// ```
    pub fn unsynced_clusters(&self) -> Vec<ClusterName> {
        let mut out: Vec<ClusterName> = self
            .inner
            .fleet
            .members()
            .active()
            .into_iter()
            .filter(|(_, c, _)| !c.cache().is_synced())
            .map(|(n, _, _)| n)
            .collect();
        if self.inner.host.cache().is_started() && !self.inner.host.cache().is_synced() {
            out.push(ClusterName::host());
        }
        out.sort();
        out
    }

    /// Names of the clusters engaged so far (not the host), sorted.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// for name in mgr.engaged_clusters() { println!("{name}"); }
    /// # }
    /// ```
    pub fn engaged_clusters(&self) -> Vec<ClusterName> {
        self.inner.fleet.names()
    }

    /// Registers a field index on every cluster of the provider (current and future) and on
    /// the host cluster. An index that names no namespaces
    /// ([`FieldIndex::in_namespaces`]) sits on the informer of the manager's
    /// [default namespaces](crate::ManagerBuilder::default_namespaces), the one the
    /// controllers' inputs that name none share, so it needs no cluster-wide watch.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # async fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_manager::Error> {
    /// let by_owner = mcr_core::FieldIndex::new::<ConfigMap>("owner", |cm| {
    ///     cm.metadata.labels.as_ref().and_then(|l| l.get("owner").cloned()).into_iter().collect()
    /// });
    /// mgr.index_field(&by_owner).await?;
    /// # Ok(()) }
    /// ```
    pub async fn index_field(&self, index: &FieldIndex) -> Result<(), Error> {
        let scoped;
        let index = if index.namespaces().is_empty() && !self.default_namespaces().is_empty() {
            scoped = index.in_namespaces(self.default_namespaces().iter().cloned());
            &scoped
        } else {
            index
        };
        if let Some(provider) = &self.inner.provider {
            provider.index_field(index).await?;
        }
        self.inner.host.cache().index_field(index)?;
        // Every member, engaged by the provider or by hand, and every future one.
        self.inner.fleet.members().index_field(index).await?;
        Ok(())
    }
}

/// Engaging a cluster by hand (a test, a cluster built outside any provider): its cache must
/// be started. It is recorded in the manager's table, refused with `Error::NotOwned` when
/// another replica owns it, and handed to every controller and runnable. The same instance
/// again is a no-op; a new instance of the same name replaces the old one.
impl Aware for Manager {
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        self.inner.fleet.members().engage(token, name, cluster)
    }
}

impl Manager {
    /// The manager's table of engaged clusters, the one its provider is started with: members
    /// added here ([`Engagements::add`](mcr_core::Engagements::add)) go through the whole
    /// lifecycle (cache started, controllers engaged, sync awaited) without a provider.
    ///
    /// ```no_run
    /// # async fn demo(mgr: mcr_manager::Manager, c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// mgr.engagements().add(&token, c).await?;
    /// # Ok(()) }
    /// ```
    pub fn engagements(&self) -> &mcr_core::Engagements {
        self.inner.fleet.members()
    }
}

/// The manager's own subscriber: counts engagements (`mcr_engagements_total`) and logs a
/// handoff when a cluster is taken over from another replica.
pub(super) struct Observer {
    pub(super) metrics: crate::Metrics,
    pub(super) shard: Option<std::sync::Arc<crate::shard::Coordinator>>,
}

impl Aware for Observer {
    fn engage(
        &self,
        _: CancellationToken,
        name: ClusterName,
        _: Cluster,
    ) -> Result<(), mcr_core::Error> {
        self.metrics.engaged_one();
        match self.shard.as_ref().map(|c| (c, c.taken_from(&name))) {
            Some((c, Some(from))) => {
                tracing::info!(cluster = %name, from = %from, to = %c.options().identity,
                    "handoff: cluster taken over");
            }
            _ => tracing::debug!(cluster = %name, "cluster engaged"),
        }
        Ok(())
    }
}
