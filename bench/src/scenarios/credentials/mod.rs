//! C1: credentials that expire (issue 16). Shoots of an emulated Gardener garden, each an
//! HTTPS cluster with x509 client-certificate authentication, hand out short-lived
//! certificates (`shoots/adminkubeconfig`, capped at the scenario's lifetime). One mcr
//! controller watches ConfigMaps in every shoot while a loader writes, for the run time.
//!
//! Two modes, each in its own child process:
//! - `in-place`: `mcr-provider-gardener`, which renews credentials in place;
//! - `replace`: on every renewal the cluster is torn down and a new one engaged
//!   ([`rotation`], what Go's Gardener provider does).
//!
//! Figures: renewals (and whether each kept the cluster instance), relists (`list configmaps`
//! requests after the initial sync, from the emulator's counters), requests refused for an
//! expired certificate (the emulator's 401 counter, plus a prober that reads through every
//! cluster's client once a second), failed reconciles (the reconciler's cluster lookup failing
//! with `ClusterNotFound`), the replace side's gaps, and whether every write was reconciled.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::controller::Action;
use mcr_core::{Cluster, ClusterName, Provider, providers::clusters::ClustersProvider};
use mcr_envtest::{TestCluster, garden::Garden};
use mcr_manager::{Context, Controller, Manager};
use mcr_provider_gardener::{GardenerProvider, Namespaces, Options};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{load, probe::Probe, sides::CONCURRENCY};

mod report;
pub mod rotation;

pub use report::run;

/// The garden project every shoot lives in.
const PROJECT: &str = "garden-bench";

/// The scenario's sizes.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Shoots (member clusters).
    pub shoots: usize,
    /// ConfigMaps per shoot.
    pub objects: usize,
    /// Lifetime of every client certificate.
    pub lifetime: Duration,
    /// How long the loader writes.
    pub run: Duration,
    /// Loader rate, writes per second over the fleet.
    pub rate: u32,
}

/// Full: 100 shoots, 30-second credentials, 3 minutes. Quick: 5 shoots, 8 s, 20 s.
pub fn sizes(quick: bool) -> Sizes {
    if quick {
        Sizes {
            shoots: 5,
            objects: 2,
            lifetime: Duration::from_secs(8),
            run: Duration::from_secs(20),
            rate: 50,
        }
    } else {
        Sizes {
            shoots: 100,
            objects: 2,
            lifetime: Duration::from_secs(30),
            run: Duration::from_secs(180),
            rate: 200,
        }
    }
}

