//! B11: one fleet over 1 and then 3 replicas in sharded mode (`ManagerBuilder::sharding`).
//!
//! Fresh `mcr-envtest` server processes (one per 2,500 clusters) serve the fleet (one
//! ConfigMap per cluster) over HTTPS; the host cluster, where the replicas keep their Leases, is an emulated cluster in
//! the bench runner itself (HTTPS, kubeconfig `b11-host.kubeconfig` next to the fleet's
//! directory), so the runner reads its request counters: the coordination writes (Lease
//! create, update, patch, delete). Each replica is a child process (`mcr-bench run-one
//! b11 <identity>`) with the file provider over the fleet and one ConfigMap controller; it
//! prints `SEEN <cluster> <value> <unix nanos>` for every reconcile and `OWNED <n>` whenever
//! the number of clusters it has engaged changes. Killing a replica is SIGKILL.
//!
//! With 1 replica, then with 3: time from starting the replicas until every cluster's object
//! was reconciled, each replica's RSS once settled, Lease writes per second over a steady
//! window, and per-update latency (a write to every object, acknowledged in the runner, to
//! the first reconcile that saw it) with the replicas' CPU per update. With 3: a fourth
//! replica joins (clusters it takes over) and then the replica owning most clusters is killed
//! (time until every cluster it owned was reconciled by a live replica). Then a rolling
//! restart of the three left, one at a time as a Deployment does it: the clusters engaged
//! (`mcr_engagements_total` of every replica) against the clusters that changed owner.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, runtime::controller::Action};
use mcr_envtest::TestCluster;
use mcr_manager::{Context, Controller, Manager, Sharding};
use mcr_provider_file::{FileProvider, Options};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{
    child::Session,
    load,
    machine::{pid_cpu_seconds, pid_peak_rss_kib, pid_rss_kib},
    probe,
    remote::{self, Server},
    report::Scenario,
    sides::CONCURRENCY,
    stamp, stats,
};

/// The shard group of the replicas.
const GROUP: &str = "b11";

/// Member clusters of the fleet.
fn clusters(quick: bool) -> usize {
    if quick { 12 } else { 10_000 }
}

/// Lease timings: mcr's defaults (15 s / 10 s / 5 s) in the full run; short ones in the
/// quick smoke run, so that a kill is noticed within seconds.
fn sharding(identity: &str, quick: bool) -> Sharding {
    let s = Sharding::new(GROUP).identity(identity);
    if quick {
        s.lease_duration(Duration::from_secs(4))
            .renew_deadline(Duration::from_secs(3))
            .renew_period(Duration::from_secs(1))
    } else {
        s
    }
}

/// The renew period of [`sharding`].
fn renew_period(quick: bool) -> Duration {
    Duration::from_secs(if quick { 1 } else { 5 })
}

/// Clusters per `mcr-envtest` server process: each cluster holds a listener and the
/// replicas' and the loader's connections, within a file-descriptor limit of 20,000 (as B4).
const PER_SERVER: usize = 2500;

/// The kubeconfigs of the fleet: those of every `shard-<i>` directory of `dir`, one per
/// server.
fn fleet_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for i in 0.. {
        let shard = dir.join(format!("shard-{i}"));
        if !shard.is_dir() {
            break;
        }
        out.extend(remote::kubeconfigs(&shard)?);
    }
    Ok(out)
}

/// The host's kubeconfig, next to the fleet's directory (not in it: the file providers read
/// every kubeconfig there).
fn host_kubeconfig(fleet: &Path) -> PathBuf {
    fleet.with_file_name("b11-host.kubeconfig")
}

async fn reconcile(
    cm: Arc<ConfigMap>,
    ctx: Context<()>,
) -> Result<Action, std::convert::Infallible> {
    println!(
        "SEEN {} {} {} {}",
        ctx.cluster_name().as_str(),
        probe::value(&cm),
        stamp::now_nanos(),
        cm.metadata.name.as_deref().unwrap_or_default()
    );
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &std::convert::Infallible, _: Context<()>) -> Action {
    Action::await_change()
}

