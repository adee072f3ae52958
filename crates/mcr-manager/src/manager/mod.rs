//! The multi-cluster manager: host cluster, provider, controllers and their lifecycle.

mod run;

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    sync::{
        Arc, Mutex, MutexGuard, Weak,
        atomic::{AtomicBool, Ordering},
    },
};

use mcr_core::{Aware, Cluster, ClusterName, FieldIndex, Provider};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{debug, warn};

#[cfg(feature = "leader-election")]
use crate::LeaderElection;
use crate::{Error, Metrics, Runnable, error::BuilderError};

/// Owns the host cluster, the optional provider, and everything that runs: controllers,
/// user [`Runnable`]s, the provider's discovery loop, the metrics/health endpoint and leader
/// election. Cheap to clone (all clones are the same manager).
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_core::providers::clusters::ClustersProvider;
/// use mcr_manager::Manager;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let provider = Arc::new(ClustersProvider::new());
/// let mgr = Manager::builder(client).provider(provider).build();
/// // ... register controllers ...
/// mgr.run().await?; // until Ctrl-C / SIGTERM
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

struct Inner {
    host: Cluster,
    provider: Option<Arc<dyn Provider>>,
    metrics: Metrics,
    metrics_addr: Option<SocketAddr>,
    #[cfg(feature = "leader-election")]
    leader_election: Option<LeaderElection>,
    leader: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    engaged: HashMap<ClusterName, (Cluster, CancellationToken)>,
    runnables: Vec<Arc<dyn Runnable>>,
    controller_names: HashSet<String>,
    running: Option<Running>,
    http_addr: Option<SocketAddr>,
}

/// What late-added runnables need to start while the manager runs.
#[derive(Clone)]
struct Running {
    tracker: TaskTracker,
    providers: TaskTracker,
    work: CancellationToken,
    leading: Option<CancellationToken>,
    errors: tokio::sync::mpsc::UnboundedSender<Error>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("provider", &self.inner.provider.is_some())
            .field("engaged", &self.state().engaged.len())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Manager`].
///
/// ```no_run
/// # async fn demo(client: kube::Client) {
/// let mgr = mcr_manager::Manager::builder(client)
///     .metrics_address(([0, 0, 0, 0], 8080).into())
///     .build();
/// # }
/// ```
#[must_use]
pub struct ManagerBuilder {
    host: Cluster,
    provider: Option<Arc<dyn Provider>>,
    metrics: Option<Metrics>,
    metrics_addr: Option<SocketAddr>,
    #[cfg(feature = "leader-election")]
    leader_election: Option<LeaderElection>,
}

impl std::fmt::Debug for ManagerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerBuilder").finish_non_exhaustive()
    }
}

