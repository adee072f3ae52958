//! Losing the leader Lease: the controllers stop and `run_until` returns
//! `Error::LeaderElectionLost`; a standby never reconciles while the old leader still does;
//! settings that would let leaders overlap are refused (the plain hand-over between two managers
//! is in `lifecycle.rs`).

mod common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use common::*;
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::ConfigMap},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::controller::Action,
};
use mcr_envtest::{Partition, TestCluster};
use mcr_manager::{Context, Controller, Error, LeaderElection, Manager};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LEASE: &str = "mcr-loss";

/// A manager of the host cluster alone (so the host is engaged), electing through `LEASE`.
fn elected(host: &TestCluster, log: &Log) -> Manager {
    let le = LeaderElection::new(LEASE, "default")
        .identity("me")
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(50));
    let mgr = Manager::builder(host.client()).leader_election(le).build();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    mgr
}

/// `mcr_engaged_clusters` of the controller: 1 while it runs on the host, 0 once stopped.
fn engaged_gauge(mgr: &Manager) -> Option<i64> {
    let prefix = r#"mcr_engaged_clusters{controller="configmap"} "#;
    mgr.metrics()
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(prefix).and_then(|v| v.trim().parse().ok()))
}

/// Starts `mgr`, waits until it leads and reconciles on the host.
async fn leading(host: &TestCluster, mgr: &Manager, log: &Log) -> JoinHandle<Result<(), Error>> {
    let run = tokio::spawn({
        let mgr = mgr.clone();
        async move { mgr.run_until(CancellationToken::new()).await }
    });
    eventually("leading", DEADLINE, || mgr.is_leader()).await;
    create_cm(host.client(), "one", "1").await;
    eventually("reconciling", DEADLINE, || log.contains("<host>/one=1")).await;
    assert_eq!(engaged_gauge(mgr), Some(1));
    run
}

/// Waits (generously) for `run_until` to return by itself.
async fn returned(run: JoinHandle<Result<(), Error>>) -> Result<(), Error> {
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("run_until should return after losing the lease")
        .unwrap()
}

#[tokio::test]
async fn losing_the_lease_to_another_identity_stops_the_controllers() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let log = Log::default();
    let mgr = elected(&host, &log);
    let run = leading(&host, &mgr, &log).await;

    // Someone else writes the Lease over (retrying on conflicts with the leader's renewals).
    let api: Api<Lease> = Api::namespaced(host.client(), "default");
    let start = std::time::Instant::now();
    loop {
        let mut lease = api.get(LEASE).await.unwrap();
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some("intruder".into());
        spec.lease_duration_seconds = Some(3600);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        match api.replace(LEASE, &PostParams::default(), &lease).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                assert!(start.elapsed() < DEADLINE, "could not take the lease over");
            }
            Err(err) => panic!("writing the lease failed: {err}"),
        }
    }

    let result = returned(run).await;
    assert!(
        matches!(&result, Err(Error::LeaderElectionLost { lease }) if lease == "default/mcr-loss"),
        "run_until should report the lost lease, got {result:?}"
    );
    assert!(!mgr.is_leader());
    assert_eq!(engaged_gauge(&mgr), Some(0), "the controller was stopped");
    let holder = api
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(
        holder.as_deref(),
        Some("intruder"),
        "the loser must not release a lease it no longer holds"
    );
}

#[tokio::test]
async fn a_leader_cut_off_past_its_renew_deadline_stops_the_controllers() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let log = Log::default();
    let mgr = elected(&host, &log);
    let run = leading(&host, &mgr, &log).await;

    // Renewals now hang; after the renew deadline the leader gives up, and shutdown (including
    // the best-effort release of the Lease) does not wait on the unreachable host.
    host.partition(Partition::Hang);
    let result = returned(run).await;
    assert!(
        matches!(&result, Err(Error::LeaderElectionLost { .. })),
        "run_until should report the lost lease, got {result:?}"
    );
    assert!(!mgr.is_leader());
    assert_eq!(engaged_gauge(&mgr), Some(0), "the controller was stopped");
    host.heal();
}

