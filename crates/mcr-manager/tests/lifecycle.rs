//! Fairness, graceful shutdown, leader election and the HTTP endpoint.

mod common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::*;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap};
use kube::{Api, ResourceExt, runtime::controller::Action};
use mcr_envtest::TestCluster;
use mcr_manager::{Context, Controller, LeaderElection, Manager};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::{Notify, oneshot},
};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_flooded_cluster_does_not_starve_a_quiet_one() {
    if !mcr_envtest::require_emulator(
        "a real API server keeps ConfigMaps of its own in kube-system, which this count includes",
    ) {
        return;
    }
    let env = Env::start(2).await;
    let flood = env.member("cluster-1").client();
    for i in 0..150 {
        create_cm(flood.clone(), &format!("flood-{i}"), "x").await;
    }
    create_cm(env.member("cluster-2").client(), "quiet", "x").await;
    let log = Log::default();
    let gate = Arc::new(Notify::new());
    let first = Arc::new(AtomicBool::new(true));
    let (g, f) = (gate.clone(), first.clone());
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .concurrency(1)
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let (g, f) = (g.clone(), f.clone());
                async move {
                    if f.swap(false, Ordering::SeqCst) {
                        g.notified().await; // hold the only slot until both clusters queued
                    }
                    record(cm, ctx).await
                }
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("both clusters have queued work", DEADLINE, || {
        depth(&env.mgr, "cluster-1") >= 100
            && (depth(&env.mgr, "cluster-2") == 1 || log.count("cluster-2/") == 1)
    })
    .await;
    gate.notify_one();
    eventually("everything reconciled", DEADLINE, || {
        log.entries().len() == 151
    })
    .await;
    let position = log
        .entries()
        .iter()
        .position(|e| e == "cluster-2/quiet=x")
        .unwrap();
    assert!(
        position <= 2,
        "the quiet cluster waited behind the flood: position {position}"
    );
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_lets_the_in_flight_reconcile_finish_before_returning() {
    let env = Env::start(1).await;
    create_cm(env.member("cluster-1").client(), "busy", "x").await;
    let events: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let (release, released) = oneshot::channel::<()>();
    let released = Arc::new(Mutex::new(Some(released)));
    let (ev, rx) = (events.clone(), released.clone());
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            move |_: Arc<ConfigMap>, _: Context<Log>| {
                let (ev, rx) = (ev.clone(), rx.lock().unwrap().take());
                async move {
                    if let Some(rx) = rx {
                        ev.lock().unwrap().push("reconcile-started");
                        let _ = rx.await;
                        tokio::task::yield_now().await;
                        ev.lock().unwrap().push("reconcile-finished");
                    }
                    Ok(Action::await_change())
                }
            },
            retry,
            Arc::new(Log::default()),
        )
        .unwrap();
    let run = tokio::spawn({
        let (mgr, token, ev) = (env.mgr.clone(), env.token.clone(), events.clone());
        async move {
            let result = mgr.run_until(token).await;
            ev.lock().unwrap().push("run-returned");
            result
        }
    });
    eventually("reconcile in flight", DEADLINE, || {
        events.lock().unwrap().contains(&"reconcile-started")
    })
    .await;
    env.token.cancel();
    // Give a manager that does not wait every chance to return while the reconcile is held.
    for _ in 0..100 {
        tokio::task::yield_now().await;
        assert!(
            !events.lock().unwrap().contains(&"run-returned"),
            "run_until returned while a reconcile was in flight"
        );
    }
    let _ = release.send(()); // fails only if the reconcile was dropped: caught below
    run.await.unwrap().unwrap();
    assert_eq!(
        *events.lock().unwrap(),
        ["reconcile-started", "reconcile-finished", "run-returned"],
        "the in-flight reconcile must finish before run_until returns"
    );
}

#[tokio::test]
async fn a_panicking_error_policy_is_retried_and_the_manager_keeps_going() {
    let env = Env::start(1).await;
    create_cm(env.member("cluster-1").client(), "flaky", "1").await;
    let log = Log::default();
    let failed = Arc::new(AtomicBool::new(false));
    let f = failed.clone();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let f = f.clone();
                async move {
                    if !f.swap(true, Ordering::SeqCst) {
                        return Err(std::io::Error::other("first attempt fails"));
                    }
                    ctx.data()
                        .push(format!("{}/{}", ctx.cluster_name(), cm.name_any()));
                    Ok(Action::await_change())
                }
            },
            |_: Arc<ConfigMap>, _: &std::io::Error, _: Context<Log>| -> Action {
                panic!("error policy bug")
            },
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("retried after the policy panicked", DEADLINE, || {
        log.contains("cluster-1/flaky")
    })
    .await;
    assert!(failed.load(Ordering::SeqCst));
    assert!(!run.is_finished(), "the manager stopped");
    env.token.cancel();
    run.await.unwrap().unwrap();
}

fn elected(host: &TestCluster, id: &str, log: &Log) -> Manager {
    let le = LeaderElection::new("mcr-test", "default")
        .identity(id)
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

async fn holder(host: &TestCluster) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(host.client(), "default");
    api.get_opt("mcr-test")
        .await
        .unwrap()?
        .spec?
        .holder_identity
}

#[tokio::test]
async fn leadership_hands_over_between_two_managers() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let (log_a, log_b) = (Log::default(), Log::default());
    let (a, b) = (elected(&host, "a", &log_a), elected(&host, "b", &log_b));
    let (stop_a, stop_b) = (CancellationToken::new(), CancellationToken::new());
    let run_a = tokio::spawn({
        let (a, t) = (a.clone(), stop_a.clone());
        async move { a.run_until(t).await }
    });
    eventually("a leads", DEADLINE, || a.is_leader()).await;
    let run_b = tokio::spawn({
        let (b, t) = (b.clone(), stop_b.clone());
        async move { b.run_until(t).await }
    });
    create_cm(host.client(), "one", "1").await;
    eventually("a reconciles", DEADLINE, || log_a.contains("<host>/one=1")).await;
    assert_eq!(holder(&host).await.as_deref(), Some("a"));
    assert!(!b.is_leader());
    assert_eq!(log_b.entries().len(), 0, "the standby runs no controller");

    stop_a.cancel();
    run_a.await.unwrap().unwrap();
    eventually("b takes over", DEADLINE, || b.is_leader()).await;
    eventually("b reconciles", DEADLINE, || log_b.contains("<host>/one=1")).await;
    assert_eq!(holder(&host).await.as_deref(), Some("b"));
    stop_b.cancel();
    run_b.await.unwrap().unwrap();
}

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn serves_metrics_health_and_readiness() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    create_cm(host.client(), "local", "1").await;
    let mgr = Manager::builder(host.client())
        .metrics_address(([127, 0, 0, 1], 0).into())
        .build();
    let log = Log::default();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, t) = (mgr.clone(), token.clone());
        async move { mgr.run_until(t).await }
    });
    eventually(
        "host reconciled (no provider: host included)",
        DEADLINE,
        || log.contains("<host>/local=1"),
    )
    .await;
    let addr = mgr.http_addr().unwrap();
    assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
    eventually("ready", DEADLINE, || mgr.unsynced_clusters().is_empty()).await;
    assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
    let metrics = get(addr, "/metrics").await;
    assert!(
        metrics.contains(
            r#"mcr_reconcile_total{controller="configmap",cluster="<host>",result="success"}"#
        ),
        "{metrics}"
    );
    assert!(get(addr, "/nope").await.starts_with("HTTP/1.1 404"));
    token.cancel();
    run.await.unwrap().unwrap();
}
