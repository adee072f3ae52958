//! Sharded mode with several managers (replicas) in one process over one host and a fleet of
//! member clusters: every cluster is owned by exactly one replica; a killed replica's
//! clusters are re-owned, a new replica takes its share, a replica that stops hands its
//! clusters over; and at no moment do two replicas reconcile one cluster (every reconcile's
//! start and end is recorded and checked for overlaps).
//!
//! Each replica runs on its own tokio runtime, so killing it (shutting the runtime down)
//! drops everything it runs at once, without any graceful step: its Lease just stops being
//! renewed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::{Action, Context, Controller, Manager, Sharding};
use tokio_util::sync::CancellationToken;

use common::{Logs, create_cm, eventually};
// WAIT (60 s) is generous: a handoff takes about the lease duration (2 s here) plus a sync.
use mcr_test_support::WAIT;

/// The logs of this test binary (handoffs included), captured from the first test on.
fn logs() -> &'static Logs {
    static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| Logs::install("warn,mcr_manager=info"))
}

/// One reconcile: which replica, which cluster, when it started and ended.
#[derive(Clone, Debug)]
struct Span {
    replica: String,
    cluster: String,
    start: Instant,
    end: Option<Instant>,
    /// When the reconcile got past its work (its await point).
    progressed: Option<Instant>,
}

/// Every reconcile of every replica.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Span>>>);

impl Recorder {
    fn start(&self, replica: &str, cluster: &str) -> usize {
        let mut spans = self.0.lock().unwrap();
        spans.push(Span {
            replica: replica.into(),
            cluster: cluster.into(),
            start: Instant::now(),
            end: None,
            progressed: None,
        });
        spans.len() - 1
    }

    fn end(&self, i: usize) {
        self.0.lock().unwrap()[i].end = Some(Instant::now());
    }

    fn progress(&self, i: usize) {
        self.0.lock().unwrap()[i].progressed = Some(Instant::now());
    }

    fn spans(&self, replica: &str) -> Vec<Span> {
        let spans = self.0.lock().unwrap();
        spans
            .iter()
            .filter(|s| s.replica == replica)
            .cloned()
            .collect()
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Whether a reconcile of `cluster` started after `since`.
    fn reconciled_since(&self, cluster: &str, since: Instant) -> bool {
        (self.0.lock().unwrap().iter()).any(|s| s.cluster == cluster && s.start > since)
    }

    /// Two replicas reconciling one cluster at overlapping times (a span not ended yet
    /// lasts until now).
    fn overlaps(&self) -> Vec<String> {
        let now = Instant::now();
        let spans = self.0.lock().unwrap().clone();
        let mut by_cluster: BTreeMap<String, Vec<Span>> = BTreeMap::new();
        for s in spans {
            by_cluster.entry(s.cluster.clone()).or_default().push(s);
        }
        let mut found = Vec::new();
        for (cluster, mut spans) in by_cluster {
            spans.sort_by_key(|s| s.start);
            // The latest end so far, and whose.
            let mut open: Option<(Instant, String)> = None;
            for s in spans {
                if let Some((end, who)) = &open
                    && *end > s.start
                    && *who != s.replica
                {
                    found.push(format!(
                        "{cluster}: {who} until {:?} after {} started",
                        *end - s.start,
                        s.replica
                    ));
                }
                let end = s.end.unwrap_or(now);
                if open.as_ref().is_none_or(|(e, _)| end > *e) {
                    open = Some((end, s.replica.clone()));
                }
            }
        }
        found
    }
}

impl Recorder {
    /// Fails with the overlaps found and the warnings logged meanwhile (all tests of this
    /// binary log to one place).
    fn assert_no_overlaps(&self) {
        let overlaps = self.overlaps();
        if !overlaps.is_empty() {
            let text = logs().text();
            let warnings: Vec<&str> = text.lines().filter(|l| l.contains(" WARN ")).collect();
            panic!(
                "overlapping reconciles: {overlaps:#?}\nwarnings logged:\n{}",
                warnings.join("\n")
            );
        }
    }
}

struct Data {
    replica: String,
    recorder: Recorder,
}

/// Records its span; the end is recorded when the future ends or is dropped (cut short).
struct Guard(Recorder, usize);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.end(self.1);
    }
}

async fn reconcile(_cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, mcr_core::Error> {
    let data = ctx.data();
    let i = data
        .recorder
        .start(&data.replica, ctx.cluster_name().as_str());
    let _guard = Guard(data.recorder.clone(), i);
    // Some work, so reconciles are in flight when ownership moves (or the process pauses).
    tokio::time::sleep(Duration::from_millis(50)).await;
    data.recorder.progress(i);
    // Reconciled over and over: any overlap would show.
    Ok(Action::requeue(Duration::from_millis(20)))
}

fn error_policy(_: Arc<ConfigMap>, _: &mcr_core::Error, _: Context<Data>) -> Action {
    Action::requeue(Duration::from_millis(50))
}

/// A replica on its own runtime.
struct Replica {
    id: String,
    mgr: Manager,
    token: CancellationToken,
    runtime: Option<tokio::runtime::Runtime>,
    run: tokio::task::JoinHandle<Result<(), mcr_manager::Error>>,
}

fn sharding(id: &str) -> Sharding {
    Sharding::new("shard-test")
        .identity(id)
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_millis(1500))
        .renew_period(Duration::from_millis(500))
}