#[tokio::test]
async fn settings_that_let_leaders_overlap_are_refused() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let le = LeaderElection::new("bad", "default")
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_secs(3));
    let mgr = Manager::builder(host.client()).leader_election(le).build();
    let result = tokio::time::timeout(DEADLINE, mgr.run_until(CancellationToken::new()))
        .await
        .expect("run_until should refuse the settings instead of running");
    let err = result.expect_err("lease_duration <= renew_deadline must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains("default/bad")
            && msg.contains("lease_duration (2s) must be longer than renew_deadline (3s)"),
        "{msg}"
    );
    assert!(!mgr.is_leader());
}

/// Reconciles of both managers: who, which object, when it started and (once it finished or
/// was dropped) ended. `Instant`s of one process compare across managers.
#[derive(Clone, Default)]
struct Timeline(Arc<Mutex<Vec<Span>>>);

/// Who, which object, start, end.
type Span = (&'static str, String, Instant, Option<Instant>);

/// Records the end of a reconcile when dropped: finished, failed or cancelled.
struct Open(Timeline, usize);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.0.lock().unwrap()[self.1].3 = Some(Instant::now());
    }
}

impl Timeline {
    fn open(&self, who: &'static str, object: String) -> Open {
        let mut spans = self.0.lock().unwrap();
        spans.push((who, object, Instant::now(), None));
        Open(self.clone(), spans.len() - 1)
    }

    fn started(&self, who: &str, object: &str) -> bool {
        let spans = self.0.lock().unwrap();
        spans.iter().any(|s| s.0 == who && s.1 == object)
    }

    /// Every reconcile of the old leader ended before the standby's first one started.
    fn assert_no_overlap(&self) {
        let spans = self.0.lock().unwrap().clone(); // not held while panicking
        let first = spans.iter().filter(|s| s.0 == "standby").map(|s| s.2).min();
        let first = first.expect("the standby reconciled");
        for (_, object, _, end) in spans.iter().filter(|s| s.0 == "leader") {
            let end = end.unwrap_or_else(|| {
                panic!(
                    "the old leader's reconcile of {object} still runs after the standby started"
                )
            });
            assert!(
                end <= first,
                "the old leader's reconcile of {object} ended {:?} after the standby's first started",
                end - first
            );
        }
    }
}

struct Actor(&'static str, Timeline);

/// Writes `acted-by: <who>` on the ConfigMap; the one named `stuck` never finishes.
async fn act(cm: Arc<ConfigMap>, ctx: Context<Actor>) -> Result<Action, kube::Error> {
    let Actor(who, timeline) = &**ctx.data();
    let _open = timeline.open(who, cm.name_any());
    if cm.name_any() == "stuck" {
        std::future::pending::<()>().await;
    }
    let patch = serde_json::json!({ "metadata": { "annotations": { "acted-by": who } } });
    Api::<ConfigMap>::namespaced(ctx.client(), "default")
        .patch(
            &cm.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(Action::await_change())
}

fn again(_: Arc<ConfigMap>, _: &kube::Error, _: Context<Actor>) -> Action {
    Action::requeue(Duration::from_millis(50))
}

/// A manager electing through `mcr-standby` as `who`, reconciling ConfigMaps with `act`.
fn candidate(client: kube::Client, who: &'static str, timeline: &Timeline) -> Manager {
    let le = LeaderElection::new("mcr-standby", "default")
        .identity(who)
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(50));
    let mgr = Manager::builder(client).leader_election(le).build();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .register(act, again, Arc::new(Actor(who, timeline.clone())))
        .unwrap();
    mgr
}

/// A client of `real` whose new requests never answer once `hung` is set: the leader's own view
/// of a host API server that hangs, while the standby's client still gets through. (One envtest
/// host can only hang for everybody; requests already answered, such as open watches, go on.)
fn stallable(real: kube::Client, hung: Arc<AtomicBool>) -> kube::Client {
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (real, hung) = (real.clone(), hung.clone());
        async move {
            if hung.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            real.send(req).await
        }
    });
    kube::Client::new(service, "default")
}

fn run(mgr: &Manager, token: &CancellationToken) -> JoinHandle<Result<(), Error>> {
    let (mgr, token) = (mgr.clone(), token.clone());
    tokio::spawn(async move { mgr.run_until(token).await })
}