/// Child: one replica (`identity`) over the fleet in `dir`, until the runner kills it or
/// closes its stdin.
pub async fn child(identity: &str, quick: bool, dir: &Path) -> Result<Value> {
    let provider = FileProvider::new(Options {
        files: fleet_files(dir)?,
        ..Options::default()
    });
    let host = remote::client_for(&host_kubeconfig(dir)).await?;
    let mgr = Manager::builder(host)
        .provider(Arc::new(provider))
        .sharding(sharding(identity, quick))
        .build();
    Controller::new(&mgr)
        .named("b11")
        .for_::<ConfigMap>()
        .concurrency(CONCURRENCY.into())
        .register(reconcile, error_policy, Arc::new(()))?;
    let token = CancellationToken::new();
    let run = {
        let (mgr, token) = (mgr.clone(), token.clone());
        tokio::spawn(async move { mgr.run_until(token).await })
    };
    let mut stdin = tokio::spawn(crate::child::read_command());
    let mut owned = usize::MAX;
    let mut engagements = u64::MAX;
    loop {
        let n = mgr.engaged_clusters().len();
        if n != owned {
            owned = n;
            println!("OWNED {n}");
        }
        let e = mgr.metrics().engagements();
        if e != engagements {
            engagements = e;
            println!("ENGAGEMENTS {e}");
        }
        tokio::select! {
            _ = &mut stdin => break,
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    // A clean stop, as a Pod's: every member stopped, the Lease marked left and deleted.
    token.cancel();
    if tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .is_err()
    {
        bail!("replica {identity} did not stop within 60 s");
    }
    Ok(json!({ "identity": identity, "owned": owned }))
}

/// A running replica and what the runner learnt from its lines.
struct Replica {
    session: Session,
    owned: usize,
    /// Clusters it engaged so far (`mcr_engagements_total`; mcr's side only).
    engagements: u64,
    alive: bool,
}

/// What the runner knows of the fleet: per cluster, the last reconcile (replica, when), and
/// per object of each cluster every (value, unix nanos) first seen.
#[derive(Default)]
struct Fleet {
    last: HashMap<String, (usize, Instant)>,
    /// Per cluster, every change of the replica reconciling it (replica, when): what a stuck
    /// wait prints.
    history: HashMap<String, Vec<(usize, Instant)>>,
    seen: HashMap<String, HashMap<String, Vec<(u64, u128)>>>,
    /// Objects per cluster, and the clusters with every one of them reconciled.
    objects: usize,
    complete: usize,
}

impl Fleet {
    /// Reads a `SEEN <cluster> <value> <unix nanos> [<object>]` line (the Go peer names no
    /// object: its fleets have one, `cm-0`).
    fn absorb(&mut self, replica: usize, at: Instant, line: &str) {
        let mut words = line.split_whitespace();
        let (Some("SEEN"), Some(cluster)) = (words.next(), words.next()) else {
            return;
        };
        let key = member(cluster).to_owned();
        let (v, t, object) = (words.next(), words.next(), words.next().unwrap_or("cm-0"));
        if let (Some(v), Some(t)) = (
            v.and_then(|v| v.parse().ok()),
            t.and_then(|t| t.parse().ok()),
        ) {
            let objects = self.seen.entry(key.clone()).or_default();
            let known = objects.len();
            let list = objects.entry(object.to_owned()).or_default();
            if list.last().is_none_or(|(last, _)| *last < v) {
                list.push((v, t));
            }
            if objects.len() > known && objects.len() == self.objects.max(1) {
                self.complete += 1;
            }
        }
        let history = self.history.entry(key.clone()).or_default();
        if history.last().is_none_or(|(r, _)| *r != replica) {
            history.push((replica, at));
        }
        self.last.insert(key, (replica, at));
    }

    /// When `object` of `cluster` was first seen at `value` or later (unix nanos).
    fn first_seen(&self, cluster: &str, object: &str, value: u64) -> Option<u128> {
        let list = self.seen.get(cluster)?.get(object)?;
        list.iter().find(|(v, _)| *v >= value).map(|(_, t)| *t)
    }
}

/// The file stem (`s<i>-<n>`) of a file-provider cluster name `<path>+<context>`.
fn member(cluster: &str) -> &str {
    let path = cluster.rsplit_once('+').map_or(cluster, |(p, _)| p);
    let file = path.rsplit('/').next().unwrap_or(path);
    file.strip_suffix(".kubeconfig").unwrap_or(file)
}

/// How the replicas of a run are started.
#[derive(Clone, Debug)]
pub(crate) enum Side {
    /// `mcr-bench run-one b11 <identity>` (mcr's sharded mode, [`child`]).
    Mcr {
        /// The quick smoke run's short Lease timings.
        quick: bool,
    },
    /// The Go peer in `-sharded` mode (multicluster-runtime's sharded coordinator, B12).
    Go {
        /// The Go peer binary.
        bin: PathBuf,
    },
}

/// The replicas, their lines read into `fleet`.
struct Run {
    side: Side,
    identities: Vec<String>,
    dir: PathBuf,
    replicas: Vec<Replica>,
    fleet: Fleet,
    names: Vec<String>,
}

impl Run {
    fn start(&mut self) -> Result<()> {
        let i = self.replicas.len();
        let identity = self
            .identities
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("replica-{}", i + 1));
        let dir = self.dir.display().to_string();
        let session = match &self.side {
            Side::Mcr { quick } => {
                let mut args = vec!["b11".to_string(), identity, "--kubeconfig-dir".into(), dir];
                if *quick {
                    args.push("--quick".into());
                }
                Session::start(&args)?
            }
            Side::Go { bin } => Session::start_program(
                bin,
                &[
                    "-sharded".into(),
                    "-identity".into(),
                    identity,
                    "-kubeconfig-dir".into(),
                    dir,
                    "-host-kubeconfig".into(),
                    host_kubeconfig(&self.dir).display().to_string(),
                    "-concurrency".into(),
                    CONCURRENCY.to_string(),
                ],
            )?,
        };
        self.replicas.push(Replica {
            session,
            owned: 0,
            engagements: 0,
            alive: true,
        });
        Ok(())
    }

    /// Reads every replica's lines (waiting up to 50 ms for the first live one's, so that a
    /// dead first replica does not turn this into a busy loop).
    fn poll(&mut self) -> Result<()> {
        let first = self.replicas.iter().position(|r| r.alive);
        for (i, r) in self
            .replicas
            .iter_mut()
            .enumerate()
            .filter(|(_, r)| r.alive)
        {
            let wait = if Some(i) == first {
                Duration::from_millis(50)
            } else {
                Duration::ZERO
            };
            for (at, line) in r.session.lines(wait)? {
                if let Some(n) = line.strip_prefix("OWNED ") {
                    r.owned = n.parse().unwrap_or(0);
                } else if let Some(n) = line.strip_prefix("ENGAGEMENTS ") {
                    r.engagements = n.parse().unwrap_or(0);
                } else {
                    self.fleet.absorb(i, at, &line);
                }
            }
        }
        Ok(())
    }

    /// Polls until `cond` holds; fails after `deadline`.
    fn until(
        &mut self,
        what: &str,
        deadline: Duration,
        cond: impl Fn(&Run) -> bool,
    ) -> Result<Instant> {
        let end = Instant::now() + deadline;
        loop {
            self.poll()?;
            if cond(self) {
                return Ok(Instant::now());
            }
            if Instant::now() > end {
                bail!("{what} not within {deadline:?}");
            }
        }
    }

    /// [`until`](Self::until), printing every minute how many of what it waits for are still
    /// pending (from `pending`) and the first few of them: a stuck wait shows why.
    fn until_reporting(
        &mut self,
        what: &str,
        deadline: Duration,
        cond: impl Fn(&Run) -> bool,
        pending: impl Fn(&Run) -> Vec<String>,
    ) -> Result<Instant> {
        let end = Instant::now() + deadline;
        let mut report = Instant::now() + Duration::from_secs(60);
        loop {
            self.poll()?;
            if cond(self) {
                return Ok(Instant::now());
            }
            if Instant::now() > report {
                let left = pending(self);
                eprintln!("bench: waiting for {what}: {} pending, e.g.:", left.len());
                for line in left.iter().take(8) {
                    eprintln!("bench:   {line}");
                }
                report = Instant::now() + Duration::from_secs(60);
            }
            if Instant::now() > end {
                bail!("{what} not within {deadline:?}");
            }
        }
    }

    fn owned_total(&self) -> usize {
        self.replicas
            .iter()
            .filter(|r| r.alive)
            .map(|r| r.owned)
            .sum()
    }

    /// Waits until the live replicas own every cluster between them and no count changed for
    /// `quiet`; returns when it settled.
    fn settle(&mut self, quiet: Duration, deadline: Duration) -> Result<Instant> {
        let end = Instant::now() + deadline;
        let mut last = (Vec::new(), Instant::now());
        loop {
            self.poll()?;
            let counts: Vec<usize> = self
                .replicas
                .iter()
                .map(|r| if r.alive { r.owned } else { 0 })
                .collect();
            if counts != last.0 {
                last = (counts, Instant::now());
            } else if self.owned_total() == self.names.len() && last.1.elapsed() >= quiet {
                return Ok(last.1);
            }
            if Instant::now() > end {
                bail!(
                    "the replicas did not settle within {deadline:?} (owned {:?})",
                    last.0
                );
            }
        }
    }

    fn pids(&self) -> Vec<u32> {
        self.replicas
            .iter()
            .filter(|r| r.alive)
            .map(|r| r.session.pid())
            .collect()
    }
}

/// One acknowledged write: cluster, object, value, and when it was acknowledged (unix nanos).
type Ack = (String, String, u64, u128);

/// The cluster name of a kubeconfig file (its stem).
fn stem(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned()
}

/// A write of `value` to every cluster's first object, 16 clusters at a time.
async fn write_all(paths: &[PathBuf], value: u64) -> Result<Vec<Ack>> {
    stream::iter(paths.iter().cloned())
        .map(|path| async move {
            let client = remote::client_for(&path).await?;
            let api: Api<ConfigMap> = Api::namespaced(client, load::NS);
            let object = load::object_name(0);
            load::write(&api, &object, value).await?;
            Ok::<_, anyhow::Error>((stem(&path), object, value, stamp::now_nanos()))
        })
        .buffer_unordered(16)
        .try_collect()
        .await
}

/// A steady load: `rate` writes per second for `duration`, spread over the fleet (its
/// clusters in a scattered order, every object of a cluster in turn, 32 clusters at a time,
/// each cluster's client dropped once its objects are written). Values count up from
/// `first`.
async fn write_paced(
    paths: &[PathBuf],
    objects: usize,
    load: &Load,
    first: u64,
) -> Result<Vec<Ack>> {
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(load.rate)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ticker = tokio::sync::Mutex::new(ticker);
    let next = std::sync::atomic::AtomicU64::new(first);
    let end = Instant::now() + load.duration;
    let n = paths.len();
    // 7,919 is prime: a stride through the fleet that visits every cluster once.
    let stride = if n.is_multiple_of(7919) { 1 } else { 7919 };
    let order = (0..n).map(|i| &paths[(i * stride) % n]);
    let (ticker, next) = (&ticker, &next);
    let acks: Vec<Vec<Ack>> = stream::iter(order)
        .take_while(|_| futures::future::ready(Instant::now() < end))
        .map(|path| async move {
            let client = remote::client_for(path).await?;
            let api: Api<ConfigMap> = Api::namespaced(client, load::NS);
            let mut acks = Vec::new();
            for i in 0..objects {
                ticker.lock().await.tick().await;
                if Instant::now() >= end {
                    break;
                }
                let value = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let object = load::object_name(i);
                load::write(&api, &object, value).await?;
                acks.push((stem(path), object, value, stamp::now_nanos()));
            }
            Ok::<_, anyhow::Error>(acks)
        })
        .buffer_unordered(32)
        .try_collect()
        .await?;
    Ok(acks.into_iter().flatten().collect())
}

/// How a fleet is served: clusters per `mcr-envtest` process, whether they share its port,
/// and ConfigMaps per cluster.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub per_server: usize,
    pub shared_port: bool,
    pub objects: usize,
}

