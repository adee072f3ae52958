//! The sharded suite (`--replicas N`): N replicas of the manager in sharded mode, each a
//! child process (this binary with `--serve-manager … --replica-id`), over the chaos fleet,
//! while faults hit the replicas one at a time: kill -9, SIGSTOP then SIGCONT after more
//! than the lease duration, a partition from the host (each replica reaches the host
//! through a TCP proxy of its own, which the suite cuts), a replica added, a replica
//! removed (a clean stop), a weight changed (the replica restarted with another weight,
//! as a rolling update would), a replica's Lease deleted or relabelled by hand, a replica
//! killed and restarted at once with the same identity, and a replica added whose Role
//! cannot list its peers (it must write no Lease). The faults come in rounds of every kind
//! in a shuffled order, so every run injects every kind (SIGSTOP included); the first round
//! is finished even when the run's minutes are up.
//!
//! Every reconcile's start and end is recorded by the replica on the machine's shared
//! monotonic clock (see [`crate::spans`]). The run fails on:
//! - an **overlap**: two replica processes reconciling one cluster at overlapping times. The
//!   time a replica spent stopped (between the suite's SIGSTOP and SIGCONT) is taken out of
//!   its spans: a stopped process runs nothing; what it does after SIGCONT counts;
//! - an **orphan**: a cluster without any reconcile, during the faults, for longer than
//!   lease duration + the members' sync timeout + [`ORPHAN_SLACK`] (the loader writes every
//!   object about once a second, so an owned cluster is reconciled at least that often);
//! - a **write not reconciled**: after the faults and the loader stop, every object's last
//!   value is in both annotations within [`SETTLE_BOUND`];
//! - a **panic** in any process (replicas record theirs in their span file);
//! - a replica that does not stop cleanly when removed or at the end.
//!
//! Reported: handoffs (a cluster's next reconcile is by another replica process than its
//! previous one) with their count and p50/p99 *handoff time* (the old owner's last reconcile
//! end to the new owner's first reconcile start), and the *orphan time* (per cluster, its
//! longest stretch without a reconcile during the faults), p50/p99/max.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use mcr_envtest::TestCluster;
use tokio::time::Instant;

use crate::check::{Waited, describe, wait_all};
use crate::child;
use crate::report::quantile;
use crate::rng::Rng;
use crate::spans::{self, now_ns};
use crate::world::World;

/// Lease duration of the replicas: short, for a two-minute run.
pub const LEASE: Duration = Duration::from_secs(4);
/// Renew deadline.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(3);
/// Renew period.
pub const RENEW_PERIOD: Duration = Duration::from_secs(1);
/// Added to the orphan bound: the loader's spacing of writes to one object and the time a
/// reconcile takes, on a loaded machine.
pub const ORPHAN_SLACK: Duration = Duration::from_secs(5);
/// After the faults and the loader stop, every object reconciled within this.
pub const SETTLE_BOUND: Duration = Duration::from_secs(120);
/// Every member reconciled at the start within this.
const ENGAGE_BOUND: Duration = Duration::from_secs(180);
/// Objects per member.
const OBJECTS: usize = 4;
/// At most this many replicas above `--replicas` at once.
const EXTRA: usize = 1;

/// The sharding settings of replica `id` with `weight`.
pub fn sharding(id: &str, weight: u32) -> mcr_manager::Sharding {
    mcr_manager::Sharding::new("chaos")
        .identity(id)
        .weight(weight)
        .lease_duration(LEASE)
        .renew_deadline(RENEW_DEADLINE)
        .renew_period(RENEW_PERIOD)
}

/// A TCP proxy in front of the host; cutting it partitions the replica behind it (open
/// connections dropped, new ones accepted and never answered).
struct Proxy {
    addr: std::net::SocketAddr,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: std::net::SocketAddr) -> Result<Proxy> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let task = tokio::spawn({
            let (cut, open) = (cut.clone(), open.clone());
            async move {
                let mut held = Vec::new();
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if cut.load(Ordering::SeqCst) {
                        held.push(inbound);
                        continue;
                    }
                    held.clear();
                    let task = tokio::spawn(async move {
                        if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    let mut open = open.lock().unwrap_or_else(|p| p.into_inner());
                    open.retain(|t| !t.is_finished());
                    open.push(task.abort_handle());
                }
            }
        });
        Ok(Proxy {
            addr,
            cut,
            open,
            task,
        })
    }

    fn cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        if cut {
            for task in self
                .open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .drain(..)
            {
                task.abort();
            }
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut(true);
        self.task.abort();
    }
}

