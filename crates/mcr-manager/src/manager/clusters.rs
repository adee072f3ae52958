//! The manager's view of the fleet: looking clusters up, readiness, field indexes, and
//! engagement (the [`Aware`] side that providers call).

use mcr_core::{Aware, Cluster, ClusterName, ErrorChain, FieldIndex};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::Manager;
use crate::Error;

impl Manager {
    /// The cluster of that name: the host cluster for [`ClusterName::host`], otherwise an
    /// engaged cluster or the provider's; `Error::NotOwned` (naming the owner when known) for
    /// a cluster another replica of a sharded fleet owns, and `Error::ClusterNotFound` if
    /// there is none.
    ///
    /// ```no_run
    /// # async fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_core::Error> {
    /// let host = mgr.cluster(mcr_core::ClusterName::host()).await?;
    /// let east = mgr.cluster("east").await?;
    /// # Ok(()) }
    /// ```
    pub async fn cluster(&self, name: impl Into<ClusterName>) -> Result<Cluster, mcr_core::Error> {
        let name = name.into();
        if name.is_host() {
            return Ok(self.inner.host.clone());
        }
        match self.inner.fleet.get(&name) {
            Ok(cluster) => return Ok(cluster),
            // Another replica's: say whose, never hand it out through the provider.
            Err(err @ mcr_core::Error::NotOwned { .. }) => return Err(err),
            Err(_) => {}
        }
        match &self.inner.provider {
            Some(provider) => provider.get(&name).await,
            None => Err(mcr_core::Error::ClusterNotFound(name)),
        }
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
            .engagements()
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
        let engaged: Vec<Cluster> = self
            .inner
            .fleet
            .members()
            .engagements()
            .into_iter()
            .map(|(_, c, _)| c)
            .collect();
        for cluster in engaged {
            // Clusters engaged by hand (not through the provider) get it too; idempotent.
            cluster.cache().index_field(index)?;
        }
        Ok(())
    }
}

impl Aware for Manager {
    fn sharder(&self) -> Option<std::sync::Arc<dyn mcr_core::shard::Sharder>> {
        self.inner
            .shard
            .clone()
            .map(|c| c as std::sync::Arc<dyn mcr_core::shard::Sharder>)
    }

    fn shared(&self) -> Option<std::sync::Arc<dyn Aware>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    /// Engages `cluster` under `name` with every controller and runnable (also those added
    /// later). The same instance again is a no-op; a new instance replaces the old one (the
    /// old one's watches stop, nothing is reconciled against it afterwards). The cluster is
    /// forgotten when `token` fires. The cluster's cache must be started: providers engage
    /// through [`Clusters::add`](mcr_core::Clusters::add), which starts it (the one place that
    /// does) and waits for it to sync (the one sync gate); a cache not started is refused with
    /// [`Error::Engage`](mcr_core::Error::Engage).
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        // Refuses the empty name and the host's (`Error::InvalidName`), and a cluster whose
        // cache nobody started: nothing would ever list there.
        if let Some(reason) = name.member_name_error() {
            return Err(mcr_core::Error::InvalidName {
                cluster: name,
                reason,
            });
        }
        if !cluster.cache().is_started() {
            return Err(mcr_core::Error::Engage {
                cluster: name,
                source: "its cache is not started: engage clusters through `mcr_core::Clusters` \
                         (`add` starts the cache and waits for it to sync), or start it first"
                    .into(),
            });
        }
        let runnables = {
            // Lock order: state, then the fleet (so `add` sees each engagement exactly once).
            let state = self.state();
            // The fleet forgets the member when `token` fires.
            let record = || {
                self.inner
                    .fleet
                    .members()
                    .record(token.clone(), name.clone(), cluster.clone())
            };
            // Sharded: only a cluster this replica owns, atomically with the ownership check.
            if !self.admit(&name, record)?? {
                return Ok(()); // the same instance, already engaged
            }
            state.runnables.clone()
        };
        self.metrics().engaged_one();
        // Known by the engaged name in the cache's logs and errors, and its informers'.
        cluster.cache().engaged_as(&name);
        match self.inner.shard.as_ref().map(|c| (c, c.taken_from(&name))) {
            Some((c, Some(from))) => {
                info!(cluster = %name, from = %from, to = %c.options().identity,
                    "handoff: cluster taken over");
            }
            _ => debug!(cluster = %name, "cluster engaged"),
        }
        for runnable in runnables {
            let Some(aware) = runnable.aware() else {
                continue;
            };
            if let Err(err) = aware.engage(token.clone(), name.clone(), cluster.clone()) {
                warn!(runnable = runnable.name(), cluster = %name, error = %ErrorChain(&err), "engage failed");
            }
        }
        Ok(())
    }
}

impl Manager {
    /// Runs `record` if this replica owns `name` (always without sharding), else
    /// [`mcr_core::Error::NotOwned`].
    fn admit<R>(
        &self,
        name: &ClusterName,
        record: impl FnOnce() -> R,
    ) -> Result<R, mcr_core::Error> {
        match &self.inner.shard {
            None => Ok(record()),
            Some(c) => c
                .admit(name, record)
                .map_err(|o| mcr_core::Error::NotOwned {
                    cluster: name.clone(),
                    owner: o.owner().map(str::to_owned),
                }),
        }
    }

    /// Who owns `name` in sharded mode (this replica, without sharding).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// println!("{}", mgr.owner(&"east".into()));
    /// # }
    /// ```
    pub fn owner(&self, name: &ClusterName) -> mcr_core::shard::Ownership {
        self.inner.fleet.owner(name)
    }
}