/// B11's and B12's: [`PER_SERVER`] clusters per server, a port each, one object.
pub(crate) const ONE_OBJECT: Layout = Layout {
    per_server: PER_SERVER,
    shared_port: false,
    objects: 1,
};

/// A fleet of `n` clusters served by `mcr-envtest` processes as `layout` says, its
/// kubeconfigs under `dir`; the servers stop when it is dropped.
pub(crate) struct FleetSetup {
    _servers: Vec<Server>,
    dir: PathBuf,
    paths: Vec<PathBuf>,
    names: Vec<String>,
    objects: usize,
}

impl FleetSetup {
    /// Starts the servers of `n` clusters under `work/<name>` and creates every object.
    pub(crate) fn start(
        rt: &tokio::runtime::Runtime,
        n: usize,
        envtest: &Path,
        work: &Path,
        name: &str,
        layout: Layout,
    ) -> Result<FleetSetup> {
        let dir = work.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        let mut servers = Vec::new();
        for (i, first) in (0..n).step_by(layout.per_server).enumerate() {
            let count = layout.per_server.min(n - first);
            let shard = dir.join(format!("shard-{i}"));
            let prefix = format!("s{i}");
            servers.push(match layout.shared_port {
                true => Server::start_shared_port(envtest, count, &shard, &prefix)?,
                false => Server::start_named(envtest, count, &shard, &prefix)?,
            });
        }
        let paths = fleet_files(&dir)?;
        rt.block_on(remote::populate_fleet(&paths, layout.objects))?;
        let names = paths
            .iter()
            .filter_map(|p| p.file_stem()?.to_str().map(str::to_owned))
            .collect();
        Ok(FleetSetup {
            _servers: servers,
            dir,
            paths,
            names,
            objects: layout.objects,
        })
    }