/// One replica process (an incarnation: a restarted replica is a new one).
struct Proc {
    /// `<identity>.<incarnation>`: what the spans are attributed to.
    label: String,
    id: String,
    weight: u32,
    mgr: Option<child::Manager>,
    proxy: Proxy,
    spans: PathBuf,
    /// When it ended (killed or stopped), on the shared clock.
    ended: Option<u64>,
    /// When it was stopped (SIGSTOP to SIGCONT), on the shared clock.
    pauses: Vec<(u64, u64)>,
}

/// The faults of the sharded suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// kill -9 of a replica.
    Kill,
    /// SIGSTOP for longer than the lease duration, then SIGCONT.
    Pause,
    /// The replica cut off the host for longer than the lease duration.
    Partition,
    /// A replica added.
    Add,
    /// A replica stopped cleanly (it leaves the group).
    Remove,
    /// A replica restarted with another weight.
    Weight,
    /// A replica's Lease deleted or relabelled out of the group by hand (`kubectl delete
    /// lease`, a GitOps prune): nothing may move.
    LeaseDeleted,
    /// A replica killed and started again at once with the same identity (a container
    /// restart): its old Lease is still there.
    Restart,
    /// A replica added whose Role lacks list and watch on Leases: it must never claim, and
    /// the others keep the fleet; removed after a while.
    NoList,
}

impl Fault {
    /// Every kind: each run injects each of them, in rounds of all kinds in a shuffled order.
    const ALL: [Fault; 9] = [
        Fault::Kill,
        Fault::Pause,
        Fault::Partition,
        Fault::Add,
        Fault::Remove,
        Fault::Weight,
        Fault::LeaseDeleted,
        Fault::Restart,
        Fault::NoList,
    ];

    /// Whether the kind needs two live replicas (one may go, or stop, while another holds).
    fn needs_two(self) -> bool {
        !matches!(self, Fault::Add | Fault::NoList)
    }
}

struct Suite {
    world: World,
    dir: PathBuf,
    host: TestCluster,
    target: std::net::SocketAddr,
    live: Vec<Proc>,
    dead: Vec<Proc>,
    next_id: usize,
    incarnation: usize,
    failures: Vec<String>,
}

impl Suite {
    fn fail(&mut self, msg: String) {
        eprintln!("chaos: FAILED: {msg}");
        self.failures.push(msg);
    }

    /// Starts a replica process with identity `id` and `weight`.
    async fn spawn(&mut self, id: &str, weight: u32) -> Result<()> {
        self.spawn_with(id, weight, false).await
    }

    /// Starts a replica process; `no_lease_lists`: its host client refuses to list and watch
    /// Leases.
    async fn spawn_with(&mut self, id: &str, weight: u32, no_lease_lists: bool) -> Result<()> {
        self.incarnation += 1;
        let label = format!("{id}.{}", self.incarnation);
        let proxy = Proxy::start(self.target).await?;
        let url = self.host.url().context("host url")?;
        let yaml = self
            .host
            .kubeconfig_yaml()
            .context("host kubeconfig")?
            .replace(
                url.trim_end_matches('/'),
                &format!("https://{}", proxy.addr),
            );
        let kubeconfig = self.dir.join(format!("host-{label}.yaml"));
        std::fs::write(&kubeconfig, yaml)?;
        let spans = self.dir.join(format!("spans-{label}.txt"));
        let mut extra = vec![
            "--replica-id".to_owned(),
            id.to_owned(),
            "--weight".to_owned(),
            weight.to_string(),
            "--spans".to_owned(),
            spans.display().to_string(),
        ];
        if no_lease_lists {
            extra.push("--no-lease-lists".to_owned());
        }
        let log = self.dir.join(format!("log-{label}.txt"));
        let mgr = child::Manager::start_with(
            &self.world.members_dir(),
            &kubeconfig,
            false,
            &extra,
            Some(&log),
        )
        .await
        .with_context(|| format!("starting replica {label}"))?;
        self.live.push(Proc {
            label,
            id: id.to_owned(),
            weight,
            mgr: Some(mgr),
            proxy,
            spans,
            ended: None,
            pauses: Vec::new(),
        });
        Ok(())
    }