impl ManagerBuilder {
    /// Adds the provider whose clusters controllers reconcile. A provider with a discovery
    /// loop is started by [`Manager::run`].
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(client: kube::Client) {
    /// let provider = Arc::new(mcr_core::providers::clusters::ClustersProvider::new());
    /// let mgr = mcr_manager::Manager::builder(client).provider(provider).build();
    /// # }
    /// ```
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on this address while running (port 0
    /// picks a free port; see [`Manager::http_addr`]).
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client).metrics_address(([127, 0, 0, 1], 0).into()).build();
    /// # }
    /// ```
    pub fn metrics_address(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Uses this metrics registry (e.g. one shared with other parts of the program).
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let metrics = mcr_manager::Metrics::new();
    /// let mgr = mcr_manager::Manager::builder(client).metrics(metrics.clone()).build();
    /// # }
    /// ```
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Runs controllers and the provider only while holding this Lease on the host cluster.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let le = mcr_manager::LeaderElection::new("my-controller", "kube-system");
    /// let mgr = mcr_manager::Manager::builder(client).leader_election(le).build();
    /// # }
    /// ```
    #[cfg(feature = "leader-election")]
    pub fn leader_election(mut self, config: LeaderElection) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// The manager.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client).build();
    /// # }
    /// ```
    pub fn build(self) -> Manager {
        Manager {
            inner: Arc::new(Inner {
                host: self.host,
                provider: self.provider,
                metrics: self.metrics.unwrap_or_default(),
                metrics_addr: self.metrics_addr,
                #[cfg(feature = "leader-election")]
                leader_election: self.leader_election,
                leader: AtomicBool::new(false),
                state: Mutex::new(State::default()),
            }),
        }
    }
}

impl Manager {
    /// A manager for the host cluster reached by `client`, with an optional provider.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), kube::Error> {
    /// let mgr = mcr_manager::Manager::new(kube::Client::try_default().await?, None);
    /// # Ok(()) }
    /// ```
    pub fn new(client: kube::Client, provider: Option<Arc<dyn Provider>>) -> Manager {
        let mut builder = Self::builder(client);
        builder.provider = provider;
        builder.build()
    }

    /// A [`ManagerBuilder`] for more options.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client).build();
    /// # }
    /// ```
    pub fn builder(client: kube::Client) -> ManagerBuilder {
        ManagerBuilder {
            host: Cluster::new(ClusterName::host(), client),
            provider: None,
            metrics: None,
            metrics_addr: None,
            #[cfg(feature = "leader-election")]
            leader_election: None,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        match self.inner.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The cluster of that name: the host cluster for the empty name, otherwise an engaged
    /// cluster or the provider's; `Error::ClusterNotFound` if there is none.
    ///
    /// ```no_run
    /// # async fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_core::Error> {
    /// let host = mgr.cluster("").await?;
    /// let east = mgr.cluster("east").await?;
    /// # Ok(()) }
    /// ```
    pub async fn cluster(&self, name: impl Into<ClusterName>) -> Result<Cluster, mcr_core::Error> {
        let name = name.into();
        if name.is_host() {
            return Ok(self.inner.host.clone());
        }
        let engaged = self.state().engaged.get(&name).map(|(c, _)| c.clone());
        if let Some(cluster) = engaged {
            return Ok(cluster);
        }
        match &self.inner.provider {
            Some(provider) => provider.get(&name).await,
            None => Err(mcr_core::Error::ClusterNotFound(name)),
        }
    }

    /// The host (local) cluster.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let client = mgr.local().client();
    /// # }
    /// ```
    pub fn local(&self) -> &Cluster {
        &self.inner.host
    }

    /// The provider, if any.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let has_fleet = mgr.provider().is_some();
    /// # }
    /// ```
    pub fn provider(&self) -> Option<&Arc<dyn Provider>> {
        self.inner.provider.as_ref()
    }

    /// The manager's metrics.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// println!("{}", mgr.metrics().encode());
    /// # }
    /// ```
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Where the metrics/health endpoint listens, once [`run`](Self::run) bound it.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// if let Some(addr) = mgr.http_addr() { println!("metrics on http://{addr}/metrics"); }
    /// # }
    /// ```
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.state().http_addr
    }

    /// True while this manager runs its leader-only work (always, once running, without
    /// leader election).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let leading = mgr.is_leader();
    /// # }
    /// ```
    pub fn is_leader(&self) -> bool {
        self.inner.leader.load(Ordering::SeqCst)
    }

    /// Names of engaged clusters (and `""` for the host) whose caches have not synced yet.
    /// Empty means ready (what `/readyz` reports).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let ready = mgr.unsynced_clusters().is_empty();
    /// # }
    /// ```
    pub fn unsynced_clusters(&self) -> Vec<ClusterName> {
        let mut out: Vec<ClusterName> = self
            .state()
            .engaged
            .iter()
            .filter(|(_, (c, t))| !t.is_cancelled() && !c.cache().is_synced())
            .map(|(n, _)| n.clone())
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
        let mut names: Vec<ClusterName> = self.state().engaged.keys().cloned().collect();
        names.sort();
        names
    }

    /// Registers a field index on every cluster of the provider (current and future) and on
    /// the host cluster.
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
        if let Some(provider) = &self.inner.provider {
            provider.index_field(index).await?;
        }
        self.inner.host.cache().index_field(index)?;
        let engaged: Vec<Cluster> = self
            .state()
            .engaged
            .values()
            .map(|(c, _)| c.clone())
            .collect();
        for cluster in engaged {
            // Clusters engaged by hand (not through the provider) get it too; idempotent.
            cluster.cache().index_field(index)?;
        }
        Ok(())
    }

    /// Adds a runnable. It gets every cluster engaged so far, and starts with [`run`](Self::run)
    /// (or at once if the manager is running).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager, r: std::sync::Arc<dyn mcr_manager::Runnable>) -> Result<(), mcr_manager::Error> {
    /// mgr.add(r)?;
    /// # Ok(()) }
    /// ```
    pub fn add(&self, runnable: Arc<dyn Runnable>) -> Result<(), Error> {
        let (engaged, running) = {
            let mut state = self.state();
            state.runnables.push(runnable.clone());
            let engaged: Vec<_> = state
                .engaged
                .iter()
                .map(|(n, (c, t))| (n.clone(), c.clone(), t.clone()))
                .collect();
            (engaged, state.running.clone())
        };
        for (name, cluster, token) in engaged {
            if let Err(err) = runnable.engage(token, name.clone(), cluster) {
                warn!(runnable = runnable.name(), cluster = %name, error = %err, "engage failed");
            }
        }
        if let Some(running) = running {
            let token = if runnable.needs_leader_election() {
                running.leading.clone()
            } else {
                Some(running.work.clone())
            };
            if let Some(token) = token {
                run::spawn_runnable(&running, runnable, token.child_token());
            }
        }
        Ok(())
    }

    pub(crate) fn add_controller(&self, controller: Arc<dyn Runnable>) -> Result<(), Error> {
        let name = controller.name().to_owned();
        if !self.state().controller_names.insert(name.clone()) {
            return Err(BuilderError::DuplicateName { controller: name }.into());
        }
        self.add(controller)
    }

    fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }
}

impl Aware for Manager {
    /// Engages `cluster` under `name` with every controller and runnable (also those added
    /// later). The same instance again is a no-op; a new instance replaces the old one. The
    /// cluster is forgotten when `token` fires.
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        if name.is_host() {
            return Err(mcr_core::Error::Engage {
                cluster: name,
                reason: "the empty name is reserved for the host cluster".to_owned(),
            });
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return Err(mcr_core::Error::Engage {
                cluster: name,
                reason: "engage must be called inside a tokio runtime".to_owned(),
            });
        };
        let runnables = {
            let mut state = self.state();
            if let Some((current, t)) = state.engaged.get(&name)
                && current.same_instance(&cluster)
                && !t.is_cancelled()
            {
                return Ok(());
            }
            state
                .engaged
                .insert(name.clone(), (cluster.clone(), token.clone()));
            state.runnables.clone()
        };
        debug!(cluster = %name, "cluster engaged");
        let weak = self.downgrade();
        let (gone_name, gone_id, gone_token) = (name.clone(), cluster.id(), token.clone());
        rt.spawn(async move {
            gone_token.cancelled().await;
            let Some(inner) = weak.upgrade() else { return };
            let mgr = Manager { inner };
            let mut state = mgr.state();
            if state
                .engaged
                .get(&gone_name)
                .is_some_and(|(c, _)| c.id() == gone_id)
            {
                state.engaged.remove(&gone_name);
                debug!(cluster = %gone_name, "cluster disengaged");
            }
        });
        for runnable in runnables {
            if let Err(err) = runnable.engage(token.clone(), name.clone(), cluster.clone()) {
                warn!(runnable = runnable.name(), cluster = %name, error = %err, "engage failed");
            }
        }
        Ok(())
    }
}
