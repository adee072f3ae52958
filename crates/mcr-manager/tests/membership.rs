//! Per-member hooks: `on_join` queues a first reconcile once per engagement, even for a member
//! without objects; `on_leave` runs once per departure, after the member's reconciles still
//! running, retried until it succeeds; a member handed to another replica is `MovedAway`, not
//! `LeftFleet`; a replacement and a stopping manager are no departures.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{DEADLINE, Env, create_cm, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
    runtime::reflector::ObjectRef,
};
use mcr_core::providers::clusters::ClustersProvider;
use mcr_core::{Cluster, ClusterName};
use mcr_envtest::TestCluster;
use mcr_manager::{
    Action, Context, Controller, Departure, DepartureReason, Manager, Request, WatchOptions,
};
use mcr_test_support::{OTHER_REPLICA, Owned};
use tokio_util::sync::CancellationToken;

/// What happened, in order.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }
    fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn has(&self, entry: &str) -> bool {
        self.entries().iter().any(|e| e == entry)
    }
    fn count(&self, entry: &str) -> usize {
        self.entries().iter().filter(|e| *e == entry).count()
    }
    fn position(&self, entry: &str) -> Option<usize> {
        self.entries().iter().position(|e| e == entry)
    }
}

const SUMMARY: &str = "summary";

/// The ConfigMap `fast` alone (a real control plane has others, in `kube-system`).
fn only_fast() -> WatchOptions<ConfigMap> {
    WatchOptions::new().fields("metadata.name=fast")
}

fn summary(host: &kube::Client) -> Api<ConfigMap> {
    Api::namespaced(host.clone(), "default")
}