    async fn add(&mut self, weight: u32) -> Result<String> {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        self.spawn(&id, weight).await?;
        Ok(id)
    }

    /// Stops replica `i` cleanly (it leaves the group); a failure to stop is recorded.
    async fn remove(&mut self, i: usize) {
        let mut p = self.live.remove(i);
        if let Some(mgr) = p.mgr.take()
            && let Err(err) = mgr.stop().await
        {
            let msg = format!("replica {} did not stop cleanly: {err:#}", p.label);
            self.fail(msg);
        }
        p.ended = Some(now_ns());
        self.dead.push(p);
    }

    /// Kills replica `i` with SIGKILL.
    async fn kill(&mut self, i: usize) -> Result<()> {
        let mut p = self.live.remove(i);
        if let Some(mut mgr) = p.mgr.take() {
            mgr.kill().await?;
        }
        p.ended = Some(now_ns());
        self.dead.push(p);
        Ok(())
    }
}

/// Runs the sharded suite; the failures (empty: PASS).
pub async fn run(args: &crate::Args, replicas: usize, seed: u64) -> Result<Vec<String>> {
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let world = World::start(args.clusters, OBJECTS).await?;
    let host = TestCluster::start_https("host")
        .await
        .context("starting the host")?;
    let url = host.url().context("host url")?;
    let target: std::net::SocketAddr = url
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .parse()
        .context("host address")?;
    let dir = tempfile::Builder::new()
        .prefix("mcr-chaos-shard-")
        .tempdir()?;
    let mut s = Suite {
        world,
        dir: dir.path().to_path_buf(),
        host,
        target,
        live: Vec::new(),
        dead: Vec::new(),
        next_id: 0,
        incarnation: 0,
        failures: Vec::new(),
    };
    for _ in 0..replicas {
        s.add(1).await?;
    }
    let all: Vec<usize> = (0..args.clusters).collect();
    for &m in &all {
        s.world.join(m)?;
    }
    let clients: Vec<kube::Client> = s.world.members.iter().map(|m| m.tc.client()).collect();
    // Every object's current value reconciled by both controllers.
    let waited = || -> Vec<Waited> {
        all.iter()
            .map(|&m| Waited {
                member: m,
                client: clients[m].clone(),
                targets: None,
            })
            .collect()
    };
    let since = Instant::now();
    let (_, laggards) = wait_all(waited(), OBJECTS, since, ENGAGE_BOUND).await;
    if !laggards.is_empty() {
        bail!(
            "not every member was reconciled within {} s: {}",
            ENGAGE_BOUND.as_secs(),
            describe(&laggards)
        );
    }
    println!(
        "{} members over {replicas} replicas, reconciled in {:.1} s (started {:.1} s ago)",
        args.clusters,
        since.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    let load_stop = tokio_util::sync::CancellationToken::new();
    let rate = args
        .rate
        .unwrap_or((args.clusters as u32 * 4).clamp(20, 400));
    let (load, load_task) = crate::load::start(clients.clone(), OBJECTS, rate, load_stop.clone());
    let total = Duration::from_secs_f64(args.minutes * 60.0);
    let faults_start = now_ns();
    let until = Instant::now() + total;
    let mut injected: std::collections::BTreeMap<Fault, u64> = Default::default();
    let hold = |rng: &mut Rng| LEASE + Duration::from_millis(1000 + rng.below(2000));
    let mut n = 0;
    // Rounds of every kind in a shuffled order, so that no run can pass without any one of
    // them (a SIGSTOP included); the first round is finished even past `until`.
    let mut round: Vec<Fault> = Vec::new();
    let mut rounds = 0;
    while Instant::now() < until || !round.is_empty() || rounds == 0 {
        if round.is_empty() {
            round = rng.shuffled(&Fault::ALL);
            rounds += 1;
        }
        let kind = round.remove(0);
        // Make the kind possible, or the replica count sane, with an added replica first.
        while (kind.needs_two() && s.live.len() < 2) || s.live.len() + 1 < replicas {
            let id = s.add(1).await?;
            n += 1;
            *injected.entry(Fault::Add).or_default() += 1;
            println!(
                "fault {n} at {:.0} s (clock {:.3} s): added {id} (towards {replicas} replicas)",
                started.elapsed().as_secs_f64(),
                now_ns() as f64 / 1e9
            );
            tokio::time::sleep(Duration::from_millis(1000 + rng.below(2000))).await;
        }
        if kind == Fault::Add && s.live.len() >= replicas + EXTRA {
            let label = s.live[0].label.clone();
            s.remove(0).await;
            println!("removed {label} (clean stop) to make room for an added replica");
        }
        let live = s.live.len();
        let i = rng.below(live as u64) as usize;
        n += 1;
        let t = started.elapsed().as_secs_f64();
        let what = match kind {
            Fault::Kill => {
                let label = s.live[i].label.clone();
                s.kill(i).await?;
                format!("kill -9 {label}")
            }
            Fault::Pause => {
                let d = hold(&mut rng);
                let p = &mut s.live[i];
                let pid = p.mgr.as_ref().and_then(|m| m.pid());
                child::signal(pid, "STOP")?;
                // Read after the stop (the process may run until the signal lands) and before
                // the resume (it may run as soon as the signal is sent): the stopped time
                // taken out of its spans is never longer than the real one.
                let from = now_ns();
                tokio::time::sleep(d).await;
                let to = now_ns();
                child::signal(pid, "CONT")?;
                p.pauses.push((from, to));
                format!("SIGSTOP {} for {:.1} s, SIGCONT", p.label, d.as_secs_f64())
            }
            Fault::Partition => {
                let d = hold(&mut rng);
                s.live[i].proxy.cut(true);
                tokio::time::sleep(d).await;
                s.live[i].proxy.cut(false);
                format!(
                    "{} cut off the host for {:.1} s",
                    s.live[i].label,
                    d.as_secs_f64()
                )
            }
            Fault::Add => {
                let id = s.add(1).await?;
                format!("added {id}")
            }
            Fault::Remove => {
                let label = s.live[i].label.clone();
                s.remove(i).await;
                format!("removed {label} (clean stop)")
            }
            Fault::Weight => {
                let (id, old) = (s.live[i].id.clone(), s.live[i].weight);
                let weight = 1 + (old + rng.below(2) as u32) % 3;
                s.remove(i).await;
                s.spawn(&id, weight).await?;
                format!("{id} weight {old} -> {weight} (restarted)")
            }
            Fault::LeaseDeleted => {
                let p = &s.live[i];
                let name = sharding(&p.id, p.weight).lease_name();
                let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
                    kube::Api::default_namespaced(s.host.client());
                let how = if rng.chance(0.5) {
                    leases
                        .delete(&name, &Default::default())
                        .await
                        .map(|_| "deleted")
                } else {
                    let patch = serde_json::json!({"metadata": {"labels": {"mcr.sigs.k8s.io/shard-group": null}}});
                    let params = kube::api::PatchParams::default();
                    leases
                        .patch(&name, &params, &kube::api::Patch::Merge(&patch))
                        .await
                        .map(|_| "relabelled out of the group")
                };
                match how {
                    Ok(how) => format!("{} Lease {name} {how} by hand", p.label),
                    // Not there right now (e.g. the replica is between writes): still a
                    // fault of this kind tried; say so.
                    Err(err) => format!("{} Lease {name}: by-hand change refused ({err})", p.label),
                }
            }
            Fault::Restart => {
                let (id, weight, label) = (
                    s.live[i].id.clone(),
                    s.live[i].weight,
                    s.live[i].label.clone(),
                );
                s.kill(i).await?;
                s.spawn(&id, weight).await?;
                format!("kill -9 {label}, started again as {id} at once")
            }
            Fault::NoList => {
                s.next_id += 1;
                let id = format!("r{}", s.next_id);
                s.spawn_with(&id, 1, true).await?;
                let d = hold(&mut rng);
                tokio::time::sleep(d).await;
                let name = sharding(&id, 1).lease_name();
                let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
                    kube::Api::default_namespaced(s.host.client());
                if let Ok(Some(lease)) = leases.get_opt(&name).await {
                    let claim = lease.metadata.annotations.unwrap_or_default();
                    s.fail(format!(
                        "replica {id}, unable to list its peers, wrote a Lease: {claim:?}"
                    ));
                }
                let j = s.live.len() - 1;
                s.remove(j).await;
                format!(
                    "added {id} without list/watch on Leases for {:.1} s (no Lease written), removed",
                    d.as_secs_f64()
                )
            }
        };
        *injected.entry(kind).or_default() += 1;
        println!(
            "fault {n} at {t:.0} s (clock {:.3} s): {what}",
            now_ns() as f64 / 1e9
        );
        tokio::time::sleep(Duration::from_millis(1000 + rng.below(2000))).await;
    }
    for kind in Fault::ALL {
        if !injected.contains_key(&kind) {
            s.fail(format!("fault kind {kind:?} was never injected"));
        }
    }
    let faults_end = now_ns();
    load_stop.cancel();
    let _ = load_task.await;
    let writes = (
        load.ok.load(Ordering::Relaxed),
        load.failed.load(Ordering::Relaxed),
    );

    // Every write reconciled, by whichever replicas own the members now.
    let since = Instant::now();
    let (_, laggards) = wait_all(waited(), OBJECTS, since, SETTLE_BOUND).await;
    let settle = since.elapsed();
    if !laggards.is_empty() {
        s.fail(format!(
            "writes not reconciled within {} s of the faults stopping: {}",
            SETTLE_BOUND.as_secs(),
            describe(&laggards)
        ));
    }
    while !s.live.is_empty() {
        s.remove(0).await;
    }
    let procs: Vec<&Proc> = s.dead.iter().collect();
    let analysis = analyse(&procs, faults_start, faults_end)?;
    let bound = LEASE + crate::manager::SYNC_TIMEOUT + ORPHAN_SLACK;
    let mut failures = std::mem::take(&mut s.failures);
    if analysis.panics > 0 {
        failures.push(format!(
            "{} panics in replica processes (see their stderr)",
            analysis.panics
        ));
    }
    for o in analysis.overlaps.iter().take(10) {
        failures.push(format!("overlap: {o}"));
    }
    if analysis.overlaps.len() > 10 {
        failures.push(format!("{} more overlaps", analysis.overlaps.len() - 10));
    }
    for (cluster, gap) in &analysis.orphan {
        if *gap > bound {
            failures.push(format!(
                "{cluster}: no reconcile for {:.1} s during the faults (bound {} s: lease + sync + slack)",
                gap.as_secs_f64(),
                bound.as_secs()
            ));
        }
    }

    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64()).unwrap_or(f64::NAN);
    let orphan: Vec<Duration> = analysis.orphan.iter().map(|(_, d)| *d).collect();
    println!("\n== mcr chaos summary (sharded)");
    println!(
        "seed {seed} | {} clusters (emulator) | {replicas} replicas | {:.1} min of faults | lease {:?}, renew deadline {:?}, period {:?}",
        args.clusters, args.minutes, LEASE, RENEW_DEADLINE, RENEW_PERIOD
    );
    println!("faults injected: {injected:?}");
    println!(
        "replica processes: {} | reconciles recorded: {} | loader writes: {} acknowledged, {} failed",
        s.dead.len(),
        analysis.spans,
        writes.0,
        writes.1
    );
    println!(
        "handoffs: {} | handoff time (old owner's last reconcile -> new owner's first): p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        analysis.handoffs.len(),
        secs(quantile(&analysis.handoffs, 0.5)),
        secs(quantile(&analysis.handoffs, 0.99)),
        secs(analysis.handoffs.iter().max().copied())
    );
    println!(
        "orphan time (per cluster, longest stretch without a reconcile during the faults): p50 {:.2} s, p99 {:.2} s, max {:.2} s (bound {} s)",
        secs(quantile(&orphan, 0.5)),
        secs(quantile(&orphan, 0.99)),
        secs(orphan.iter().max().copied()),
        bound.as_secs()
    );
    println!(
        "reconciles in flight across a SIGSTOP: {}, of which {} dropped at their first poll after SIGCONT (none of their code ran); the others ran on after SIGCONT for at most {:.3} s",
        analysis.paused_spans,
        analysis.dropped_unrun,
        analysis.after_resume.as_secs_f64()
    );
    println!(
        "overlaps: {} (counting those drops as reconciles: {})",
        analysis.overlaps.len(),
        analysis.drop_overlaps
    );
    println!(
        "faults stopped -> every write reconciled: {:.2} s",
        settle.as_secs_f64()
    );
    if failures.is_empty() {
        println!("PASS");
    } else {
        println!("FAIL: {} failures", failures.len());
        for f in &failures {
            println!("  - {f}");
        }
    }
    if failures.is_empty() && std::env::var_os("MCR_CHAOS_KEEP").is_none() {
        drop(dir);
    } else {
        // Kept for a look: every replica's span file and log (monotonic timestamps, the spans'
        // clock).
        println!("spans and replica logs kept in {}", dir.keep().display());
    }
    Ok(failures)
}