    /// Member clusters.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

/// What one run over a fleet does.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Replicas started at once.
    pub replicas: usize,
    /// The value the latency phase writes into every object (above any earlier run's).
    pub value: u64,
    /// A replica more joins once settled (clusters it takes = clusters moved).
    pub join: bool,
    /// The replica owning most (of the first `replicas`) is killed with SIGKILL.
    pub kill: bool,
    /// Then a rolling restart, one replica at a time as a Deployment does it (a new replica
    /// starts, and once settled the old one stops cleanly): the clusters engaged per restart
    /// against the clusters that changed owner (mcr's side only: its replicas count their
    /// engagements).
    pub rolling: bool,
    /// No owned count may change for this long before the replicas count as settled.
    pub quiet: Duration,
    /// The steady-state window over which the host's Lease writes are counted.
    pub window: Duration,
    /// The bound on every wait.
    pub deadline: Duration,
    /// The replicas' identities in start order (`replica-<n>` past the end).
    pub identities: Vec<String>,
    /// The latency phase's writes: a steady load over the fleet, or (`None`) one write to
    /// every cluster's first object.
    pub load: Option<Load>,
}

/// A steady write load.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Load {
    /// Writes per second over the whole fleet.
    pub rate: u32,
    /// How long.
    pub duration: Duration,
}