async fn create_summary(host: &kube::Client) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(SUMMARY.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    summary(host)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// Sets (`Some`) or removes (`None`) a member's entry in the host's summary.
async fn set_entry(
    host: &kube::Client,
    member: &ClusterName,
    value: Option<&str>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"data": {member.key(): value}});
    summary(host)
        .patch(SUMMARY, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn entries(host: &kube::Client) -> Vec<String> {
    let cm = summary(host).get(SUMMARY).await.unwrap();
    cm.data.unwrap_or_default().into_keys().collect()
}

#[tokio::test]
async fn a_member_without_objects_gets_a_first_reconcile_on_every_join() {
    let env = Env::start(2).await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .on_join(|_member: &ClusterName| {
            Some(ObjectRef::<ConfigMap>::new("platform").within("default"))
        })
        .register(
            |req: Request<ConfigMap>, ctx: Context<Log>| async move {
                let present = ctx.cached(&req.object).is_some();
                ctx.data().push(format!(
                    "{}/{} present={present}",
                    req.cluster, req.object.name
                ));
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _: &kube::Error, _| Action::await_change(),
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run_engaged().await;
    for name in env.fleet.names() {
        eventually("a first reconcile of every member", DEADLINE, || {
            log.has(&format!("{name}/platform present=false"))
        })
        .await;
    }
    // Leaves and comes back: a new engagement, joined again.
    let member = env.fleet.names()[0].clone();
    assert!(env.provider.remove(&member.as_str().into()));
    eventually("the member left", DEADLINE, || {
        !env.mgr.fleet().names().contains(&member.as_str().into())
    })
    .await;
    let client = env.member(&member).client();
    env.provider
        .add(Cluster::new(member.as_str(), client))
        .await
        .unwrap();
    eventually("joined again", DEADLINE, || {
        log.count(&format!("{member}/platform present=false")) == 2
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// The controller of the leave tests: writes `data.<member key>` into the host's summary for
/// each ConfigMap, but for `slow` only after its member has left (it waits for its cluster's
/// cancellation); its leave hook removes the entry of a member that left the fleet, failing
/// its first two attempts.
fn summary_controller(mgr: &Manager, log: &Log) {
    let failures = Arc::new(Mutex::new(0));
    let hook_log = log.clone();
    let host = mgr.host().client();
    Controller::new(mgr)
        .for_::<ConfigMap>()
        .on_leave(move |departure: Departure| {
            let (log, host, failures) = (hook_log.clone(), host.clone(), failures.clone());
            async move {
                let name = departure.cluster_name().clone();
                let reason = match departure.reason() {
                    DepartureReason::LeftFleet => "left".to_owned(),
                    DepartureReason::MovedAway { owner } => format!("moved to {owner:?}"),
                    other => format!("{other:?}"),
                };
                log.push(format!(
                    "leave {name} {reason} attempt {}",
                    departure.attempt()
                ));
                if !departure.reason().left_fleet() {
                    return Ok(());
                }
                {
                    let mut failed = failures.lock().unwrap();
                    if *failed < 2 {
                        *failed += 1;
                        return Err(kube::Error::Service("the host is busy".into()));
                    }
                }
                set_entry(&host, &name, None).await?;
                log.push(format!("cleaned {name}"));
                Ok(())
            }
        })
        .register(
            |cm: Arc<ConfigMap>, ctx: Context<Log>| async move {
                let member = ctx.cluster_name().clone();
                if cm.name_any() == "slow" {
                    ctx.data().push(format!("slow started {member}"));
                    ctx.cancelled().await;
                }
                set_entry(&ctx.host().client(), &member, Some("v")).await?;
                ctx.data().push(format!("wrote {member} {}", cm.name_any()));
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _: &kube::Error, _| Action::requeue(Duration::from_millis(100)),
            Arc::new(log.clone()),
        )
        .unwrap();
}

#[tokio::test]
async fn leave_runs_after_the_running_reconcile_and_until_it_succeeds() {
    let env = Env::start(2).await;
    let host = env.host.client();
    create_summary(&host).await;
    let names = env.fleet.names();
    let (gone, stays) = (names[0].clone(), names[1].clone());
    create_cm(env.member(&gone).client(), "slow", "1").await;
    create_cm(env.member(&stays).client(), "fast", "1").await;
    let log = Log::default();
    summary_controller(&env.mgr, &log);
    let run = env.run_engaged().await;
    eventually("the slow reconcile runs", DEADLINE, || {
        log.has(&format!("slow started {gone}"))
    })
    .await;
    eventually("the other member written", DEADLINE, || {
        log.has(&format!("wrote {stays} fast"))
    })
    .await;

    // The member leaves the fleet while its reconcile runs.
    assert!(env.provider.remove(&gone.as_str().into()));
    eventually("the leave hook succeeded", DEADLINE, || {
        log.has(&format!("cleaned {gone}"))
    })
    .await;
    let wrote = log.position(&format!("wrote {gone} slow"));
    let first = log.position(&format!("leave {gone} left attempt 1"));
    assert!(
        wrote.is_some() && wrote < first,
        "the running reconcile finished its write before the hook ran: {:?}",
        log.entries()
    );
    for attempt in 1..=3 {
        assert!(log.has(&format!("leave {gone} left attempt {attempt}")));
    }
    // One entry left: the member that stays. The departed member's write landed before the
    // one delete.
    let gone_key = ClusterName::new(gone.as_str()).key().into_owned();
    let stays_key = ClusterName::new(stays.as_str()).key().into_owned();
    assert_eq!(entries(&host).await, [stays_key]);
    assert!(!entries(&host).await.contains(&gone_key));

    // Stopping the manager disengages every member: no departure.
    env.token.cancel();
    run.await.unwrap().unwrap();
    let leaves = log
        .entries()
        .iter()
        .filter(|e| e.starts_with("leave "))
        .count();
    assert_eq!(leaves, 3, "{:?}", log.entries());
}

/// Replaced by a new instance of itself: still a member, no departure.
#[tokio::test]
async fn a_replaced_member_has_not_left() {
    let env = Env::start(1).await;
    let host = env.host.client();
    create_summary(&host).await;
    let member = env.fleet.names()[0].clone();
    create_cm(env.member(&member).client(), "fast", "1").await;
    let log = Log::default();
    summary_controller(&env.mgr, &log);
    let run = env.run_engaged().await;
    eventually("written", DEADLINE, || {
        log.has(&format!("wrote {member} fast"))
    })
    .await;
    let client = env.member(&member).client();
    let replacement =
        Cluster::new(member.as_str(), client).with_connection_hash("another connection");
    env.provider.want(replacement.clone()).unwrap();
    tokio::time::timeout(
        DEADLINE,
        env.provider
            .engagements()
            .until_active(&member.as_str().into(), replacement.id()),
    )
    .await
    .expect("the replacement becomes active");
    eventually("the replacement reconciled", DEADLINE, || {
        log.count(&format!("wrote {member} fast")) == 2
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
    assert!(
        !log.entries().iter().any(|e| e.starts_with("leave ")),
        "{:?}",
        log.entries()
    );
    assert_eq!(entries(&host).await.len(), 1);
}

/// Sharded: a member handed to another replica is `MovedAway` (its summary entry stays); one
/// that leaves the fleet is `LeftFleet` (its entry goes).
#[tokio::test]
async fn a_member_that_moved_away_is_not_one_that_left_the_fleet() {
    mcr_test_support::init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let (one, two) = (
        TestCluster::start("one").await.unwrap(),
        TestCluster::start("two").await.unwrap(),
    );
    create_summary(&host.client()).await;
    create_cm(one.client(), "fast", "1").await;
    create_cm(two.client(), "fast", "1").await;
    let provider = Arc::new(ClustersProvider::new());
    let mgr = Manager::new(host.client(), Some(provider.clone()));
    let owned = Owned::new(&["one", "two"]);
    assert!(mgr.engagements().coordinate(owned.clone()).is_ok());
    let log = Log::default();
    summary_controller(&mgr, &log);
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });
    for c in [&one, &two] {
        provider
            .add(Cluster::new(c.name(), c.client()))
            .await
            .unwrap();
    }
    eventually("both written", DEADLINE, || {
        log.has("wrote one fast") && log.has("wrote two fast")
    })
    .await;

    // `one` moves to the other replica: a departure from this one, not from the fleet.
    owned.set(&["two"]);
    let moved = format!("leave one moved to Some({OTHER_REPLICA:?}) attempt 1");
    eventually("one moved away", DEADLINE, || log.has(&moved)).await;
    let mut keys = entries(&host.client()).await;
    keys.sort();
    assert_eq!(keys, ["one", "two"], "the moved member's entry stays");

    // `two` leaves the fleet: its entry goes.
    assert!(provider.remove(&"two".into()));
    eventually("two cleaned", DEADLINE, || log.has("cleaned two")).await;
    assert_eq!(entries(&host.client()).await, ["one"]);

    // `one` comes back to this replica: joined, reconciled again.
    owned.all();
    eventually("one reconciled again", DEADLINE, || {
        log.count("wrote one fast") == 2
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
    let leaves: Vec<String> = (log.entries().into_iter())
        .filter(|e| e.starts_with("leave "))
        .collect();
    assert_eq!(
        leaves.len(),
        4,
        "one move, three attempts for two: {leaves:?}"
    );
}

/// Starts `env` with one member's `fast` ConfigMap reconciled by a controller that logs
/// `wrote <member>` and has `leave` as its leave hook (and a 300 ms reconcile timeout); returns
/// once it was reconciled, with the member's name and the run.
async fn run_hooked<F, Fut>(
    env: &Env,
    log: &Log,
    leave: F,
) -> (
    String,
    tokio::task::JoinHandle<Result<(), mcr_manager::Error>>,
)
where
    F: Fn(Departure) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), kube::Error>> + Send + 'static,
{
    let member = env.fleet.names()[0].clone();
    create_cm(env.member(&member).client(), "fast", "1").await;
    Controller::new(&env.mgr)
        .for_with::<ConfigMap>(only_fast())
        .reconcile_timeout(Duration::from_millis(300))
        .on_leave(leave)
        .register(
            |_: Arc<ConfigMap>, ctx: Context<Log>| async move {
                ctx.data().push(format!("wrote {}", ctx.cluster_name()));
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _: &kube::Error, _| Action::await_change(),
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run_engaged().await;
    eventually("reconciled", DEADLINE, || {
        log.has(&format!("wrote {member}"))
    })
    .await;
    (member, run)
}

/// A leave hook whose first call waits for `release` and fails; later calls succeed.
fn first_call_blocks(
    log: &Log,
    release: &Arc<tokio::sync::Notify>,
) -> impl Fn(Departure) -> futures::future::BoxFuture<'static, Result<(), kube::Error>>
+ Send
+ Sync
+ 'static {
    let (log, release, calls) = (log.clone(), release.clone(), Arc::new(Mutex::new(0)));
    move |_: Departure| {
        let (log, release, calls) = (log.clone(), release.clone(), calls.clone());
        Box::pin(async move {
            let call = {
                let mut calls = calls.lock().unwrap();
                *calls += 1;
                *calls
            };
            log.push(format!("call {call} started"));
            if call == 1 {
                release.notified().await;
                log.push("call 1 failed");
                return Err(kube::Error::Service("the host is busy".into()));
            }
            log.push("cleaned");
            Ok(())
        })
    }
}

/// Adds the member back to the provider, and waits until the controller saw it back during
/// its departure.
async fn add_back(env: &Env, member: &str, logs: &mcr_test_support::Logs) {
    let client = env.member(member).client();
    env.provider
        .add(Cluster::new(member, client))
        .await
        .unwrap();
    eventually("the controller saw it back", DEADLINE, || {
        logs.text()
            .contains("member joined again during its departure")
    })
    .await;
}

/// A hook that panics, or runs past the reconcile timeout, is retried like one that fails.
#[tokio::test]
async fn a_leave_hook_that_panics_or_hangs_is_retried() {
    let env = Env::start(1).await;
    let log = Log::default();
    let hook_log = log.clone();
    let (member, run) = run_hooked(&env, &log, move |departure: Departure| {
        let log = hook_log.clone();
        async move {
            let attempt = departure.attempt();
            log.push(format!("attempt {attempt}"));
            match attempt {
                1 => panic!("a bug in the hook"),
                2 => std::future::pending::<()>().await,
                _ => {}
            }
            log.push("done");
            Ok(())
        }
    })
    .await;
    assert!(env.provider.remove(&member.as_str().into()));
    eventually("the hook succeeded", DEADLINE, || log.has("done")).await;
    let attempts: Vec<String> = (log.entries().into_iter())
        .filter(|e| e.starts_with("attempt "))
        .collect();
    assert_eq!(attempts, ["attempt 1", "attempt 2", "attempt 3"]);
    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// A member that joins again while its leave hook runs: the attempt in flight ends before the
/// member's reconciles start, and the hook is not retried.
#[tokio::test]
async fn a_member_back_during_its_departure_waits_for_the_attempt_and_stops_the_retries() {
    let (logs, _guard) = mcr_test_support::Logs::scoped("mcr_manager=debug");
    let env = Env::start(1).await;
    let log = Log::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let (member, run) = run_hooked(&env, &log, first_call_blocks(&log, &release)).await;
    assert!(env.provider.remove(&member.as_str().into()));
    eventually("the hook runs", DEADLINE, || log.has("call 1 started")).await;

    // Back while the attempt runs.
    add_back(&env, &member, &logs).await;
    release.notify_one();
    let wrote = format!("wrote {member}");
    eventually("reconciled again", DEADLINE, || log.count(&wrote) == 2).await;
    env.token.cancel();
    run.await.unwrap().unwrap();
    let entries = log.entries();
    let failed = log.position("call 1 failed").unwrap();
    let again = (entries.iter().enumerate())
        .filter(|(_, e)| **e == wrote)
        .nth(1)
        .unwrap()
        .0;
    assert!(
        failed < again,
        "the attempt ended before the reconciles started: {entries:?}"
    );
    assert!(!log.has("call 2 started"), "not retried: {entries:?}");
}

/// A member back during its departure that leaves again before its reconciles started: the
/// departure resumes, and its hook runs to success.
#[tokio::test]
async fn a_member_back_and_gone_again_during_its_departure_is_cleaned_up() {
    let (logs, _guard) = mcr_test_support::Logs::scoped("mcr_manager=debug");
    let env = Env::start(1).await;
    let log = Log::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let (member, run) = run_hooked(&env, &log, first_call_blocks(&log, &release)).await;
    assert!(env.provider.remove(&member.as_str().into()));
    eventually("the hook runs", DEADLINE, || log.has("call 1 started")).await;
    add_back(&env, &member, &logs).await;
    // Gone again before its reconciles started.
    assert!(env.provider.remove(&member.as_str().into()));
    release.notify_one();
    eventually("cleaned up after all", DEADLINE, || log.has("cleaned")).await;
    assert_eq!(
        log.count(&format!("wrote {member}")),
        1,
        "{:?}",
        log.entries()
    );
    env.token.cancel();
    run.await.unwrap().unwrap();
}
