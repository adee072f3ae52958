//! `mcr_queue_wait_seconds`: a request that is due while every reconcile slot is taken is
//! observed once, with the time it waited, under its own cluster's label.

mod common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    ResourceExt,
    runtime::{controller::Action, reflector::ObjectRef},
};
use mcr_manager::{Context, Controller, Request};
use tokio::{
    sync::{Notify, mpsc},
    time::Instant,
};

/// The waiter's requeue delay.
const REQUEUE: Duration = Duration::from_millis(300);
/// How long past its due time the waiter is kept waiting, at least.
const HELD: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Shared {
    log: Log,
    armed: AtomicBool,
    requeued: AtomicBool,
    blocked: AtomicBool,
    gate: Notify,
    /// When the armed waiter reconcile returned, when the blocker started holding the only
    /// slot, when the requeued waiter started.
    waiter_returned: Mutex<Option<Instant>>,
    blocker_started: Mutex<Option<Instant>>,
    waiter_requeued: Mutex<Option<Instant>>,
}

fn count(text: &str, cluster: &str) -> u64 {
    let prefix =
        format!(r#"mcr_queue_wait_seconds_count{{controller="waits",cluster="{cluster}"}} "#);
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.parse().unwrap())
        .unwrap_or_else(|| panic!("no queue-wait count for {cluster}:\n{text}"))
}

#[tokio::test]
async fn a_request_held_behind_a_busy_slot_is_observed_once_with_its_wait() {
    let env = Env::start(2).await;
    create_cm(env.member("cluster-1").client(), "blocker", "1").await;
    create_cm(env.member("cluster-2").client(), "waiter", "1").await;
    env.mgr.metrics().keep_queue_wait_samples(true);
    let shared = Arc::new(Shared::default());
    let (tx, mut rx) = mpsc::unbounded_channel::<Request<ConfigMap>>();
    let trigger = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let reconcile = move |cm: Arc<ConfigMap>, ctx: Context<Shared>| {
        let tx = tx.clone();
        async move {
            let s = ctx.data();
            let who = format!("{}/{}", ctx.cluster_name(), cm.name_any());
            s.log.push(who.clone());
            let armed = s.armed.load(Ordering::SeqCst);
            if who == "cluster-2/waiter" && armed && !s.requeued.swap(true, Ordering::SeqCst) {
                // Due again in REQUEUE; meanwhile the blocker takes the only slot.
                let blocker = ObjectRef::new("blocker").within("default");
                tx.send(Request::new("cluster-1", blocker)).unwrap();
                *s.waiter_returned.lock().unwrap() = Some(Instant::now());
                return Ok::<_, mcr_core::Error>(Action::requeue(REQUEUE));
            }
            if who == "cluster-2/waiter" && s.requeued.load(Ordering::SeqCst) {
                s.waiter_requeued
                    .lock()
                    .unwrap()
                    .get_or_insert_with(Instant::now);
            }
            if who == "cluster-1/blocker" && armed && !s.blocked.swap(true, Ordering::SeqCst) {
                *s.blocker_started.lock().unwrap() = Some(Instant::now());
                s.gate.notified().await;
            }
            Ok(Action::await_change())
        }
    };
    Controller::new(&env.mgr)
        .named("waits")
        .for_::<ConfigMap>()
        .concurrency(1)
        .reconcile_on(trigger)
        .register(
            reconcile,
            |_, _: &mcr_core::Error, _| Action::await_change(),
            shared.clone(),
        )
        .unwrap();
    let run = env.run();
    eventually("initial reconciles", DEADLINE, || {
        shared.log.contains("cluster-1/blocker") && shared.log.contains("cluster-2/waiter")
    })
    .await;

    shared.armed.store(true, Ordering::SeqCst);
    update_cm(env.member("cluster-2").client(), "waiter", "2").await;
    eventually("the blocker holds the only slot", DEADLINE, || {
        shared.blocker_started.lock().unwrap().is_some()
    })
    .await;
    // The waiter is due by `blocker_started + REQUEUE` at the latest (its requeue was set
    // before the slot went to the blocker); keep it waiting at least HELD past that.
    let blocker_started = shared.blocker_started.lock().unwrap().unwrap();
    tokio::time::sleep_until(blocker_started + REQUEUE + HELD).await;
    let released = Instant::now();
    shared.gate.notify_one();
    eventually("the requeued waiter ran", DEADLINE, || {
        shared.waiter_requeued.lock().unwrap().is_some()
    })
    .await;

    let metrics = env.mgr.metrics();
    let waits = metrics.take_queue_wait_samples("waits", "cluster-2");
    let starts = shared.log.count("cluster-2/");
    assert_eq!(
        waits.len(),
        starts,
        "one sample per reconcile start: {waits:?}"
    );
    let waited = *waits.last().unwrap();
    // Due at (waiter returned, blocker started] + REQUEUE; taken off at (released, requeued run].
    let returned = shared.waiter_returned.lock().unwrap().unwrap();
    let requeued = shared.waiter_requeued.lock().unwrap().unwrap();
    assert!(
        waited >= released - (blocker_started + REQUEUE),
        "waited {waited:?}, held at least {HELD:?} past due"
    );
    assert!(
        waited <= requeued - (returned + REQUEUE),
        "waited {waited:?}: more than the time since it was due"
    );
    let text = metrics.encode();
    assert_eq!(count(&text, "cluster-2"), starts as u64, "{text}");
    assert_eq!(
        count(&text, "cluster-1"),
        shared.log.count("cluster-1/") as u64,
        "observed under the cluster's own label: {text}"
    );
    assert_eq!(
        metrics.take_queue_wait_samples("waits", "cluster-1").len(),
        shared.log.count("cluster-1/")
    );
    env.token.cancel();
    run.await.unwrap().unwrap();
}