async fn start(id: &str, host: &TestCluster, fleet: &Fleet, recorder: &Recorder) -> Replica {
    start_with(id, host, HostVia::Direct, fleet, recorder, None).await
}

/// How a replica reaches the host.
enum HostVia {
    /// The host's own client.
    Direct,
    /// A kubeconfig (e.g. through a proxy).
    Kubeconfig(String),
    /// The host's client, with every list and watch of Leases refused with 403, as a Role
    /// without `list` and `watch` on Leases would have it (gets and writes go through).
    NoLeaseList,
    /// The host's client, with every watch of Leases deaf (open, delivering nothing), as a
    /// watch whose connection hangs; lists and writes go through.
    DeafLeaseWatch,
}

/// A runnable that needs a leader: counts the replicas running it right now.
struct LeaderOnly(Arc<std::sync::atomic::AtomicUsize>);

impl mcr_manager::Runnable for LeaderOnly {
    fn name(&self) -> &str {
        "leader-only"
    }
    fn start(
        self: Arc<Self>,
        token: CancellationToken,
    ) -> mcr_core::BoxFuture<'static, Result<(), mcr_manager::BoxError>> {
        Box::pin(async move {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            token.cancelled().await;
            self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
    }
}

/// A replica whose host client uses `host_kubeconfig` when given (e.g. through a proxy).
async fn start_with(
    id: &str,
    host: &TestCluster,
    host_via: HostVia,
    fleet: &Fleet,
    recorder: &Recorder,
    leader_only: Option<Arc<std::sync::atomic::AtomicUsize>>,
) -> Replica {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(id)
        .enable_all()
        .build()
        .unwrap();
    // Clients are built on the replica's runtime (their connection tasks die with it).
    let members: Vec<(String, TestCluster)> = fleet
        .clusters()
        .iter()
        .map(|c| (c.name().to_string(), c.clone()))
        .collect();
    let host = host.clone();
    let (id2, recorder) = (id.to_owned(), recorder.clone());
    let mgr = runtime
        .spawn(async move {
            let provider = Arc::new(ClustersProvider::new());
            for (name, c) in &members {
                provider
                    .add(Cluster::new(name.as_str(), c.client()))
                    .await
                    .unwrap();
            }
            let host_client = match host_via {
                HostVia::Direct => host.client(),
                HostVia::NoLeaseList => mcr_test_support::without_lease_lists(host.client()),
                HostVia::DeafLeaseWatch => mcr_test_support::with_deaf_lease_watches(host.client()),
                HostVia::Kubeconfig(yaml) => {
                    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
                    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                        .await
                        .unwrap();
                    kube::Client::try_from(config).unwrap()
                }
            };
            let mut builder = Manager::builder(host_client)
                .provider(provider)
                .sharding(sharding(&id2));
            if leader_only.is_some() {
                builder = builder.leader_election(
                    mcr_manager::LeaderElection::new("shard-test-leader", "default")
                        .identity(&id2)
                        .lease_duration(Duration::from_secs(2))
                        .renew_deadline(Duration::from_millis(1500))
                        .retry_period(Duration::from_millis(300)),
                );
            }
            let mgr = builder.build();
            if let Some(count) = leader_only {
                mgr.add(Arc::new(LeaderOnly(count))).unwrap();
            }
            let data = Data {
                replica: id2,
                recorder,
            };
            Controller::new(&mgr)
                .for_::<ConfigMap>()
                .register(reconcile, error_policy, Arc::new(data))
                .unwrap();
            mgr
        })
        .await
        .unwrap();
    let token = CancellationToken::new();
    let run = {
        let (mgr, token) = (mgr.clone(), token.clone());
        runtime.spawn(async move { mgr.run_until(token).await })
    };
    Replica {
        id: id.to_owned(),
        mgr,
        token,
        runtime: Some(runtime),
        run,
    }
}

impl Replica {
    /// Killed: everything it runs is dropped at once, nothing graceful.
    fn kill(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }

    /// Stopped gracefully (it releases its clusters and deletes its Lease).
    async fn stop(mut self) {
        self.token.cancel();
        let run = &mut self.run;
        tokio::time::timeout(WAIT, run)
            .await
            .expect("replica stops in time")
            .unwrap()
            .unwrap();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The names of `fleet`'s clusters, each given a ConfigMap `work` to reconcile.
async fn members(fleet: &Fleet) -> BTreeSet<String> {
    for c in fleet.clusters() {
        create_cm(c.client(), "work", "1").await;
    }
    fleet
        .clusters()
        .iter()
        .map(|c| c.name().to_string())
        .collect()
}

/// Waits until replicas `a` (r1) and `b` (r2) split the fleet, each seeing the other.
async fn split(a: &Replica, b: &Replica, all: &BTreeSet<String>) {
    eventually("two replicas share the fleet", WAIT, || {
        partitioned(&[a, b], all) && settled(a, all, &["r2"]) && settled(b, all, &["r1"])
    })
    .await;
}

/// Every cluster engaged by exactly one of `replicas`.
fn partitioned(replicas: &[&Replica], all: &BTreeSet<String>) -> bool {
    let mut seen = BTreeSet::new();
    for r in replicas {
        for name in r.mgr.engaged_clusters() {
            if !seen.insert(name.to_string()) {
                return false;
            }
        }
    }
    &seen == all
}

/// `r` sees itself and `others` as the peers, has engaged exactly what it owns, and takes
/// every other cluster for one of `others`'. (Without the first check, the moment a replica
/// that started alone still claims everything, before it has seen the others, passes too.)
fn settled(r: &Replica, all: &BTreeSet<String>, others: &[&str]) -> bool {
    let peers = format!("mcr_shard_peers {}\n", others.len() + 1);
    if !r.mgr.metrics().encode().contains(&peers) {
        return false;
    }
    let engaged: BTreeSet<String> = r
        .mgr
        .engaged_clusters()
        .iter()
        .map(|n| n.to_string())
        .collect();
    all.iter()
        .all(|n| match r.mgr.fleet().owner(&n.as_str().into()) {
            mcr_core::Ownership::Owned => engaged.contains(n),
            mcr_core::Ownership::Elsewhere { owner } => {
                !engaged.contains(n) && owner.is_some_and(|o| others.contains(&o.as_str()))
            }
        })
}

/// `mcr_shard_lease_writes_total` of `r`: its writes to the host.
fn writes(r: &Replica) -> u64 {
    r.mgr
        .metrics()
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix("mcr_shard_lease_writes_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn show(replicas: &[&Replica]) -> String {
    replicas
        .iter()
        .map(|r| {
            let engaged = r.mgr.engaged_clusters();
            if engaged.len() > 12 {
                format!("{}: {} clusters", r.id, engaged.len())
            } else {
                format!("{}: {:?}", r.id, engaged)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_fleet_take_over_and_never_overlap() {
    logs();
    let host = TestCluster::start("host").await.unwrap();
    // Real control planes are heavy: fewer of them.
    let real = std::env::var("MCR_ENVTEST").is_ok_and(|v| v == "real");
    // MCR_SHARD_CLUSTERS: a larger fleet, for a figure (the default keeps the test quick).
    let n = std::env::var("MCR_SHARD_CLUSTERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if real { 5 } else { 12 });
    let fleet = Fleet::start(n).await.unwrap();
    let all = members(&fleet).await;
    let recorder = Recorder::default();
    let a = start("r1", &host, &fleet, &recorder).await;
    let b = start("r2", &host, &fleet, &recorder).await;
    let c = start("r3", &host, &fleet, &recorder).await;

    // (Replicas that started first may share the fleet for a moment before the last one's
    // Lease appears: wait until each sees the other two.)
    eventually("three replicas share the fleet", WAIT, || {
        partitioned(&[&a, &b, &c], &all)
            && settled(&a, &all, &["r2", "r3"])
            && settled(&b, &all, &["r1", "r3"])
            && settled(&c, &all, &["r1", "r2"])
    })
    .await;
    println!("3 replicas: {}", show(&[&a, &b, &c]));
    if !real {
        assert!(
            [&a, &b, &c]
                .iter()
                .all(|r| !r.mgr.engaged_clusters().is_empty()),
            "each replica has a share: {}",
            show(&[&a, &b, &c])
        );
    }
    // Visible: `/clusters`' statuses name the owner, the metrics count the peers.
    for status in a.mgr.cluster_statuses() {
        if a.mgr.engaged_clusters().contains(&status.name) {
            assert_eq!(status.owner.as_deref(), Some("r1"), "{status:?}");
        }
    }
    eventually("mcr_shard_peers 3", WAIT, || {
        a.mgr.metrics().encode().contains("mcr_shard_peers 3\n")
    })
    .await;

    // Steady state: the host sees one write per replica per renew period, whatever the
    // number of clusters (a slow machine only makes fewer).
    let total = || writes(&a) + writes(&b) + writes(&c);
    let (w0, t0) = (total(), Instant::now());
    eventually("a few renewals", WAIT, || total() >= w0 + 12).await;
    let (w, secs) = (total() - w0, t0.elapsed().as_secs_f64());
    println!(
        "steady state: {w} lease writes in {secs:.2}s = {:.2}/s for 3 replicas, {} clusters",
        w as f64 / secs,
        all.len()
    );
    let periods = (secs / 0.5).ceil() as u64 + 2;
    assert!(w <= 3 * periods, "{w} writes in {secs:.2}s");

    // Another replica's cluster is refused by name, with its owner.
    for (r, id) in [(&b, "r2"), (&c, "r3")] {
        for theirs in r.mgr.engaged_clusters() {
            let owner = a.mgr.fleet().owner(&theirs);
            assert_eq!(owner.to_string(), format!("owned by {id}"));
            let err = a.mgr.fleet().get(&theirs).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("cluster \"{theirs}\" is owned by replica {id}")
            );
        }
    }

    // Kill r3: its clusters are re-owned by r1 and r2.
    let reconciles = recorder.count();
    let killed_at = Instant::now();
    let c_had = c.mgr.engaged_clusters();
    c.kill();
    split(&a, &b, &all).await; // r1 and r2 re-own r3's clusters
    println!(
        "r3 killed ({} clusters): re-owned after {:?}; {}",
        c_had.len(),
        killed_at.elapsed(),
        show(&[&a, &b])
    );
    // The replicas that took r3's clusters over say so, naming the old and the new owner.
    let text = logs().text();
    for name in &c_had {
        let logged = text.lines().any(|l| {
            l.contains("handoff: cluster taken over")
                && l.contains(&format!("cluster={name} "))
                && l.contains("from=r3 ")
                && (l.ends_with("to=r1") || l.ends_with("to=r2"))
        });
        assert!(logged, "no handoff of {name} from r3 logged:\n{text}");
    }
    assert!(recorder.count() > reconciles, "reconciles go on");

    // A new replica takes its share.
    let joined_at = Instant::now();
    let d = start("r4", &host, &fleet, &recorder).await;
    eventually("r4 takes its share", WAIT, || {
        partitioned(&[&a, &b, &d], &all)
            && settled(&a, &all, &["r2", "r4"])
            && settled(&b, &all, &["r1", "r4"])
            && settled(&d, &all, &["r1", "r2"])
    })
    .await;
    if !real {
        assert!(!d.mgr.engaged_clusters().is_empty(), "r4 has a share");
    }
    println!(
        "r4 joined: share taken after {:?}; {}",
        joined_at.elapsed(),
        show(&[&a, &b, &d])
    );

    // A replica that stops hands its clusters over at once (it deletes its Lease).
    let stopped_at = Instant::now();
    b.stop().await;
    eventually("r1 and r4 own everything", WAIT, || {
        partitioned(&[&a, &d], &all) && settled(&a, &all, &["r4"]) && settled(&d, &all, &["r1"])
    })
    .await;
    println!(
        "r2 stopped: handed over after {:?}; {}",
        stopped_at.elapsed(),
        show(&[&a, &d])
    );

    recorder.assert_no_overlaps();
    println!("{} reconciles, no overlap", recorder.count());
    a.stop().await;
    d.stop().await;
}

/// A TCP proxy in front of the host: cutting it partitions the replica behind it from the
/// host (open connections are dropped, new ones hang).
struct Proxy {
    addr: std::net::SocketAddr,
    cut: Arc<std::sync::atomic::AtomicBool>,
    open: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    async fn start(target: std::net::SocketAddr) -> Proxy {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (cut2, open2) = (cut.clone(), open.clone());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                if cut2.load(Ordering::SeqCst) {
                    held.push(inbound); // hangs
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                open2.lock().unwrap().push(task.abort_handle());
            }
        });
        Proxy { addr, cut, open }
    }

    fn cut(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::SeqCst);
        if cut {
            for task in self.open.lock().unwrap().drain(..) {
                task.abort();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_the_host_stops_before_another_takes_over() {
    // Each replica's runtime threads carry its name: the logs say which replica speaks.
    logs();
    let host = TestCluster::start_https("host").await.unwrap();
    let real = std::env::var("MCR_ENVTEST").is_ok_and(|v| v == "real");
    let fleet = Fleet::start(if real { 4 } else { 8 }).await.unwrap();
    let all = members(&fleet).await;
    // r1 reaches the host through a proxy that the test cuts.
    let url = host.url().unwrap();
    let target: std::net::SocketAddr = url
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let proxy = Proxy::start(target).await;
    let yaml = host.kubeconfig_yaml().unwrap().replace(
        url.trim_end_matches('/'),
        &format!("https://{}", proxy.addr),
    );
    let recorder = Recorder::default();
    let a = start_with(
        "r1",
        &host,
        HostVia::Kubeconfig(yaml),
        &fleet,
        &recorder,
        None,
    )
    .await;
    let b = start("r2", &host, &fleet, &recorder).await;
    split(&a, &b, &all).await;
    let had = a.mgr.engaged_clusters().len();
    println!("2 replicas: {}", show(&[&a, &b]));

    // Cut r1 off the host: it fences itself (stops everything), then r2 takes over.
    let cut_at = Instant::now();
    proxy.cut(true);
    eventually("r1 stops every cluster", WAIT, || {
        a.mgr.engaged_clusters().is_empty()
    })
    .await;
    let fenced = cut_at.elapsed();
    eventually("r2 owns everything", WAIT, || partitioned(&[&b], &all)).await;
    println!(
        "r1 cut off with {had} clusters: fenced after {fenced:?}, r2 took over after {:?}",
        cut_at.elapsed()
    );

    // Healed: r1 comes back and takes its share again.
    proxy.cut(false);
    split(&a, &b, &all).await; // r1 back with its share
    println!("healed: {}", show(&[&a, &b]));
    recorder.assert_no_overlaps();
    println!("{} reconciles, no overlap", recorder.count());
    a.stop().await;
    b.stop().await;
}

/// Sharded mode with leader election: the controllers run on every replica (each on the
/// clusters it owns, every cluster covered), a runnable that needs a leader on one replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_only_runnables_run_once_while_every_replica_reconciles() {
    logs();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::start(6).await.unwrap();
    let all = members(&fleet).await;
    let recorder = Recorder::default();
    let leading = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let a = start_with(
        "r1",
        &host,
        HostVia::Direct,
        &fleet,
        &recorder,
        Some(leading.clone()),
    )
    .await;
    let b = start_with(
        "r2",
        &host,
        HostVia::Direct,
        &fleet,
        &recorder,
        Some(leading.clone()),
    )
    .await;
    eventually(
        "the fleet split over both replicas, one leader",
        WAIT,
        || {
            partitioned(&[&a, &b], &all)
                && !a.mgr.engaged_clusters().is_empty()
                && !b.mgr.engaged_clusters().is_empty()
                && leading.load(std::sync::atomic::Ordering::SeqCst) == 1
        },
    )
    .await;
    assert_eq!(a.mgr.is_leader() as u8 + b.mgr.is_leader() as u8, 1);
    let since = Instant::now();
    for c in fleet.clusters() {
        create_cm(c.client(), "after-split", "1").await;
    }
    eventually("every cluster reconciled by its owner", WAIT, || {
        all.iter().all(|n| recorder.reconciled_since(n, since))
    })
    .await;
    assert_eq!(leading.load(std::sync::atomic::Ordering::SeqCst), 1);
    recorder.assert_no_overlaps();
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_replica_runs_no_reconcile_code_after_its_renew_deadline() {
    // A process paused (SIGSTOP) past its renew deadline: while it is stopped, another
    // replica takes its clusters over. When it resumes, the reconciles it had in flight must
    // not run on, not even for one poll: the new owner may be reconciling the same cluster.
    // The pause is both worker threads of r1's runtime blocked at once (nothing of r1 runs,
    // timers included, as under SIGSTOP).
    let Pair {
        host: _host,
        fleet: _fleet,
        all,
        recorder,
        a,
        b,
    } = Pair::start(8).await;
    let pause = Duration::from_secs(4); // > lease duration (2 s) > renew deadline (1.5 s)
    let mut straddled = 0;
    // Three pauses: whether a reconcile runs on after one is a race (which task the runtime
    // polls first on resume), lost by the old code in about one pause of three.
    for attempt in 1..=3 {
        split(&a, &b, &all).await;
        let window: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let rt = a.runtime.as_ref().unwrap();
        for _ in 0..2 {
            let (barrier, window) = (barrier.clone(), window.clone());
            rt.spawn(async move {
                barrier.wait();
                let from = Instant::now();
                std::thread::sleep(pause);
                window.lock().unwrap().push((from, Instant::now()));
            });
        }
        eventually("r1 paused and resumed", WAIT, || {
            window.lock().unwrap().len() == 2
        })
        .await;
        let w = window.lock().unwrap().clone();
        let paused = w.iter().map(|(f, _)| *f).max().unwrap();
        let resumed = w.iter().map(|(_, t)| *t).min().unwrap();
        let r1 = recorder.spans("r1");
        let across: Vec<&Span> = r1
            .iter()
            .filter(|s| s.start < paused && s.end.is_none_or(|e| e > resumed))
            .collect();
        let ran_on: Vec<&Span> = across
            .iter()
            .copied()
            .filter(|s| s.progressed.is_some_and(|p| p > resumed))
            .collect();
        assert!(
            ran_on.is_empty(),
            "reconciles of r1 ran on after a pause past its renew deadline: {ran_on:#?}"
        );
        straddled += across.len();
        println!(
            "pause {attempt}: {} reconciles in flight across it, none ran on",
            across.len()
        );
    }
    assert!(straddled > 0, "no reconcile was in flight across any pause");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn bad_settings_are_refused() {
    let host = TestCluster::start("host").await.unwrap();
    let bad = Sharding::new("g")
        .identity("r1")
        .renew_deadline(Duration::from_secs(30));
    let mgr = Manager::builder(host.client()).sharding(bad).build();
    let err = mgr.run_until(CancellationToken::new()).await.unwrap_err();
    assert!(err.to_string().contains("lease_duration"), "{err}");
}

/// A host, a fleet of members with work to reconcile, and replicas r1 and r2 running (not yet
/// known to have split the fleet).
struct Pair {
    host: TestCluster,
    fleet: Fleet,
    all: BTreeSet<String>,
    recorder: Recorder,
    a: Replica,
    b: Replica,
}

impl Pair {
    async fn start(members_n: usize) -> Pair {
        logs();
        let host = TestCluster::start("host").await.unwrap();
        let fleet = Fleet::start(members_n).await.unwrap();
        let all = members(&fleet).await;
        let recorder = Recorder::default();
        let a = start("r1", &host, &fleet, &recorder).await;
        let b = start("r2", &host, &fleet, &recorder).await;
        Pair {
            host,
            fleet,
            all,
            recorder,
            a,
            b,
        }
    }
}

impl Pair {
    /// The largest fleet the backend runs (each member is a kube-apiserver process on the
    /// real one), at most `n`.
    fn size(n: usize) -> usize {
        if mcr_envtest::backend().is_real() {
            n.min(mcr_envtest::real::MAX_FLEET)
        } else {
            n
        }
    }

    /// Starts r3 and waits until the three replicas share the fleet; asserts that r3 took a
    /// share and that no cluster that kept its replica was released and engaged again
    /// (compared with `before`). Then stops all three.
    async fn join_third(self, before: BTreeMap<String, (String, mcr_core::ClusterId)>, what: &str) {
        let Pair {
            host,
            fleet,
            all,
            recorder,
            a,
            b,
        } = self;
        let c = start("r3", &host, &fleet, &recorder).await;
        eventually("three replicas share the fleet", WAIT, || {
            partitioned(&[&a, &b, &c], &all)
                && settled(&a, &all, &["r2", "r3"])
                && settled(&b, &all, &["r1", "r3"])
                && settled(&c, &all, &["r1", "r2"])
        })
        .await;
        let (again, moved) = reengaged(&before, &instances(&[&a, &b, &c]));
        println!(
            "r3 joined{what}: {moved} clusters moved; {}",
            show(&[&a, &b, &c])
        );
        assert!(moved > 0, "r3 took no share");
        assert!(
            again.is_empty(),
            "clusters that kept their replica were released and engaged again: {again:?}"
        );
        recorder.assert_no_overlaps();
        a.stop().await;
        b.stop().await;
        c.stop().await;
    }
}

/// Which replica engaged each cluster, and which instance (a cluster released and engaged
/// again is a new instance).
fn instances(replicas: &[&Replica]) -> BTreeMap<String, (String, mcr_core::ClusterId)> {
    let mut out = BTreeMap::new();
    for r in replicas {
        for name in r.mgr.engaged_clusters() {
            if let Ok(c) = r.mgr.fleet().get(&name) {
                out.insert(name.to_string(), (r.id.clone(), c.id()));
            }
        }
    }
    out
}

/// The clusters of `before` that kept their replica but were engaged again (a new instance),
/// and how many changed replica.
fn reengaged(
    before: &BTreeMap<String, (String, mcr_core::ClusterId)>,
    after: &BTreeMap<String, (String, mcr_core::ClusterId)>,
) -> (Vec<String>, usize) {
    let mut again = Vec::new();
    let mut moved = 0;
    for (name, (owner, id)) in before {
        match after.get(name) {
            Some((o, i)) if o == owner && i != id => again.push(name.clone()),
            Some((o, _)) if o != owner => moved += 1,
            _ => {}
        }
    }
    (again, moved)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_replica_moves_only_its_share() {
    // A replica that starts lists its peers before it claims anything: the replicas already
    // there keep every cluster the newcomer does not take, engaged as it was (same instance).
    let pair = Pair::start(Pair::size(12)).await;
    split(&pair.a, &pair.b, &pair.all).await;
    let before = instances(&[&pair.a, &pair.b]);

    // Manager::cluster answers NotOwned for another replica's cluster, naming the owner
    // (it does not fall back to the provider, which holds every cluster).
    for theirs in pair.b.mgr.engaged_clusters() {
        match pair.a.mgr.cluster(theirs.clone()).await {
            Err(mcr_core::Error::NotOwned { owner, .. }) => {
                assert_eq!(owner.as_deref(), Some("r2"), "{theirs}")
            }
            Err(other) => panic!("{theirs}: {other}"),
            Ok(_) => panic!("{theirs}: r1 handed out r2's cluster"),
        }
    }
    pair.join_third(before, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_lease_watch_is_deaf_follows_its_peers_by_listing() {
    // The orphan behind a hung watch (issue 46; simulation seeds 70 and 7355): r2's watch of
    // the peer Leases stays open and delivers nothing. Alone, r2 has no peer whose expiry would
    // make it list: only its own renewals, which never come back through the watch, tell it
    // the watch is deaf, and then it lists its peers and watches again. So it hears of r3
    // joining and hands it its share, and takes everything back when r3 leaves. At every step
    // each cluster is engaged by exactly one replica.
    logs();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::start(Pair::size(12)).await.unwrap();
    let all = members(&fleet).await;
    let recorder = Recorder::default();
    let b = start_with(
        "r2",
        &host,
        HostVia::DeafLeaseWatch,
        &fleet,
        &recorder,
        None,
    )
    .await;
    eventually("r2 alone owns the fleet", WAIT, || partitioned(&[&b], &all)).await;
    let c = start("r3", &host, &fleet, &recorder).await;
    eventually("r2 and r3 share the fleet", WAIT, || {
        partitioned(&[&b, &c], &all)
            && !b.mgr.engaged_clusters().is_empty()
            && !c.mgr.engaged_clusters().is_empty()
    })
    .await;
    println!("r3 joined: {}", show(&[&b, &c]));
    c.stop().await;
    eventually("r2 owns the fleet again", WAIT, || partitioned(&[&b], &all)).await;
    recorder.assert_no_overlaps();
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_list_its_peers_claims_nothing() {
    // r3's Role lacks list and watch on Leases: it never learns its peers, so it must never
    // claim (its claim would be "everything", and renewed forever: the fleet orphaned). r1 and
    // r2 keep their clusters engaged as they were, and r3 says why at WARN.
    let Pair {
        host,
        fleet,
        all,
        recorder,
        a,
        b,
    } = Pair::start(8).await;
    split(&a, &b, &all).await;
    let before = instances(&[&a, &b]);
    let c = start_with("r3", &host, HostVia::NoLeaseList, &fleet, &recorder, None).await;
    // r1 renews 8 times (4 s, two lease durations): time for r3 to have done harm.
    let w0 = writes(&a);
    eventually("r1 renews 8 times", WAIT, || writes(&a) >= w0 + 8).await;
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(host.client(), "default");
    let r3_lease = leases.get_opt("shard-test-r3").await.unwrap();
    assert!(
        r3_lease.is_none(),
        "r3 wrote a Lease without knowing its peers: {:?}",
        r3_lease.and_then(|l| l.metadata.annotations)
    );
    assert!(c.mgr.engaged_clusters().is_empty(), "{}", show(&[&c]));
    let (again, moved) = reengaged(&before, &instances(&[&a, &b]));
    assert!(
        again.is_empty() && moved == 0 && partitioned(&[&a, &b], &all),
        "r1 and r2 gave clusters up: {again:?}, {moved} moved; {}",
        show(&[&a, &b])
    );
    let text = logs().text();
    assert!(
        text.lines().any(|l| l.contains(" WARN ")
            && l.contains("r3")
            && l.contains("peer lease")
            && l.contains("list")),
        "r3 did not warn that it cannot list its peers:\n{text}"
    );
    a.stop().await;
    b.stop().await;
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_deleted_or_relabelled_by_hand_moves_nothing() {
    // A peer Lease is an ordinary host object: `kubectl delete lease`, a GitOps prune or a
    // removed label must not make another replica take a live peer's clusters. r2 writes its
    // Lease again at its next renewal; meanwhile r1 keeps to its own share.
    let Pair {
        host,
        fleet: _fleet,
        all,
        recorder,
        a,
        b,
    } = Pair::start(8).await;
    split(&a, &b, &all).await;
    let before = instances(&[&a, &b]);
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(host.client(), "default");
    for how in ["deleted", "relabelled"] {
        match how {
            "deleted" => {
                leases
                    .delete("shard-test-r2", &Default::default())
                    .await
                    .unwrap();
            }
            _ => {
                let patch = serde_json::json!({"metadata": {"labels": {"mcr.sigs.k8s.io/shard-group": null}}});
                leases
                    .patch(
                        "shard-test-r2",
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(&patch),
                    )
                    .await
                    .unwrap();
            }
        }
        // Two lease durations of r1's renewals: r1 would have acted by then.
        let w0 = writes(&a);
        eventually("r1 renews 8 times", WAIT, || writes(&a) >= w0 + 8).await;
        let (again, moved) = reengaged(&before, &instances(&[&a, &b]));
        assert!(
            again.is_empty() && moved == 0 && partitioned(&[&a, &b], &all),
            "r2's Lease {how} by hand: clusters moved: {again:?}, {moved} moved; {}",
            show(&[&a, &b])
        );
    }
    recorder.assert_no_overlaps();
    a.stop().await;
    b.stop().await;
}

/// Issue 46, defect 4: a cluster engaged by hand on a sharded manager was never stopped by the
/// table when another replica came to own it (the handoff waited its lease duration and
/// handed over anyway: two replicas reconciled it). It is refused now, with an error that says
/// what to do instead, and wanting it instead coordinates it like every other member.
#[tokio::test]
async fn a_cluster_engaged_by_hand_on_a_sharded_manager_is_refused() {
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start("by-hand").await.unwrap();
    let mgr = Manager::builder(host.client())
        .sharding(sharding("alone"))
        .build();
    let cluster = Cluster::new("by-hand", member.client());
    let token = CancellationToken::new();
    cluster.cache().start(token.child_token());
    let err = mcr_core::Aware::engage(&mgr, token.clone(), "by-hand".into(), cluster)
        .expect_err("engaging by hand on a sharded manager");
    let shown = mcr_core::ErrorChain(&err).to_string();
    assert!(
        shown.contains("by-hand") && shown.contains("sharded") && shown.contains("want"),
        "{shown}"
    );
    assert!(mgr.engaged_clusters().is_empty());
    // The coordinated way: wanted through the table, engaged once this replica owns it.
    let run = {
        let (mgr, token) = (mgr.clone(), token.clone());
        tokio::spawn(async move { mgr.run_until(token).await })
    };
    mgr.engagements()
        .want(
            &token,
            &"by-hand".into(),
            mcr_core::Source::Cluster(Cluster::new("by-hand", member.client())),
        )
        .unwrap();
    eventually("wanted by hand, engaged once owned", WAIT, || {
        mgr.engaged_clusters() == ["by-hand"]
    })
    .await;
    token.cancel();
    tokio::time::timeout(WAIT, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// Clusters whose reconciles kept their cluster (ignoring cancellation), by replica.
static KEPT: Mutex<Vec<Cluster>> = Mutex::new(Vec::new());

/// Keeps a handle on its cluster for ever: work that does not honour cancellation.
async fn keeps_its_cluster(
    _cm: Arc<ConfigMap>,
    ctx: Context<()>,
) -> Result<Action, mcr_core::Error> {
    KEPT.lock().unwrap().push(ctx.current_cluster().clone());
    Ok(Action::await_change())
}

fn no_retry(_: Arc<ConfigMap>, _: &mcr_core::Error, _: Context<()>) -> Action {
    Action::await_change()
}

/// Issue 46, item 3: a handoff waits while the old replica still runs work of a cluster it
/// gives up; only once that work has outlived the documented bound (the lease duration) is
/// the cluster handed over anyway, and then it says so: a Warning Event on the replica's Lease
/// and the `mcr_shard_forced_handoffs` counter.
#[tokio::test]
async fn a_handoff_forced_past_its_bound_says_so_in_an_event_and_a_metric() {
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::start(4).await.unwrap();
    members(&fleet).await;
    let provider = |fleet: &Fleet| {
        let provider = Arc::new(ClustersProvider::new());
        for c in fleet.clusters() {
            provider.want(Cluster::new(c.name(), c.client())).unwrap();
        }
        provider
    };
    let a = Manager::builder(host.client())
        .provider(provider(&fleet))
        .sharding(sharding("keeper"))
        .build();
    Controller::new(&a)
        .for_::<ConfigMap>()
        .register(keeps_its_cluster, no_retry, Arc::new(()))
        .unwrap();
    let token = CancellationToken::new();
    let run_a = {
        let (a, token) = (a.clone(), token.clone());
        tokio::spawn(async move { a.run_until(token).await })
    };
    eventually("a owns and reconciled all four", WAIT, || {
        a.engaged_clusters().len() == 4 && KEPT.lock().unwrap().len() >= 4
    })
    .await;

    let b = Manager::builder(host.client())
        .provider(provider(&fleet))
        .sharding(sharding("joiner"))
        .build();
    let run_b = {
        let (b, token) = (b.clone(), token.clone());
        tokio::spawn(async move { b.run_until(token).await })
    };
    let joined = Instant::now();
    eventually("b engaged its share", WAIT, || {
        !b.engaged_clusters().is_empty()
    })
    .await;
    // Not before a's work outlived the lease duration (2 s): a kept every cluster.
    assert!(
        joined.elapsed() >= Duration::from_secs(2),
        "handed over after {:?}, before the bound",
        joined.elapsed()
    );
    let metrics = a.metrics().encode();
    let forced: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("mcr_shard_forced_handoffs_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert_eq!(
        forced as usize,
        b.engaged_clusters().len(),
        "forced handoffs counted: {metrics}"
    );
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(host.client(), "default");
    let deadline = Instant::now() + WAIT;
    loop {
        let listed = events.list(&Default::default()).await.unwrap();
        let found = listed.items.iter().any(|e| {
            e.reason.as_deref() == Some("HandoffForced")
                && e.type_.as_deref() == Some("Warning")
                && e.note.as_deref().is_some_and(|n| n.contains("handed over"))
        });
        if found {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no HandoffForced Event: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    KEPT.lock().unwrap().clear();
    token.cancel();
    let _ = tokio::time::timeout(WAIT, run_a).await;
    let _ = tokio::time::timeout(WAIT, run_b).await;
}

/// Issue 46, defect 2: a replica that joins while a live peer's Lease is missing (deleted by
/// hand) used to claim without that peer, and the peer released and engaged again clusters it
/// never stopped owning (4 of 12). The newcomer now listens for its renew deadline before it
/// claims: the peer writes its Lease again meanwhile, and nothing that stays with a replica is
/// engaged again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_joining_while_a_live_peers_lease_is_missing_moves_only_its_share() {
    let pair = Pair::start(Pair::size(12)).await;
    split(&pair.a, &pair.b, &pair.all).await;
    let before = instances(&[&pair.a, &pair.b]);
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(pair.host.client(), "default");
    leases
        .delete("shard-test-r2", &Default::default())
        .await
        .unwrap();
    pair.join_third(before, " while r2's Lease was missing")
        .await;
}
