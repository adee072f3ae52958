//! Fault isolation in the controller loop: a hung member cannot take every reconcile slot, a
//! leaving member's reconciles are cancelled, and no hung reconcile holds up shutdown.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, ResourceExt, runtime::controller::Action};
use mcr_core::ClusterName;
use mcr_envtest::{ErrorRule, Partition};
use mcr_manager::{Context, Controller};

/// Pushes `entry` to the log when dropped (a reconcile future that the runtime dropped).
struct OnDrop(Log, String);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.push(self.1.clone());
    }
}

#[tokio::test]
async fn a_hung_member_with_requeued_objects_does_not_starve_a_healthy_one() {
    let env = Env::start(2).await;
    let sick = env.member("cluster-1");
    for i in 0..20 {
        create_cm(sick.client(), &format!("requeued-{i}"), "x").await;
    }
    let log = Log::default();
    let hung = Arc::new(AtomicUsize::new(0));
    let h = hung.clone();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let hung = h.clone();
                async move {
                    if ctx.cluster_name().as_str() != "cluster-1" {
                        return record(cm, ctx).await;
                    }
                    ctx.data().push(format!("cluster-1/{}", cm.name_any()));
                    // A reconcile that reads from its member, and comes back soon.
                    let api: Api<ConfigMap> = Api::namespaced(ctx.client(), "default");
                    hung.fetch_add(1, Ordering::SeqCst);
                    let _ = api.get(&cm.name_any()).await;
                    hung.fetch_sub(1, Ordering::SeqCst);
                    Ok(Action::requeue(Duration::from_millis(10)))
                }
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("every requeued object reconciled", DEADLINE, || {
        log.count("cluster-1/") >= 20
    })
    .await;
    sick.partition(Partition::Hang);
    eventually(
        "the sick member holds its share of the slots",
        DEADLINE,
        || hung.load(Ordering::SeqCst) >= 12,
    )
    .await;

    create_cm(env.member("cluster-2").client(), "fresh", "1").await;
    eventually(
        "the healthy member's new object reconciled",
        DEADLINE,
        || log.contains("cluster-2/fresh=1"),
    )
    .await;

    sick.heal();
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_leaving_cluster_cancels_its_in_flight_reconciles() {
    let env = Env::start(2).await;
    create_cm(env.member("cluster-1").client(), "stuck", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            |cm: Arc<ConfigMap>, ctx: Context<Log>| async move {
                if ctx.cluster_name().as_str() != "cluster-1" {
                    return record(cm, ctx).await;
                }
                let log = ctx.data().as_ref().clone();
                let token = ctx.cancellation().clone();
                let spawned_log = log.clone();
                tokio::spawn(async move {
                    token.cancelled().await;
                    spawned_log.push("side work saw the cancellation".into());
                });
                let _guard = OnDrop(log.clone(), "reconcile dropped".into());
                log.push("started".into());
                std::future::pending::<()>().await;
                Ok(Action::await_change())
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("the reconcile started", DEADLINE, || {
        log.contains("started")
    })
    .await;
    assert!(env.provider.remove(&ClusterName::new("cluster-1")));
    eventually("the reconcile dropped", DEADLINE, || {
        log.contains("reconcile dropped")
    })
    .await;
    eventually("the token fired", DEADLINE, || {
        log.contains("side work saw the cancellation")
    })
    .await;
    // The controller still works for the other member.
    create_cm(env.member("cluster-2").client(), "after", "1").await;
    eventually("the other member reconciled", DEADLINE, || {
        log.contains("cluster-2/after=1")
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// A reconcile that becomes ready in the same instant its cluster leaves (here: it waits for
/// the cluster's own cancellation) is dropped, not polled once more: the runtime checks that
/// the cluster is still there before it polls the reconciler's future, every time.
#[tokio::test]
async fn a_reconcile_woken_as_its_cluster_leaves_runs_no_further() {
    let env = Env::start(2).await;
    create_cm(env.member("cluster-1").client(), "leaving", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            |cm: Arc<ConfigMap>, ctx: Context<Log>| async move {
                if ctx.cluster_name().as_str() != "cluster-1" {
                    return record(cm, ctx).await;
                }
                let log = ctx.data().as_ref().clone();
                let _guard = OnDrop(log.clone(), "reconcile dropped".into());
                log.push("started".into());
                ctx.cancelled().await;
                log.push("ran after its cluster left".into());
                Ok(Action::await_change())
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("the reconcile started", DEADLINE, || {
        log.contains("started")
    })
    .await;
    assert!(env.provider.remove(&ClusterName::new("cluster-1")));
    eventually("the reconcile dropped", DEADLINE, || {
        log.contains("reconcile dropped")
    })
    .await;
    assert!(
        !log.contains("ran after its cluster left"),
        "the reconciler's future was polled after its cluster left: {:?}",
        log.entries()
    );
    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// A member's reconciles start only once it is engaged (active in the engagement table), so
/// a reconcile always finds its own cluster: not while another controller's informer on the
/// same member is still listing. A reconcile run before that found its cluster "not found",
/// and the object was dropped as if its cluster had gone.
///
/// A key that comes due before then is held once and queued again by the activation itself:
/// it does not go round the queue on a timer while the member starts (which also delayed
/// every new member's first reconcile by up to that period).
#[tokio::test]
async fn reconciles_wait_until_their_cluster_is_engaged() {
    // Every task of this test runs on its thread: what the controller logs here is its own.
    let (logs, _guard) = Logs::scoped("mcr_manager::controller=trace");
    let held = || {
        (logs.text().lines())
            .filter(|l| l.contains("cluster-1/default/early") && l.contains("not engaged yet"))
            .count()
    };
    let env = Env::start(1).await;
    let member = env.member("cluster-1");
    create_cm(member.client(), "early", "1").await;
    // Secrets cannot be listed yet: the member stays starting while its ConfigMaps list.
    member.inject_error(ErrorRule {
        verb: Some("list".into()),
        resource: Some("secrets".into()),
        code: 500,
        times: None,
    });
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            |cm: Arc<ConfigMap>, ctx: Context<Log>| async move {
                let own = match ctx.cluster(ctx.cluster_name()) {
                    Ok(_) => "found",
                    Err(_) => "missing",
                };
                ctx.data().push(format!(
                    "{}/{}: own cluster {own}",
                    ctx.cluster_name(),
                    cm.name_any()
                ));
                Ok(Action::await_change())
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    Controller::new(&env.mgr)
        .for_::<Secret>()
        .register(
            |_: Arc<Secret>, _: Context<Log>| async {
                Ok::<_, mcr_core::Error>(Action::await_change())
            },
            |_: Arc<Secret>, _: &mcr_core::Error, _: Context<Log>| {
                Action::requeue(Duration::from_secs(1))
            },
            Arc::new(Log::default()),
        )
        .unwrap();
    let run = env.run();
    eventually(
        "the member's ConfigMaps listed while its Secrets cannot be",
        DEADLINE,
        || {
            member.request_count("list", "configmaps") >= 1
                && member.request_count("list", "secrets") >= 2
        },
    )
    .await;
    assert_eq!(
        env.mgr.fleet().names(),
        Vec::<ClusterName>::new(),
        "the member is not engaged yet"
    );
    eventually("the object held", DEADLINE, || held() >= 1).await;
    // The member keeps starting through three more refused lists of its Secrets (their
    // backoff alone outlasts any retry period).
    let lists = member.request_count("list", "secrets");
    eventually("three more refused lists", DEADLINE, || {
        member.request_count("list", "secrets") >= lists + 3
    })
    .await;
    member.clear_faults();
    eventually("the object reconciled", DEADLINE, || {
        log.count("cluster-1/early") > 0
    })
    .await;
    assert_eq!(
        log.entries(),
        ["cluster-1/early: own cluster found"],
        "a reconcile ran before its cluster was engaged"
    );
    assert_eq!(
        held(),
        1,
        "a held key went round the queue while its member started:\n{}",
        logs.text()
    );
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_does_not_wait_forever_on_a_hung_reconcile() {
    let env = Env::start(1).await;
    create_cm(env.member("cluster-1").client(), "hangs", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .shutdown_grace(Duration::from_millis(200))
        .register(
            |_: Arc<ConfigMap>, ctx: Context<Log>| async move {
                ctx.data().push("started".into());
                std::future::pending::<()>().await;
                Ok(Action::await_change())
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("the reconcile started", DEADLINE, || {
        log.contains("started")
    })
    .await;
    env.token.cancel();
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the manager stopped despite a hung reconcile")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_reconcile_past_its_timeout_is_retried() {
    let env = Env::start(1).await;
    create_cm(env.member("cluster-1").client(), "slow", "1").await;
    let log = Log::default();
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .reconcile_timeout(Duration::from_millis(200))
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let first = a.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        std::future::pending::<()>().await;
                    }
                    record(cm, ctx).await
                }
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("reconciled on the second attempt", DEADLINE, || {
        log.contains("cluster-1/slow=1")
    })
    .await;
    assert!(attempts.load(Ordering::SeqCst) >= 2);
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn another_cluster_not_found_follows_the_error_policy() {
    let env = Env::start(1).await;
    create_cm(env.member("cluster-1").client(), "writer", "1").await;
    let log = Log::default();
    let mgr = env.mgr.clone();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let mgr = mgr.clone();
                async move {
                    ctx.data().push(format!("attempt {}", cm.name_any()));
                    // Writes to a member that is not (or no longer) there.
                    mgr.cluster("cluster-elsewhere").await?;
                    Ok(Action::await_change())
                }
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("the request retried by the error policy", DEADLINE, || {
        log.count("attempt writer") >= 3
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// `k` of 10 members have 20 periodically requeued objects each, whose reconciles read from
/// their member; then those members hang (requests accepted, never answered) until every
/// slot of a default controller (concurrency 16, no reconcile timeout) is held by a hung
/// reconcile. A new object in a healthy member must still be reconciled.
async fn hung_members_leave_slots_to_healthy_ones(k: usize) {
    const CONCURRENCY: usize = 16; // the builder's default
    const PER_CLUSTER: usize = 12; // the default per-cluster cap: 3/4 of the concurrency
    let env = Env::start(10).await;
    let sick: Vec<String> = (1..=k).map(|i| format!("cluster-{i}")).collect();
    for name in &sick {
        for i in 0..20 {
            create_cm(env.member(name).client(), &format!("requeued-{i}"), "x").await;
        }
    }
    let log = Log::default();
    let hung = Arc::new(AtomicUsize::new(0));
    let h = hung.clone();
    let sick_names = Arc::new(sick.clone());
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let hung = h.clone();
                let sick = sick_names.clone();
                async move {
                    let cluster = ctx.cluster_name().as_str().to_owned();
                    if !sick.contains(&cluster) {
                        return record(cm, ctx).await;
                    }
                    ctx.data().push(format!("{cluster}/{}", cm.name_any()));
                    let api: Api<ConfigMap> = Api::namespaced(ctx.client(), "default");
                    hung.fetch_add(1, Ordering::SeqCst);
                    let _ = api.get(&cm.name_any()).await;
                    hung.fetch_sub(1, Ordering::SeqCst);
                    Ok(Action::requeue(Duration::from_millis(10)))
                }
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    for name in &sick {
        eventually("every requeued object reconciled", DEADLINE, || {
            log.count(&format!("{name}/")) >= 20
        })
        .await;
    }
    for name in &sick {
        env.member(name).partition(Partition::Hang);
    }
    // The worst case: the hung members took every slot they could get before anything could
    // tell them from slow ones.
    let full = CONCURRENCY.min(k * PER_CLUSTER);
    eventually("the hung members hold the slots", DEADLINE, || {
        hung.load(Ordering::SeqCst) >= full
    })
    .await;

    let healthy = format!("cluster-{}", k + 1);
    create_cm(env.member(&healthy).client(), "fresh", "1").await;
    eventually(
        "the healthy member's new object reconciled",
        Duration::from_secs(60),
        || log.contains(&format!("{healthy}/fresh=1")),
    )
    .await;

    for name in &sick {
        env.member(name).heal();
    }
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn one_hung_member_of_ten_leaves_slots_to_the_healthy_ones() {
    hung_members_leave_slots_to_healthy_ones(1).await;
}

#[tokio::test]
async fn two_hung_members_of_ten_leave_slots_to_the_healthy_ones() {
    hung_members_leave_slots_to_healthy_ones(2).await;
}

#[tokio::test]
async fn five_hung_members_of_ten_leave_slots_to_the_healthy_ones() {
    hung_members_leave_slots_to_healthy_ones(5).await;
}