/// What the reconciler shares.
#[derive(Default)]
struct Data {
    probe: Probe,
    /// Reconciles whose cluster was not engaged (the replace side's gap).
    failed: AtomicU64,
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, mcr_core::Error> {
    if let Err(err) = ctx.cluster(ctx.cluster_name()) {
        ctx.data().failed.fetch_add(1, Ordering::Relaxed);
        return Err(err);
    }
    ctx.data().probe.observe(ctx.cluster_name().as_str(), &cm);
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &mcr_core::Error, _: Context<Data>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

fn shoot_name(i: usize) -> String {
    format!("shoot-{i}")
}

fn cluster_name(i: usize) -> ClusterName {
    ClusterName::from(format!("{PROJECT}/{}", shoot_name(i)))
}

/// The sum of `verb resource` requests over the shoots.
fn count(members: &[TestCluster], verb: &str, resource: &str) -> u64 {
    members
        .iter()
        .map(|m| m.request_count(verb, resource))
        .sum()
}

/// The cluster `name` once the provider has it. Replaced on rotation, a shoot is briefly
/// absent between its old instance and its new one (what the prober counts as missing), so
/// the final look waits for it, up to a minute.
async fn present(provider: &dyn Provider, name: &ClusterName) -> Result<Cluster> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match provider.get(name).await {
            Ok(cluster) => return Ok(cluster),
            Err(err) if Instant::now() >= deadline => {
                return Err(err).with_context(|| format!("{name}: still absent after a minute"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Reads one object through every engaged cluster's client once a second; counts 401s,
/// other failures and lookups that found no cluster.
#[derive(Default)]
struct Prober {
    reads: AtomicU64,
    unauthorized: AtomicU64,
    other: AtomicU64,
    missing: AtomicU64,
}

impl Prober {
    async fn run(&self, provider: Arc<dyn Provider>, shoots: usize, token: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        while !token.is_cancelled() {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tick.tick() => {}
            }
            stream::iter(0..shoots)
                .for_each_concurrent(16, |i| {
                    let provider = provider.clone();
                    async move {
                        let Ok(cluster) = provider.get(&cluster_name(i)).await else {
                            self.missing.fetch_add(1, Ordering::Relaxed);
                            return;
                        };
                        let api: Api<ConfigMap> = Api::namespaced(cluster.client(), load::NS);
                        self.reads.fetch_add(1, Ordering::Relaxed);
                        match api.get(&load::object_name(0)).await {
                            Ok(_) => {}
                            Err(kube::Error::Api(s)) if s.code == 401 => {
                                self.unauthorized.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(_) => {
                                self.other.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
                .await;
        }
    }
}

/// Writes rounds `1, 2, ...` into every object of every shoot (through the shoots' own
/// in-process clients) at `rate` writes per second until `run` has passed. Returns the number
/// of rounds (every object's last value).
async fn load(members: &[TestCluster], s: Sizes) -> Result<u64> {
    let apis: Vec<Api<ConfigMap>> = members
        .iter()
        .map(|m| Api::namespaced(m.client(), load::NS))
        .collect();
    let per_round = (members.len() * s.objects) as f64;
    let period = Duration::from_secs_f64(per_round / f64::from(s.rate.max(1)));
    let start = Instant::now();
    let mut tick = tokio::time::interval(period);
    let mut round = 0;
    while start.elapsed() < s.run {
        tick.tick().await;
        round += 1;
        let writes = apis
            .iter()
            .flat_map(|api| (0..s.objects).map(move |o| (api, load::object_name(o))));
        stream::iter(writes)
            .map(|(api, name)| async move { load::write(api, &name, round).await })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<()>>>()?;
    }
    Ok(round)
}

/// Child: one run of C1, `mode` `in-place` or `replace`.
pub async fn child(mode: &str, quick: bool) -> Result<Value> {
    let replace = match mode {
        "in-place" => false,
        "replace" => true,
        other => bail!("unknown C1 mode {other:?} (in-place, replace)"),
    };
    let s = sizes(quick);
    let garden = Garden::start(s.lifetime).await?;
    let members: Vec<TestCluster> = stream::iter(0..s.shoots)
        .map(|i| TestCluster::start_https(shoot_name(i)))
        .buffered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    for (i, m) in members.iter().enumerate() {
        load::create_objects(m.client(), s.objects).await?;
        garden.add_shoot(PROJECT, &shoot_name(i), m).await?;
    }
    let host = TestCluster::start("host").await?;
    let token = CancellationToken::new();
    let rotations = rotation::Shared::default();
    let provider: Arc<dyn Provider> = if replace {
        let p = Arc::new(ClustersProvider::new());
        for i in 0..s.shoots {
            let task = rotation::run_shoot(
                garden.cluster().client(),
                p.clone(),
                PROJECT.into(),
                shoot_name(i),
                s.lifetime,
                rotations.clone(),
                token.clone(),
            );
            tokio::spawn(async move {
                if let Err(err) = task.await {
                    tracing::error!("rotation stopped: {err:#}");
                }
            });
        }
        p
    } else {
        Arc::new(GardenerProvider::new(
            garden.cluster().client(),
            Options {
                namespaces: Namespaces::One(PROJECT.into()),
                expiration: s.lifetime,
                ..Options::default()
            },
        ))
    };
    let data = Arc::new(Data::default());
    let mgr = Manager::new(host.client(), Some(provider.clone()));
    Controller::new(&mgr)
        .named("c1")
        .for_::<ConfigMap>()
        .concurrency(CONCURRENCY.into())
        .register(reconcile, error_policy, data.clone())?;
    {
        let (mgr, token) = (mgr.clone(), token.clone());
        tokio::spawn(async move {
            if let Err(err) = mgr.run_until(token).await {
                tracing::error!(%err, "manager failed");
            }
        });
    }
    let objects = s.shoots * s.objects;
    data.probe.expect(0, objects);
    let started = Instant::now();
    data.probe
        .wait_done("the initial sync", Duration::from_secs(180))
        .await?;
    let sync_s = started.elapsed().as_secs_f64();
    let lists0 = count(&members, "list", "configmaps");
    let watches0 = count(&members, "watch", "configmaps");
    let refused0 = count(&members, "unauthorized", "requests");
    let minted0 = garden.kubeconfig_requests();
    let mut first: Vec<Cluster> = Vec::with_capacity(s.shoots);
    for i in 0..s.shoots {
        first.push(present(provider.as_ref(), &cluster_name(i)).await?);
    }

    let prober = Arc::new(Prober::default());
    let probing = {
        let (prober, provider, token) = (prober.clone(), provider.clone(), token.child_token());
        let stop = token.clone();
        let task = tokio::spawn(async move { prober.run(provider, s.shoots, token).await });
        (task, stop)
    };
    let rounds = load(&members, s).await?;
    let written = Instant::now();
    data.probe.expect(rounds, objects);
    let reconciled = data
        .probe
        .wait_done("every write reconciled", Duration::from_secs(120))
        .await;
    let drain_s = written.elapsed().as_secs_f64();
    probing.1.cancel();
    let _ = probing.0.await;

    let mut renewals = 0;
    let mut same = 0;
    let mut renewal_failures = 0;
    for (i, before) in first.iter().enumerate() {
        let now = present(provider.as_ref(), &cluster_name(i)).await?;
        same += u64::from(now.same_instance(before));
        if let Some(status) = now.credentials().map(|c| c.status()) {
            renewals += status.renewals;
            renewal_failures += u64::from(status.consecutive_failures);
        }
    }
    let (gaps, failed_rotations) = {
        let r = rotations.lock();
        (r.gaps.clone(), r.failed)
    };
    if replace {
        renewals = gaps.len() as u64;
    }
    let gap_ms = |p: f64| crate::stats::percentile(&gaps, p).map(crate::stats::ms);
    let result = json!({
        "mode": mode,
        "shoots": s.shoots,
        "objects_per_shoot": s.objects,
        "lifetime_s": s.lifetime.as_secs(),
        "run_s": s.run.as_secs(),
        "initial_sync_s": sync_s,
        "renewals": renewals,
        "kubeconfigs_minted_during_run": garden.kubeconfig_requests() - minted0,
        "clusters_kept": same,
        "renewal_failures_pending": renewal_failures,
        "failed_rotations": failed_rotations,
        "lists_initial": lists0,
        "relists": count(&members, "list", "configmaps") - lists0,
        "watches_initial": watches0,
        "watches_during_run": count(&members, "watch", "configmaps") - watches0,
        "refused_401_server": count(&members, "unauthorized", "requests") - refused0,
        "probe_reads": prober.reads.load(Ordering::Relaxed),
        "probe_401": prober.unauthorized.load(Ordering::Relaxed),
        "probe_other_errors": prober.other.load(Ordering::Relaxed),
        "probe_cluster_missing": prober.missing.load(Ordering::Relaxed),
        "failed_reconciles": data.failed.load(Ordering::Relaxed),
        "reconciles": data.probe.calls(),
        "writes": rounds * objects as u64,
        "all_reconciled": reconciled.is_ok(),
        "drain_s": drain_s,
        "gap_median_ms": gap_ms(50.0),
        "gap_p99_ms": gap_ms(99.0),
        "gap_max_ms": gaps.iter().max().copied().map(crate::stats::ms),
    });
    token.cancel();
    Ok(result)
}
