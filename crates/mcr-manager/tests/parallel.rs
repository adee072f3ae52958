//! Reconciles of one controller run on every worker of a multi-thread runtime (each on a task
//! of its own), while a key is still never reconciled twice at the same time.

mod common;

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{ResourceExt, runtime::controller::Action};
use mcr_manager::{Context, Controller};

/// What the reconciler of the test saw.
#[derive(Default)]
struct Seen {
    /// Reconciles inside the reconciler right now.
    inside: AtomicUsize,
    /// Whether two reconciles were ever inside at the same moment.
    overlapped: AtomicBool,
    /// `cluster/name` of the reconciles inside right now.
    keys: Mutex<HashSet<String>>,
    /// A key found already inside when its reconcile started.
    same_key_twice: AtomicUsize,
    /// Reconciles that ended.
    runs: AtomicUsize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_run_on_several_threads_at_once_but_never_one_key_twice() {
    let env = Env::start(2).await;
    for member in ["cluster-1", "cluster-2"] {
        for name in ["a", "b", "c"] {
            create_cm(env.member(member).client(), name, "1").await;
        }
    }
    let seen = Arc::new(Seen::default());
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .concurrency(4)
        .register(
            |cm: Arc<ConfigMap>, ctx: Context<Seen>| async move {
                let seen = ctx.data();
                let key = format!("{}/{}", ctx.cluster_name(), cm.name_any());
                if !seen.keys.lock().unwrap().insert(key.clone()) {
                    seen.same_key_twice.fetch_add(1, Ordering::SeqCst);
                }
                if seen.inside.fetch_add(1, Ordering::SeqCst) >= 1 {
                    seen.overlapped.store(true, Ordering::SeqCst);
                }
                // CPU work that holds this thread (no await) until another reconcile is
                // inside too: only a reconcile on another thread can end it early.
                let until = Instant::now() + Duration::from_secs(5);
                while !seen.overlapped.load(Ordering::SeqCst) && Instant::now() < until {
                    std::hint::spin_loop();
                }
                seen.inside.fetch_sub(1, Ordering::SeqCst);
                seen.keys.lock().unwrap().remove(&key);
                seen.runs.fetch_add(1, Ordering::SeqCst);
                // Requeued at once, so every key keeps coming back while others run.
                Ok::<_, std::convert::Infallible>(Action::requeue(Duration::from_millis(1)))
            },
            |_, _, _| Action::await_change(),
            seen.clone(),
        )
        .unwrap();
    let run = env.run();
    eventually(
        "two reconciles computing at the same moment",
        DEADLINE,
        || seen.overlapped.load(Ordering::SeqCst),
    )
    .await;
    eventually("many requeued reconciles", DEADLINE, || {
        seen.runs.load(Ordering::SeqCst) >= 300
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(seen.same_key_twice.load(Ordering::SeqCst), 0);
}
