//! The system under test: one `mcr-manager` with two controllers over the file provider,
//! running on its own tokio runtime so its tasks can be counted apart from the emulator's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use mcr_envtest::TestCluster;
use mcr_manager::{Context, Controller, Manager, WatchOptions};
use mcr_provider_file::{FileProvider, Options};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::check::{SEEN_A, SEEN_B};
use crate::world::{LABEL, NAMESPACE};

/// A reconcile that takes longer is cancelled (and retried through the error policy).
pub const RECONCILE_TIMEOUT: Duration = Duration::from_secs(10);
/// The file provider's cap on the delay before retrying a member that failed to engage.
pub const ENGAGE_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How long a new member may take to sync before the provider retries it.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(15);
/// Controller B requeues every object this often (periodic work in hung members too).
const REQUEUE_B: Duration = Duration::from_secs(15);

/// The running manager.
pub struct Running {
    /// The manager (cheap to clone).
    pub mgr: Manager,
    /// Cancels the manager.
    pub stop: CancellationToken,
    /// The manager's `run_until`.
    pub run: JoinHandle<Result<(), mcr_manager::Error>>,
}

/// What a controller writes.
struct Data {
    annotation: &'static str,
    requeue: Option<Duration>,
}

/// Copies `data.v` into the controller's annotation when they differ.
async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, kube::Error> {
    let data = ctx.data();
    let done = match data.requeue {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    };
    let value = cm.data.as_ref().and_then(|d| d.get("v")).cloned();
    let Some(value) = value else { return Ok(done) };
    if cm.annotations().get(data.annotation) == Some(&value) {
        return Ok(done);
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.client(), NAMESPACE);
    let patch = serde_json::json!({"metadata": {"annotations": {data.annotation: value}}});
    let name = cm.meta().name.clone().unwrap_or_default();
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(done)
}

fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<Data>) -> Action {
    Action::requeue(Duration::from_millis(500))
}

/// Builds the manager (host: `host`, members: the kubeconfig files in `dir`), registers
/// controllers A and B, and starts it on `rt`.
pub async fn start(rt: &Runtime, host: TestCluster, dir: PathBuf) -> Result<Running> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    rt.spawn(async move {
        let built = build(host, dir);
        let _ = tx.send(built);
    });
    let (mgr, stop) = rx.await.context("the manager runtime stopped")??;
    let run = rt.spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });
    Ok(Running { mgr, stop, run })
}

fn build(host: TestCluster, dir: PathBuf) -> Result<(Manager, CancellationToken)> {
    let provider = FileProvider::new(Options {
        dirs: vec![dir],
        globs: vec!["*.kubeconfig".into()],
        debounce: Duration::from_millis(50),
        sync_timeout: SYNC_TIMEOUT,
        backoff_initial: Duration::from_millis(200),
        backoff_max: ENGAGE_BACKOFF_MAX,
        ..Options::default()
    });
    let addr = "127.0.0.1:0".parse().context("metrics address")?;
    let mgr = Manager::builder(host.client())
        .provider(Arc::new(provider))
        .metrics_address(addr)
        .build();
    for (name, annotation, requeue) in [
        ("chaos-a", SEEN_A, None),
        ("chaos-b", SEEN_B, Some(REQUEUE_B)),
    ] {
        Controller::new(&mgr)
            .named(name)
            .for_with::<ConfigMap>((), WatchOptions::new().labels(format!("{LABEL}=1")))
            .reconcile_timeout(RECONCILE_TIMEOUT)
            .register(
                reconcile,
                error_policy,
                Arc::new(Data {
                    annotation,
                    requeue,
                }),
            )?;
    }
    Ok((mgr, CancellationToken::new()))
}
