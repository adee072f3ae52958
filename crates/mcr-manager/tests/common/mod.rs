//! Shared helpers of the integration tests: an envtest fleet fed to a manager through
//! `ClustersProvider`, condition polling, and a reconcile log.
#![allow(dead_code, missing_docs, unused_imports)]

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::Manager;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const DEADLINE: Duration = Duration::from_secs(30);

pub use mcr_envtest::wait::eventually;

/// Everything logged by a test binary (one subscriber for the process: install it once).
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Makes the process's subscriber write into a new `Logs`, at `filter`.
    pub fn install(filter: &str) -> Logs {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_thread_names(true)
            .with_writer(move || writer.clone())
            .init();
        logs
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A host cluster, `n` member clusters, a provider holding them and a manager.
pub struct Env {
    pub host: TestCluster,
    pub fleet: Fleet,
    pub provider: Arc<ClustersProvider>,
    pub mgr: Manager,
    pub token: CancellationToken,
}

impl Env {
    pub async fn start(n: usize) -> Env {
        init_tracing();
        let host = TestCluster::start("host").await.unwrap();
        let fleet = Fleet::start(n).await.unwrap();
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

    /// Runs the manager in the background until `self.token` fires.
    pub fn run(&self) -> JoinHandle<Result<(), mcr_manager::Error>> {
        let mgr = self.mgr.clone();
        let token = self.token.clone();
        tokio::spawn(async move { mgr.run_until(token).await })
    }

    pub fn member(&self, name: &str) -> &TestCluster {
        self.fleet.get(name).unwrap()
    }
}

pub fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("v".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    }
}

pub async fn create_cm(client: kube::Client, name: &str, value: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm(name, value))
        .await
        .unwrap()
}

pub async fn update_cm(client: kube::Client, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut current = api.get(name).await.unwrap();
    current.data = Some(BTreeMap::from([("v".to_owned(), value.to_owned())]));
    api.replace(name, &PostParams::default(), &current)
        .await
        .unwrap();
}

pub fn value(cm: &ConfigMap) -> String {
    cm.data
        .as_ref()
        .and_then(|d| d.get("v").cloned())
        .unwrap_or_default()
}

/// What reconciles saw: `cluster/name=value`, in order.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, entry: String) {
        self.0.lock().unwrap().push(entry);
    }
    pub fn contains(&self, entry: &str) -> bool {
        self.0.lock().unwrap().iter().any(|e| e == entry)
    }
    pub fn count(&self, prefix: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.starts_with(prefix))
            .count()
    }
    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// What every test's reconciler returns.
pub type Res = Result<kube::runtime::controller::Action, mcr_core::Error>;

/// Error policy of the tests: retry soon.
pub fn retry(
    _: Arc<ConfigMap>,
    _: &mcr_core::Error,
    _: mcr_manager::Context<Log>,
) -> kube::runtime::controller::Action {
    kube::runtime::controller::Action::requeue(Duration::from_millis(20))
}

/// A reconciler that logs `cluster/name=value` and waits for the next change.
pub async fn record(cm: Arc<ConfigMap>, ctx: mcr_manager::Context<Log>) -> Res {
    use kube::ResourceExt;
    ctx.data().push(format!(
        "{}/{}={}",
        ctx.cluster_name(),
        cm.name_any(),
        value(&cm)
    ));
    Ok(kube::runtime::controller::Action::await_change())
}

/// The value of one `mcr_queue_depth` series of the default controller name.
pub fn depth(mgr: &Manager, cluster: &str) -> i64 {
    let prefix = format!(r#"mcr_queue_depth{{controller="configmap",cluster="{cluster}"}} "#);
    mgr.metrics()
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}