/// What the spans show.
struct Analysis {
    spans: usize,
    panics: u64,
    overlaps: Vec<String>,
    handoffs: Vec<Duration>,
    orphan: Vec<(String, Duration)>,
    paused_spans: usize,
    /// Of those, dropped at their first poll after the SIGCONT (none of their code ran).
    dropped_unrun: usize,
    /// Overlaps if those drops counted as reconciles.
    drop_overlaps: usize,
    after_resume: Duration,
}

/// A span with the stopped time taken out: the pieces a process really ran.
fn pieces(start: u64, end: u64, pauses: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = vec![(start, end)];
    for &(p0, p1) in pauses {
        out = out
            .into_iter()
            .flat_map(|(s, e)| {
                if p1 <= s || p0 >= e {
                    vec![(s, e)]
                } else {
                    let mut v = Vec::new();
                    if s < p0 {
                        v.push((s, p0));
                    }
                    if p1 < e {
                        v.push((p1, e));
                    }
                    v
                }
            })
            .collect();
    }
    out
}

/// The pieces of a span in which its reconcile ran: [`pieces`], less a piece after a SIGCONT
/// in which it was never polled (`last_poll`: when its last poll ended). That piece is its
/// drop, not a reconcile: none of its code ran (see `spans`).
fn ran(start: u64, end: u64, last_poll: Option<u64>, pauses: &[(u64, u64)]) -> Vec<(u64, u64)> {
    pieces(start, end, pauses)
        .into_iter()
        .filter(|&(s, _)| {
            !(pauses.iter().any(|&(_, p1)| p1 == s) && last_poll.is_some_and(|polled| polled <= s))
        })
        .collect()
}