/// The leader leads and has reconciled `a`; then the standby starts.
async fn leader_and_standby(
    host: &TestCluster,
    leader: &Manager,
    standby: &Manager,
    timeline: &Timeline,
    leader_token: &CancellationToken,
) -> (JoinHandle<Result<(), Error>>, JoinHandle<Result<(), Error>>) {
    let leading = run(leader, leader_token);
    eventually("the leader leads", DEADLINE, || leader.is_leader()).await;
    create_cm(host.client(), "a", "1").await;
    eventually("the leader reconciles", DEADLINE, || {
        timeline.started("leader", "a")
    })
    .await;
    let standing_by = run(standby, &CancellationToken::new());
    (leading, standing_by)
}

#[tokio::test]
async fn a_standby_acts_only_after_a_hung_leader_stopped_acting() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let timeline = Timeline::default();
    let hung = Arc::new(AtomicBool::new(false));
    let leader = candidate(stallable(host.client(), hung.clone()), "leader", &timeline);
    let standby = candidate(host.client(), "standby", &timeline);
    let token = CancellationToken::new();
    let (leading, standing_by) =
        leader_and_standby(&host, &leader, &standby, &timeline, &token).await;

    // The leader's API server access hangs: its renewals and its write for `b` (seen on its
    // open watch) never answer.
    hung.store(true, Ordering::SeqCst);
    create_cm(host.client(), "b", "1").await;
    eventually("the leader starts on b", DEADLINE, || {
        timeline.started("leader", "b")
    })
    .await;

    eventually("the standby takes over", DEADLINE, || standby.is_leader()).await;
    eventually("the standby acts", DEADLINE, || {
        timeline.started("standby", "b")
    })
    .await;
    timeline.assert_no_overlap();
    let result = returned(leading).await;
    assert!(
        matches!(result, Err(Error::LeaderElectionLost { .. })),
        "{result:?}"
    );
    assert!(!standing_by.is_finished());
    standing_by.abort();
}

#[tokio::test]
async fn a_standby_acts_only_after_a_stopping_leader_dropped_a_hung_reconcile() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let timeline = Timeline::default();
    let leader = candidate(host.client(), "leader", &timeline);
    let standby = candidate(host.client(), "standby", &timeline);
    let token = CancellationToken::new();
    let (leading, standing_by) =
        leader_and_standby(&host, &leader, &standby, &timeline, &token).await;

    // A reconcile that never finishes, then a clean stop: the leader stops renewing while it
    // waits for that reconcile, so it must drop it before the Lease can expire.
    create_cm(host.client(), "stuck", "1").await;
    eventually("the leader is stuck", DEADLINE, || {
        timeline.started("leader", "stuck")
    })
    .await;
    token.cancel();

    eventually("the standby takes over", DEADLINE, || standby.is_leader()).await;
    eventually("the standby acts", DEADLINE, || {
        timeline.started("standby", "a")
    })
    .await;
    timeline.assert_no_overlap();
    assert!(returned(leading).await.is_ok());
    standing_by.abort();
}

/// Issue 23, item 7: a Lease deleted under a working leader is not a free Lease. The standby
/// that recreates it leads only once the old leader (which sees the new holder at its next
/// renew) has stopped acting.
#[tokio::test]
async fn a_standby_that_recreates_a_deleted_lease_acts_only_after_the_leader_stopped() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let timeline = Timeline::default();
    // The leader's renewals hang (its reconciles go on): only the deletion can end its term.
    let hung = Arc::new(AtomicBool::new(false));
    let leader = candidate(stallable(host.client(), hung.clone()), "leader", &timeline);
    let standby = candidate(host.client(), "standby", &timeline);
    let token = CancellationToken::new();
    let (leading, standing_by) =
        leader_and_standby(&host, &leader, &standby, &timeline, &token).await;
    create_cm(host.client(), "stuck", "1").await;
    eventually("the leader is stuck", DEADLINE, || {
        timeline.started("leader", "stuck")
    })
    .await;

    hung.store(true, Ordering::SeqCst);
    Api::<Lease>::namespaced(host.client(), "default")
        .delete("mcr-standby", &Default::default())
        .await
        .unwrap();
    create_cm(host.client(), "b", "1").await;
    eventually("the standby takes over", DEADLINE, || standby.is_leader()).await;
    eventually("the standby acts", DEADLINE, || {
        timeline.started("standby", "b")
    })
    .await;
    timeline.assert_no_overlap();
    let result = returned(leading).await;
    assert!(
        matches!(result, Err(Error::LeaderElectionLost { .. })),
        "{result:?}"
    );
    standing_by.abort();
}