/// The host's Lease writes so far (create, update, patch, delete).
fn lease_writes(host: &TestCluster) -> u64 {
    ["create", "update", "patch", "delete"]
        .iter()
        .map(|v| host.request_count(v, "leases"))
        .sum()
}

/// One run of `side` over `fleet` with a fresh host cluster (in this process, HTTPS).
pub(crate) fn measure(
    rt: &tokio::runtime::Runtime,
    side: Side,
    plan: &Plan,
    fleet: &FleetSetup,
) -> Result<Value> {
    let n = fleet.len();
    let host = rt.block_on(TestCluster::start_https("b11-host"))?;
    host.write_kubeconfig(&host_kubeconfig(&fleet.dir))?;
    let mut run = Run {
        side,
        identities: plan.identities.clone(),
        dir: fleet.dir.clone(),
        replicas: Vec::new(),
        fleet: Fleet {
            objects: fleet.objects,
            ..Fleet::default()
        },
        names: fleet.names.clone(),
    };
    let deadline = plan.deadline;
    let started = Instant::now();
    for _ in 0..plan.replicas {
        run.start()?;
    }
    let all = run.until("every object reconciled", deadline, |r| {
        r.fleet.complete == r.names.len()
    })?;
    let mut out = json!({
        "clusters": n, "replicas": plan.replicas,
        "all_reconciled_s": all.duration_since(started).as_secs_f64(),
    });
    run.settle(plan.quiet, deadline)?;
    out["settled_s"] = started.elapsed().as_secs_f64().into();
    out["rss_kib"] = run
        .pids()
        .iter()
        .map(|&p| pid_rss_kib(p))
        .collect::<Vec<_>>()
        .into();
    out["owned"] = run
        .replicas
        .iter()
        .map(|r| r.owned)
        .collect::<Vec<_>>()
        .into();
    // Steady state: the host's Lease writes over the window.
    let before = lease_writes(&host);
    let t0 = Instant::now();
    while t0.elapsed() < plan.window {
        run.poll()?;
    }
    let per_s = (lease_writes(&host) - before) as f64 / t0.elapsed().as_secs_f64();
    out["lease_writes_per_s"] = per_s.into();
    // Per-update latency: a write acknowledged to the first reconcile that saw it.
    let cpu0: f64 = run.pids().iter().map(|&p| pid_cpu_seconds(p)).sum();
    let value = plan.value;
    let load_started = Instant::now();
    let acks = match &plan.load {
        None => rt.block_on(write_all(&fleet.paths, value))?,
        Some(load) => rt.block_on(write_paced(&fleet.paths, fleet.objects, load, value))?,
    };
    out["updates_per_s"] = (acks.len() as f64 / load_started.elapsed().as_secs_f64()).into();
    run.until("every write reconciled", deadline, |r| {
        acks.iter()
            .all(|(c, o, v, _)| r.fleet.first_seen(c, o, *v).is_some())
    })?;
    let cpu1: f64 = run.pids().iter().map(|&p| pid_cpu_seconds(p)).sum();
    let lat: Vec<Duration> = acks
        .iter()
        .filter_map(|(c, o, v, ack)| Some(stamp::since(*ack, run.fleet.first_seen(c, o, *v)?)))
        .collect();
    out["latency_ms_p50"] = stats::percentile(&lat, 50.0).map(stats::ms).into();
    out["latency_ms_p99"] = stats::percentile(&lat, 99.0).map(stats::ms).into();
    out["cpu_us_per_update"] = ((cpu1 - cpu0) * 1e6 / acks.len().max(1) as f64).into();
    out["peak_rss_kib"] = run
        .pids()
        .iter()
        .map(|&p| pid_peak_rss_kib(p))
        .collect::<Vec<_>>()
        .into();
    if plan.join {
        // One more replica joins: the clusters it takes over are the ones that moved, and
        // they are handed over once it has reconciled every one of them.
        let joined = Instant::now();
        run.start()?;
        run.settle(plan.quiet, deadline)?;
        let joiner = plan.replicas;
        out["moved_on_join"] = run.replicas[joiner].owned.into();
        let taken = run
            .fleet
            .last
            .values()
            .filter(|(r, at)| *r == joiner && *at > joined)
            .map(|(_, at)| at.duration_since(joined).as_secs_f64());
        out["join_handoff_s"] = taken.reduce(f64::max).into();
    }
    if plan.kill {
        // The replica owning most clusters is killed.
        let victim = (0..plan.replicas)
            .max_by_key(|&i| run.replicas[i].owned)
            .unwrap_or(0);
        let lost: Vec<String> = run
            .fleet
            .last
            .iter()
            .filter(|(_, (r, _))| *r == victim)
            .map(|(c, _)| c.clone())
            .collect();
        let writes = lease_writes(&host);
        let killed = Instant::now();
        run.replicas[victim].session.kill()?;
        run.replicas[victim].alive = false;
        let reowned = |r: &Run, c: &String| {
            r.fleet
                .last
                .get(c)
                .is_some_and(|(i, at)| *i != victim && *at > killed)
        };
        let back = run.until_reporting(
            "every cluster of the killed replica re-owned",
            deadline,
            |r| lost.iter().all(|c| reowned(r, c)),
            |r| {
                lost.iter()
                    .filter(|c| !reowned(r, c))
                    .map(|c| {
                        let history = r.fleet.history.get(c).map(|h| {
                            h.iter()
                                .map(|(i, at)| {
                                    format!("{i}@{:.1}s", at.duration_since(started).as_secs_f64())
                                })
                                .collect::<Vec<_>>()
                                .join(" ")
                        });
                        format!("{c}: {}", history.unwrap_or_default())
                    })
                    .collect()
            },
        )?;
        out["killed_owned"] = lost.len().into();
        out["reown_s"] = back.duration_since(killed).as_secs_f64().into();
        out["reown_lease_writes"] = (lease_writes(&host) - writes).into();
    }
    if plan.rolling {
        let (engaged, moved) = rolling_restart(&mut run, plan)?;
        out["rolling_engaged"] = engaged.into();
        out["rolling_moved"] = moved.into();
    }
    for r in run.replicas.iter_mut().filter(|r| r.alive) {
        let _ = r.session.kill();
    }
    Ok(out)
}

