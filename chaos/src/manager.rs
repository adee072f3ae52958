//! The system under test: one `mcr-manager` with two controllers over the file provider, in
//! a child process of its own (`mcr-chaos --serve-manager`), so its RSS and tokio tasks are
//! measured apart from the emulator and the loader.
//!
//! The child speaks a line protocol on stdin/stdout: it prints `ready <http address>` once
//! ready, answers `stats` with one JSON line ([`Stats`]), and `stop` with `stopped ok` or
//! `stopped <error>` before it exits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use mcr_manager::{Context, Controller, Manager, Sharding, WatchOptions};
use mcr_provider_file::{FileProvider, MemberOptions, Options};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::check::{SEEN_A, SEEN_B};
use crate::spans::Spans;
use crate::world::{LABEL, NAMESPACE};

/// A reconcile that takes longer is cancelled (and retried through the error policy), unless
/// the controllers run with default settings (`--default-settings`).
pub const RECONCILE_TIMEOUT: Duration = Duration::from_secs(10);
/// The file provider's cap on the delay before retrying a member that failed to engage.
pub const ENGAGE_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How long a new member may take to sync before the provider retries it.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(15);
/// Controller B requeues every object this often (periodic work in hung members too).
const REQUEUE_B: Duration = Duration::from_secs(15);

/// What a controller writes.
struct Data {
    annotation: &'static str,
    requeue: Option<Duration>,
    /// Sharded suite: every reconcile's span is recorded here.
    spans: Option<Arc<Spans>>,
}

/// Sharded suite: how long a reconcile works (a sleep, honouring cancellation) before it
/// writes, so that reconciles are in flight when ownership moves.
const SHARDED_WORK: Duration = Duration::from_millis(20);

/// Copies `data.v` into the controller's annotation when they differ (the sharded suite:
/// after [`SHARDED_WORK`], recording the span).
async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, kube::Error> {
    match ctx.data().spans.clone() {
        Some(spans) => {
            let cluster = ctx.cluster_name().to_string();
            let work = async {
                tokio::time::sleep(SHARDED_WORK).await;
                copy(cm, ctx).await
            };
            spans.record(&cluster, work).await
        }
        None => copy(cm, ctx).await,
    }
}

async fn copy(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, kube::Error> {
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

/// A replica of the sharded suite: its settings and where its spans go.
pub struct Replica {
    /// Sharded mode (identity, weight, the suite's short lease settings).
    pub sharding: Sharding,
    /// The span file.
    pub spans: Arc<Spans>,
    /// Its host client refuses to list and watch Leases (403), as a Role without those
    /// verbs would: it must never claim anything.
    pub no_lease_lists: bool,
}

/// Builds the manager (host: `host`, members: the kubeconfig files in `dir`) with
/// controllers A and B (with [`RECONCILE_TIMEOUT`] unless `default_settings`); sharded when
/// `replica` is given.
fn build(
    host: kube::Client,
    dir: PathBuf,
    default_settings: bool,
    replica: Option<Replica>,
) -> Result<Manager> {
    let provider = FileProvider::new(Options {
        dirs: vec![dir],
        globs: vec!["*.kubeconfig".into()],
        debounce: Duration::from_millis(50),
        members: MemberOptions {
            sync_timeout: SYNC_TIMEOUT,
            backoff_initial: Duration::from_millis(200),
            backoff_max: ENGAGE_BACKOFF_MAX,
            ..Options::default().members
        },
        ..Options::default()
    });
    let addr = "127.0.0.1:0".parse().context("metrics address")?;
    let mut builder = Manager::builder(host)
        .provider(Arc::new(provider))
        .metrics_address(addr);
    let mut spans = None;
    if let Some(replica) = replica {
        builder = builder.sharding(replica.sharding);
        spans = Some(replica.spans);
    }
    let mgr = builder.build();
    for (name, annotation, requeue) in [
        ("chaos-a", SEEN_A, None),
        ("chaos-b", SEEN_B, Some(REQUEUE_B)),
    ] {
        let controller = Controller::new(&mgr)
            .named(name)
            .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=1")));
        let controller = if default_settings {
            controller
        } else {
            controller.reconcile_timeout(RECONCILE_TIMEOUT)
        };
        controller.register(
            reconcile,
            error_policy,
            Arc::new(Data {
                annotation,
                requeue,
                spans: spans.clone(),
            }),
        )?;
    }
    Ok(mgr)
}

/// What the child reports on `stats`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    /// Live tasks on the child's runtime.
    pub tasks: usize,
    /// `Manager::engaged_clusters`.
    pub engaged: Vec<String>,
    /// `Manager::cluster_statuses` (members only).
    pub statuses: Vec<String>,
    /// Per engaged member, its cache's informer count.
    pub informers: Vec<(String, usize)>,
    /// Panics counted by the child's hook.
    pub panics: u64,
}

fn stats(mgr: &Manager, panics: u64) -> Stats {
    let engaged = mgr.engaged_clusters();
    Stats {
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        engaged: engaged.iter().map(|n| n.to_string()).collect(),
        statuses: mgr
            .cluster_statuses()
            .into_iter()
            .filter(|s| !s.name.is_host())
            .map(|s| s.name.to_string())
            .collect(),
        informers: engaged
            .iter()
            .filter_map(|n| {
                let cluster = mgr.fleet().get(n).ok()?;
                Some((n.to_string(), cluster.cache().informer_count()))
            })
            .collect(),
        panics,
    }
}

/// The child: runs the manager until `stop` (or stdin closes), answering the parent.
pub async fn serve(
    dir: PathBuf,
    host_kubeconfig: PathBuf,
    default_settings: bool,
    replica: Option<Replica>,
    panics: fn() -> u64,
) -> Result<()> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&host_kubeconfig)
        .with_context(|| format!("reading {}", host_kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .context("the host kubeconfig")?;
    let mut host = kube::Client::try_from(config)?;
    if replica.as_ref().is_some_and(|r| r.no_lease_lists) {
        host = mcr_test_support::without_lease_lists(host);
    }
    let mgr = build(host, dir, default_settings, replica)?;
    let stop = CancellationToken::new();
    let mut run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });
    let mut out = tokio::io::stdout();
    let addr = loop {
        if let (true, Some(addr)) = (mgr.is_ready(), mgr.http_addr()) {
            break addr;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    out.write_all(format!("ready {addr}\n").as_bytes()).await?;
    out.flush().await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        match line.trim() {
            "stats" => {
                let json = serde_json::to_string(&stats(&mgr, panics()))?;
                out.write_all(format!("{json}\n").as_bytes()).await?;
            }
            "trim" => {
                let released = crate::trim::release_free_memory();
                out.write_all(format!("trimmed {released}\n").as_bytes())
                    .await?;
            }
            "stop" => break,
            other => anyhow::bail!("unknown command {other:?}"),
        }
        out.flush().await?;
    }
    stop.cancel();
    let answer = match tokio::time::timeout(Duration::from_secs(60), &mut run).await {
        Ok(Ok(Ok(()))) => "stopped ok".to_owned(),
        Ok(Ok(Err(err))) => format!("stopped with an error: {err}"),
        Ok(Err(err)) => format!("stopped: the manager task failed: {err}"),
        Err(_) => "stopped: the manager did not stop within 60 s".to_owned(),
    };
    out.write_all(format!("{answer}\n").as_bytes()).await?;
    out.flush().await?;
    Ok(())
}