/// Issue 23, item 7: two candidates built with the default identity in one process (as two
/// `hostNetwork` replicas on one node share hostname and, in containers, pid 1) differ.
#[test]
fn default_identities_differ_between_candidates() {
    let a = LeaderElection::new("x", "default");
    let b = LeaderElection::new("x", "default");
    assert_ne!(a.identity_str(), b.identity_str());
}

/// A runnable that serves the members on every replica (as a webhook server does).
struct Serving;

impl mcr_manager::Runnable for Serving {
    fn name(&self) -> &str {
        "serving"
    }

    fn start(
        self: Arc<Self>,
        token: CancellationToken,
    ) -> mcr_core::BoxFuture<'static, Result<(), mcr_manager::BoxError>> {
        Box::pin(async move {
            token.cancelled().await;
            Ok(())
        })
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn serves_members(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_standby_serving_members_engages_them_read_only_and_holds_none_that_left() {
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start("member").await.unwrap();
    create_cm(member.client(), "before", "1").await;
    let election = |id: &str| {
        LeaderElection::new("mcr-serving", "default")
            .identity(id)
            .lease_duration(Duration::from_secs(3))
            .renew_deadline(Duration::from_secs(2))
            .retry_period(Duration::from_millis(50))
    };
    let replica = |id: &str, log: &Log| {
        let provider = Arc::new(mcr_core::providers::clusters::ClustersProvider::new());
        let mgr = Manager::builder(host.client())
            .provider(provider.clone())
            .leader_election(election(id))
            .build();
        mgr.add(Arc::new(Serving)).unwrap();
        Controller::new(&mgr)
            .for_::<ConfigMap>()
            .register(record, retry, Arc::new(log.clone()))
            .unwrap();
        (mgr, provider)
    };
    let (a_log, b_log) = (Log::default(), Log::default());
    let (a, a_provider) = replica("a", &a_log);
    a_provider
        .add(mcr_core::Cluster::new("member", member.client()))
        .await
        .unwrap();
    let a_token = CancellationToken::new();
    let a_run = tokio::spawn({
        let (a, token) = (a.clone(), a_token.clone());
        async move { a.run_until(token).await }
    });
    eventually("a to lead", DEADLINE, || a.is_leader()).await;
    eventually("a to reconcile the member", DEADLINE, || {
        a_log.contains("member/before=1")
    })
    .await;

    // b stands by: the member is engaged there too (its cache synced, found by the fleet),
    // while b's controller does not reconcile it.
    let (b, b_provider) = replica("b", &b_log);
    let b_token = CancellationToken::new();
    let b_run = tokio::spawn({
        let (b, token) = (b.clone(), b_token.clone());
        async move { b.run_until(token).await }
    });
    b_provider
        .add(mcr_core::Cluster::new("member", member.client()))
        .await
        .unwrap();
    let member_name = mcr_core::ClusterName::new("member");
    eventually("b to engage the member while standing by", DEADLINE, || {
        b.fleet().get(&member_name).is_ok()
    })
    .await;
    assert!(!b.is_leader());
    let engaged = b.fleet().get(&member_name).unwrap();
    assert!(engaged.cache().is_synced() || engaged.cache().is_started());
    let released = engaged.released();
    drop(engaged);
    create_cm(member.client(), "during", "1").await;
    eventually("a to reconcile the change", DEADLINE, || {
        a_log.contains("member/during=1")
    })
    .await;
    assert_eq!(b_log.count("member/"), 0, "the standby reconciled");

    // The member leaves b's fleet: nothing of it stays on b, though its controller still
    // waits (before: the waiting controller held every instance it was handed).
    b_provider.remove(&member_name);
    eventually("b to let go of the member's instance", DEADLINE, || {
        released.is_released()
    })
    .await;

    // It comes back, then a goes: b leads, and reconciles the member (engaged all along).
    b_provider
        .add(mcr_core::Cluster::new("member", member.client()))
        .await
        .unwrap();
    eventually("b to engage the member again", DEADLINE, || {
        b.fleet().get(&member_name).is_ok()
    })
    .await;
    a_token.cancel();
    a_run.await.unwrap().unwrap();
    eventually("b to lead", DEADLINE, || b.is_leader()).await;
    eventually("b to reconcile the member", DEADLINE, || {
        b_log.contains("member/during=1")
    })
    .await;
    b_token.cancel();
    b_run.await.unwrap().unwrap();
}