/// Replaces every live replica, one at a time, as a Deployment's rolling update does (one
/// surge replica, none unavailable): a new replica starts and takes its share, then the old
/// one stops cleanly and hands its clusters over. Returns the clusters engaged during the
/// restarts (by every replica) and the clusters that changed owner (the new replicas' shares
/// as they joined, and the old ones' as they left).
fn rolling_restart(run: &mut Run, plan: &Plan) -> Result<(u64, u64)> {
    let old: Vec<usize> = (0..run.replicas.len())
        .filter(|&i| run.replicas[i].alive)
        .collect();
    let (mut engaged, mut moved) = (0, 0);
    for i in old {
        let before: u64 = run.replicas.iter().map(|r| r.engagements).sum();
        run.start()?;
        run.settle(plan.quiet, plan.deadline)?;
        let new = run.replicas.len() - 1;
        moved += run.replicas[new].owned as u64;
        moved += run.replicas[i].owned as u64;
        run.replicas[i].session.stop()?;
        run.replicas[i].alive = false;
        run.settle(plan.quiet, plan.deadline)?;
        let after: u64 = run.replicas.iter().map(|r| r.engagements).sum();
        engaged += after - before;
    }
    Ok((engaged, moved))
}

/// One fleet over `n` replicas (and with 3, a join, a kill and a rolling restart).
fn one_run(quick: bool, replicas: usize, envtest: &Path, work: &Path) -> Result<Value> {
    let rt = tokio::runtime::Runtime::new()?;
    let fleet = FleetSetup::start(&rt, clusters(quick), envtest, work, "b11-fleet", ONE_OBJECT)?;
    let plan = Plan {
        replicas,
        value: 1,
        join: replicas == 3,
        kill: replicas == 3,
        rolling: replicas == 3,
        quiet: renew_period(quick) * 3,
        window: renew_period(quick) * if quick { 3 } else { 6 },
        deadline: Duration::from_secs(if quick { 120 } else { 1200 }),
        identities: Vec::new(),
        load: None,
    };
    let mut out = measure(&rt, Side::Mcr { quick }, &plan, &fleet)?;
    out["scenario"] = "b11".into();
    Ok(out)
}

