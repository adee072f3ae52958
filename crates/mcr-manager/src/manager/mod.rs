//! The multi-cluster manager: host cluster, provider, controllers and their lifecycle.
//!
//! Split by concept: `builder` (construction), `clusters` (the fleet: lookup, readiness,
//! indexes, engagement), `run` (start order, leader election, graceful shutdown); this module
//! holds the shared state and runnable registration.

mod builder;
mod clusters;
mod fleet;
mod run;
mod status;

pub use status::ClusterStatus;

use std::{
    collections::HashSet,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use mcr_core::{Cluster, Provider};
use parking_lot::{Mutex, MutexGuard};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::warn;

pub use self::{builder::ManagerBuilder, fleet::Fleet};
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
    fleet: Fleet,
    provider: Option<Arc<dyn Provider>>,
    metrics: Metrics,
    metrics_addr: Option<SocketAddr>,
    http_options: crate::HttpOptions,
    endpoints: crate::health::Endpoints,
    #[cfg(feature = "leader-election")]
    leader_election: Option<LeaderElection>,
    leader: AtomicBool,
    /// Sharded mode: this replica's side of the protocol (see [`crate::shard`]).
    shard: Option<Arc<crate::shard::Coordinator>>,
    /// [`ManagerBuilder::default_namespaces`].
    default_namespaces: Vec<String>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    runnables: Vec<Arc<dyn Runnable>>,
    controller_names: HashSet<String>,
    running: Option<Running>,
    http_addr: Option<SocketAddr>,
    provider_started: bool,
}

/// What late-added runnables need to start while the manager runs.
#[derive(Clone)]
struct Running {
    tracker: TaskTracker,
    providers: TaskTracker,
    work: CancellationToken,
    leading: Option<CancellationToken>,
    /// Fired when leadership was lost and leader-only runnables must be dropped now.
    cutoff: CancellationToken,
    errors: tokio::sync::mpsc::UnboundedSender<Error>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("provider", &self.inner.provider.is_some())
            .field("engaged", &self.inner.fleet.names().len())
            .finish_non_exhaustive()
    }
}

impl Manager {
    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock()
    }

    /// The namespaces watches are limited to unless they say otherwise (see
    /// [`ManagerBuilder::default_namespaces`]); empty: every namespace.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let cluster_wide = mgr.default_namespaces().is_empty();
    /// # }
    /// ```
    pub fn default_namespaces(&self) -> &[String] {
        &self.inner.default_namespaces
    }

    /// The host cluster: the one the manager runs against (what `Context::host` and
    /// `Fleet::host` return too).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let client = mgr.host().client();
    /// # }
    /// ```
    pub fn host(&self) -> &Cluster {
        &self.inner.host
    }

    /// The host cluster and the engaged clusters, readable synchronously; what every
    /// [`Context`](crate::Context) reaches through [`Context::host`](crate::Context::host) and
    /// [`Context::cluster`](crate::Context::cluster). Clone it into a watch mapper that needs
    /// the engaged names (it holds no controllers, so no reference cycle).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let fleet = mgr.fleet().clone();
    /// let members = fleet.names();
    /// # }
    /// ```
    pub fn fleet(&self) -> &Fleet {
        &self.inner.fleet
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

    /// The user's checks and handlers served on the HTTP endpoint.
    pub(crate) fn endpoints(&self) -> &crate::health::Endpoints {
        &self.inner.endpoints
    }

    /// The HTTP endpoint's settings.
    pub(crate) fn http_options(&self) -> &crate::HttpOptions {
        &self.inner.http_options
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

    /// Adds a runnable. It gets every cluster engaged so far, and starts with [`run`](Self::run)
    /// (or at once if the manager is running).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager, r: std::sync::Arc<dyn mcr_manager::Runnable>) -> Result<(), mcr_manager::Error> {
    /// mgr.add(r)?;
    /// # Ok(()) }
    /// ```
    pub fn add(&self, runnable: Arc<dyn Runnable>) -> Result<(), Error> {
        let running = {
            let mut state = self.state();
            state.runnables.push(runnable.clone());
            state.running.clone()
        };
        if runnable.aware().is_some() {
            // Engaged with every active member now, and every member from here on.
            self.inner
                .fleet
                .members()
                .subscribe(Arc::new(Subscribed(runnable.clone())));
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
}

impl Manager {
    /// The coordinator of sharded mode, if on.
    pub(crate) fn shard(&self) -> Option<&Arc<crate::shard::Coordinator>> {
        self.inner.shard.as_ref()
    }
}

/// A runnable as a subscriber of the manager's table of engaged clusters.
struct Subscribed(Arc<dyn Runnable>);

impl mcr_core::Aware for Subscribed {
    fn engage(
        &self,
        token: tokio_util::sync::CancellationToken,
        name: mcr_core::ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        // One runnable refusing a member does not keep it from the others.
        if let Some(aware) = self.0.aware()
            && let Err(err) = aware.engage(token, name.clone(), cluster)
        {
            warn!(runnable = self.0.name(), cluster = %name, error = %mcr_core::ErrorChain(&err), "engage failed");
        }
        Ok(())
    }
}
