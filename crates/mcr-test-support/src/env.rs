//! A manager over an envtest fleet: a host cluster, member clusters handed to the manager
//! through a [`ClustersProvider`], and the token that stops the run.

use std::sync::Arc;

use mcr_core::Cluster;
use mcr_core::providers::clusters::ClustersProvider;
use mcr_envtest::wait::eventually;
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::Manager;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{WAIT, init_tracing};

/// A host cluster, `n` member clusters, a [`ClustersProvider`] holding them and a [`Manager`]
/// on the host. The clusters run on the backend `MCR_ENVTEST` selects (the emulator unless it
/// says `real`). Dropping it cancels [`token`](Env::token), which stops a run started with
/// [`run`](Env::run).
pub struct Env {
    /// The host cluster the manager runs on.
    pub host: TestCluster,
    /// The member clusters.
    pub fleet: Fleet,
    /// The provider the members were added to, shared with the manager.
    pub provider: Arc<ClustersProvider>,
    /// The manager, not yet running.
    pub mgr: Manager,
    /// Stops the run.
    pub token: CancellationToken,
}

impl Env {
    /// Starts a host and `n` members named `cluster-0` … `cluster-<n-1>`, and installs the
    /// test [`tracing`](init_tracing) subscriber.
    pub async fn start(n: usize) -> Env {
        Env::start_named("cluster", n).await
    }

    /// Like [`start`](Env::start), with the members named `<prefix>-0` … `<prefix>-<n-1>`.
    pub async fn start_named(prefix: &str, n: usize) -> Env {
        init_tracing();
        let host = TestCluster::start("host").await.unwrap();
        let fleet = Fleet::builder()
            .clusters(n)
            .name_prefix(prefix)
            .start()
            .await
            .unwrap();
        let provider = Arc::new(ClustersProvider::new());
        for c in fleet.clusters() {
            provider
                .add(Cluster::new(c.name(), c.client()))
                .await
                .unwrap();
        }
        let mgr = Manager::new(host.client(), Some(provider.clone()));
        Env {
            host,
            fleet,
            provider,
            mgr,
            token: CancellationToken::new(),
        }
    }

    /// Runs the manager in a task until [`token`](Env::token) fires.
    pub fn run(&self) -> JoinHandle<Result<(), mcr_manager::Error>> {
        let mgr = self.mgr.clone();
        let token = self.token.clone();
        tokio::spawn(async move { mgr.run_until(token).await })
    }

    /// Like [`run`](Env::run), and waits (up to [`WAIT`]) until the manager's fleet holds every
    /// member.
    pub async fn run_engaged(&self) -> JoinHandle<Result<(), mcr_manager::Error>> {
        let handle = self.run();
        let fleet = self.mgr.fleet().clone();
        let want = self.fleet.names().len();
        eventually("every member engaged", WAIT, || fleet.names().len() == want).await;
        handle
    }

    /// The member cluster `name` (panics when there is none).
    pub fn member(&self, name: &str) -> &TestCluster {
        self.fleet.get(name).unwrap()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.token.cancel();
    }
}