fn analyse(procs: &[&Proc], faults_start: u64, faults_end: u64) -> Result<Analysis> {
    let mut by_cluster: std::collections::BTreeMap<String, Vec<(u64, u64, usize)>> =
        Default::default();
    // The same, with a drop after a SIGCONT counted as a reconcile (the check before spans
    // carried their last poll), to show how often that alone would flag an overlap.
    let mut with_drops = by_cluster.clone();
    let mut total = 0;
    let mut panics = 0;
    let mut paused_spans = 0;
    let mut dropped_unrun = 0;
    let mut after_resume = 0u64;
    for (k, p) in procs.iter().enumerate() {
        let (spans, n) = read_spans(&p.spans)?;
        panics += n;
        total += spans.len();
        for span in spans {
            let end = span.end.or(p.ended).unwrap_or(faults_end.max(span.start));
            for &(p0, p1) in &p.pauses {
                if span.start < p0 && end > p0 {
                    paused_spans += 1;
                    if span.last_poll.is_some_and(|polled| polled <= p1) {
                        dropped_unrun += 1;
                    } else {
                        after_resume = after_resume.max(end.saturating_sub(p1));
                    }
                }
            }
            for (s, e) in pieces(span.start, end, &p.pauses) {
                with_drops
                    .entry(span.cluster.clone())
                    .or_default()
                    .push((s, e, k));
            }
            for (s, e) in ran(span.start, end, span.last_poll, &p.pauses) {
                by_cluster
                    .entry(span.cluster.clone())
                    .or_default()
                    .push((s, e, k));
            }
        }
    }
    let ns = |d: u64| Duration::from_nanos(d);
    let drop_overlaps = with_drops
        .into_values()
        .map(|mut list| {
            list.sort();
            let mut open: Option<(u64, usize)> = None;
            let mut n = 0;
            for (s, e, k) in list {
                if open.is_some_and(|(end, who)| who != k && end > s) {
                    n += 1;
                }
                if open.is_none_or(|(end, _)| e > end) {
                    open = Some((e, k));
                }
            }
            n
        })
        .sum();
    let mut overlaps = Vec::new();
    let mut handoffs = Vec::new();
    let mut orphan = Vec::new();
    for (cluster, mut list) in by_cluster {
        list.sort();
        let short = cluster.rsplit('+').next().unwrap_or(&cluster).to_owned();
        // The latest end so far and whose.
        let mut open: Option<(u64, usize)> = None;
        let mut longest = 0u64;
        for (s, e, k) in list {
            if let Some((end, who)) = open {
                if who != k && end > s {
                    overlaps.push(format!(
                        "{short}: {} reconciling until {:.3} s after {} started",
                        procs[who].label,
                        (end - s) as f64 / 1e9,
                        procs[k].label
                    ));
                }
                if who != k && end <= s {
                    handoffs.push(ns(s - end));
                }
                if s > end && end >= faults_start && s <= faults_end {
                    longest = longest.max(s - end);
                } else if s > end && end < faults_start && s > faults_start {
                    longest = longest.max(s.min(faults_end) - faults_start);
                }
            }
            if open.is_none_or(|(end, _)| e > end) {
                open = Some((e, k));
            }
        }
        if let Some((end, _)) = open
            && end < faults_end
        {
            longest = longest.max(faults_end - end.max(faults_start));
        }
        orphan.push((short, ns(longest)));
    }
    Ok(Analysis {
        spans: total,
        panics,
        overlaps,
        handoffs,
        orphan,
        paused_spans,
        dropped_unrun,
        drop_overlaps,
        after_resume: ns(after_resume),
    })
}

