//! The two sides of a comparison: an mcr manager with one controller over a fleet, and plain
//! kube-runtime `Controller`s, one per cluster. Both reconcile with [`Probe::observe`].

use std::{convert::Infallible, sync::Arc};

use anyhow::{Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    runtime::{
        Controller as KrController,
        controller::{Action, Config as KrConfig},
        watcher,
    },
};
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use mcr_manager::{Context, Controller, Manager, Metrics};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::probe::Probe;

/// Reconcile concurrency given to every controller on both sides.
pub const CONCURRENCY: u16 = 16;

/// How the kube-runtime baseline is configured (written into the report).
pub const BASELINE: &str = "kube-runtime 5.0.0 Controller::new(Api::<ConfigMap>::all(client), \
    watcher::Config::default()).with_config(controller::Config::default().concurrency(16)), \
    one Controller per cluster and controller (hand-rolled fleet; B2m: 5 per cluster, sharing the \
    cluster's kube::Client), over the same transport as mcr (B2, B2m, B4, B5 remote: HTTPS to a \
    separate mcr-envtest process; B1, in-process variants: mcr-envtest in-process tower \
    service), no debounce, reconciler = \
    Probe::observe (records the counter) -> Action::await_change(); release build, \
    multi-thread tokio runtime with default worker threads";

/// The name of the `i`-th mcr controller started by [`start_mcr`] (its metrics' `controller`
/// label).
pub fn mcr_controller_name(i: usize) -> String {
    format!("bench-{i}")
}

/// Which side runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// One mcr `Manager` + `Controller` over a `ClustersProvider` holding every cluster.
    Mcr,
    /// One kube-runtime `Controller` per cluster.
    KubeRuntime,
    /// No controller at all (emulator and loader only, to subtract their memory).
    None,
}

impl Side {
    /// Parses `mcr`, `kube-runtime` or `none`.
    pub fn parse(s: &str) -> Result<Side> {
        Ok(match s {
            "mcr" => Side::Mcr,
            "kube-runtime" => Side::KubeRuntime,
            "none" => Side::None,
            other => bail!("unknown side {other:?} (mcr, kube-runtime, none)"),
        })
    }

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Mcr => "mcr",
            Side::KubeRuntime => "kube-runtime",
            Side::None => "none",
        }
    }
}

/// The mcr reconciler of every comparison: records what it saw in the probe.
pub(crate) async fn mcr_reconcile(
    cm: Arc<ConfigMap>,
    ctx: Context<Probe>,
) -> Result<Action, Infallible> {
    ctx.data().observe(ctx.cluster_name().as_str(), &cm);
    if let Some(pause) = ctx.data().pause() {
        tokio::time::sleep(pause).await;
    }
    Ok(Action::await_change())
}

/// Its error policy (it never fails).
pub(crate) fn mcr_error_policy(_: Arc<ConfigMap>, _: &Infallible, _: Context<Probe>) -> Action {
    Action::await_change()
}

/// A running side; dropping it does not stop it, call [`Running::stop`].
pub struct Running {
    token: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    /// The mcr provider, for the mcr side (to add clusters later).
    pub provider: Option<Arc<ClustersProvider>>,
    /// The mcr manager's metrics, for the mcr side (read them before [`Running::stop`]: a
    /// stopping controller forgets its clusters' series).
    pub metrics: Option<Metrics>,
}

impl Running {
    /// Stops the side (the manager shuts down gracefully, kube-runtime tasks are aborted).
    pub async fn stop(self) {
        self.token.cancel();
        for task in self.tasks {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Starts an mcr manager on `host` with `controllers` ConfigMap controllers over `members`.
pub async fn start_mcr(
    host: kube::Client,
    members: Vec<(String, kube::Client)>,
    probes: Vec<Probe>,
) -> Result<Running> {
    start_mcr_with(host, members, probes, true).await
}

/// [`start_mcr`], with the controllers' `live_changes_first` setting (B3b compares both).
pub async fn start_mcr_with(
    host: kube::Client,
    members: Vec<(String, kube::Client)>,
    probes: Vec<Probe>,
    live_first: bool,
) -> Result<Running> {
    let provider = Arc::new(ClustersProvider::new());
    for (name, client) in members {
        provider.add(Cluster::new(name, client)).await?;
    }
    let mgr = Manager::new(host, Some(provider.clone()));
    for (i, probe) in probes.into_iter().enumerate() {
        Controller::new(&mgr)
            .named(mcr_controller_name(i))
            .for_::<ConfigMap>()
            .concurrency(CONCURRENCY.into())
            .live_changes_first(live_first)
            .register(mcr_reconcile, mcr_error_policy, Arc::new(probe))?;
    }
    let token = CancellationToken::new();
    let run = {
        let (mgr, token) = (mgr.clone(), token.clone());
        tokio::spawn(async move {
            if let Err(err) = mgr.run_until(token).await {
                tracing::error!(%err, "manager failed");
            }
        })
    };
    Ok(Running {
        token,
        tasks: vec![run],
        provider: Some(provider),
        metrics: Some(mgr.metrics().clone()),
    })
}

struct KrCtx {
    cluster: String,
    probe: Probe,
}

async fn kr_reconcile(cm: Arc<ConfigMap>, ctx: Arc<KrCtx>) -> Result<Action, Infallible> {
    ctx.probe.observe(&ctx.cluster, &cm);
    Ok(Action::await_change())
}

fn kr_error_policy(_: Arc<ConfigMap>, _: &Infallible, _: Arc<KrCtx>) -> Action {
    Action::await_change()
}

/// Starts, in every member cluster, one kube-runtime `Controller` per probe (see
/// [`BASELINE`]): the hand-rolled fleet, where every controller has its own watch and store.
/// The controllers of a cluster share its `kube::Client`.
pub fn start_kube_runtime(members: Vec<(String, kube::Client)>, probes: Vec<Probe>) -> Running {
    let mut tasks = Vec::with_capacity(members.len() * probes.len());
    for (cluster, client) in members {
        for probe in &probes {
            let ctx = Arc::new(KrCtx {
                cluster: cluster.clone(),
                probe: probe.clone(),
            });
            let api: Api<ConfigMap> = Api::all(client.clone());
            tasks.push(tokio::spawn(
                KrController::new(api, watcher::Config::default())
                    .with_config(KrConfig::default().concurrency(CONCURRENCY))
                    .run(kr_reconcile, kr_error_policy, ctx)
                    .for_each(|_| async {}),
            ));
        }
    }
    Running {
        token: CancellationToken::new(),
        tasks,
        provider: None,
        metrics: None,
    }
}

/// Starts `side` over `members` with one controller per probe (the mcr side also gets the
/// host client).
pub async fn start(
    side: Side,
    host: kube::Client,
    members: Vec<(String, kube::Client)>,
    probes: Vec<Probe>,
) -> Result<Running> {
    match side {
        Side::Mcr => start_mcr(host, members, probes).await,
        Side::KubeRuntime => Ok(start_kube_runtime(members, probes)),
        Side::None => Ok(Running {
            token: CancellationToken::new(),
            tasks: Vec::new(),
            provider: None,
            metrics: None,
        }),
    }
}