/// Parent: 1 replica, then 3.
pub fn run(quick: bool, envtest: &Path, work: &Path) -> Scenario {
    let n = clusters(quick);
    let mut s = Scenario::new(
        "B11",
        format!(
            "sharded mode: {n} clusters (1 ConfigMap each, emulator in a separate mcr-envtest \
             process over HTTPS) over 1 then 3 replicas (child processes, file provider, one \
             ConfigMap controller, Lease timings {}); host = an emulated cluster in the runner \
             (its request counters)",
            if quick {
                "4 s / 3 s / 1 s"
            } else {
                "15 s / 10 s / 5 s (defaults)"
            }
        ),
        "<= 1 coordination write per replica per renew period; a fourth replica takes about \
         1/4 of the clusters; everything re-owned within lease duration + sync after a kill; \
         a rolling restart engages <= 1.1 clusters per cluster that changed owner",
    );
    let mut met = true;
    for replicas in [1, 3] {
        match one_run(quick, replicas, envtest, work) {
            Ok(v) => {
                let at = format!("{replicas} replica(s): ");
                let f = |k: &str| v[k].as_f64();
                s.metric(
                    &format!("{at}time until every object reconciled"),
                    f("all_reconciled_s"),
                    "s",
                );
                let rss: Vec<f64> = v["rss_kib"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .collect();
                s.metric(
                    &format!("{at}RSS per replica (max)"),
                    rss.iter().copied().reduce(f64::max).map(|k| k / 1024.0),
                    "MiB",
                );
                let w = f("lease_writes_per_s");
                s.metric(&format!("{at}Lease writes on the host"), w, "/s");
                let budget = replicas as f64 / renew_period(quick).as_secs_f64();
                met &= w.is_some_and(|w| w <= budget * 1.05);
                s.metric(
                    &format!("{at}per-update latency p50"),
                    f("latency_ms_p50"),
                    "ms",
                );
                s.metric(
                    &format!("{at}per-update latency p99"),
                    f("latency_ms_p99"),
                    "ms",
                );
                s.metric(
                    &format!("{at}CPU per update (all replicas)"),
                    f("cpu_us_per_update"),
                    "us",
                );
                if replicas == 3 {
                    let moved = f("moved_on_join");
                    s.metric(&format!("{at}clusters moved when a 4th joins"), moved, "");
                    met &= moved.is_some_and(|m| m <= n as f64 / 4.0 * 1.5);
                    s.metric(
                        &format!("{at}clusters the killed replica owned"),
                        f("killed_owned"),
                        "",
                    );
                    s.metric(
                        &format!("{at}time to re-own them after kill -9"),
                        f("reown_s"),
                        "s",
                    );
                    let (engaged, moved) = (f("rolling_engaged"), f("rolling_moved"));
                    s.metric(
                        &format!("{at}rolling restart: clusters that changed owner"),
                        moved,
                        "",
                    );
                    s.metric(
                        &format!("{at}rolling restart: clusters engaged"),
                        engaged,
                        "",
                    );
                    let ratio = engaged.zip(moved).map(|(e, m)| e / m.max(1.0));
                    s.metric(
                        &format!("{at}rolling restart: engaged per owner change"),
                        ratio,
                        "x",
                    );
                    met &= ratio.is_some_and(|r| r <= 1.1);
                }
                s.runs.push(v);
            }
            Err(err) => {
                s.error = Some(format!("{err:#}"));
                met = false;
                break;
            }
        }
    }
    s.goal_met = Some(met);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_provider_names_map_to_the_kubeconfig_stem() {
        assert_eq!(
            member("/tmp/b11-fleet/member-7.kubeconfig+member-7"),
            "member-7"
        );
        assert_eq!(member("member-7"), "member-7");
        let mut f = Fleet::default();
        let t = Instant::now();
        f.absorb(2, t, "SEEN /d/member-3.kubeconfig+member-3 1 500");
        f.absorb(1, t, "SEEN /d/member-3.kubeconfig+member-3 0 600");
        f.absorb(1, t, "OWNED 4");
        assert_eq!(f.seen["member-3"]["cm-0"], vec![(1, 500)]);
        assert_eq!(f.first_seen("member-3", "cm-0", 1), Some(500));
        assert_eq!(f.complete, 1);
        f.absorb(1, t, "SEEN /d/member-3.kubeconfig+member-3 2 700 cm-4");
        assert_eq!(f.first_seen("member-3", "cm-4", 1), Some(700));
        assert_eq!(f.complete, 1, "a cluster counts once");
        assert_eq!(f.last["member-3"].0, 1);
        assert_eq!(f.last.len(), 1);
    }
}