fn read_spans(path: &Path) -> Result<(Vec<spans::Span>, u64)> {
    match spans::read(path) {
        Ok(r) => Ok(r),
        // A replica killed before it recorded anything.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok((Vec::new(), 0)),
        Err(err) => Err(err).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::{pieces, ran};

    #[test]
    fn stopped_time_is_taken_out_of_a_span() {
        assert_eq!(pieces(10, 20, &[]), vec![(10, 20)]);
        assert_eq!(pieces(10, 20, &[(12, 15)]), vec![(10, 12), (15, 20)]);
        assert_eq!(pieces(10, 20, &[(5, 25)]), vec![]);
        assert_eq!(pieces(10, 20, &[(0, 5), (18, 30)]), vec![(10, 18)]);
    }

    #[test]
    fn a_reconcile_dropped_unpolled_after_sigcont_ran_only_before_the_stop() {
        // Polled last before the stop, dropped after the resume: it ran until the stop.
        assert_eq!(ran(10, 20, Some(11), &[(12, 15)]), vec![(10, 12)]);
        // Polled after the resume: it ran on.
        assert_eq!(ran(10, 20, Some(17), &[(12, 15)]), vec![(10, 12), (15, 20)]);
        // Killed (no end recorded): counted until its end, as before.
        assert_eq!(ran(10, 20, None, &[(12, 15)]), vec![(10, 12), (15, 20)]);
        // Two pauses, polled between them only.
        assert_eq!(
            ran(10, 30, Some(17), &[(12, 15), (20, 25)]),
            vec![(10, 12), (15, 20)]
        );
    }
}
