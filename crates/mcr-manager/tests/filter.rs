//! A `cluster_filter` applies to provider clusters; the host is filtered only when asked.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::Controller;

async fn run_with_filter(filter_host: bool) -> Log {
    let env = Env::start(2).await;
    create_cm(env.host.client(), "h", "1").await;
    for c in ["cluster-1", "cluster-2"] {
        create_cm(env.member(c).client(), "m", "1").await;
    }
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .include_host(true)
        .cluster_filter(|name, _| name.as_str() == "cluster-2")
        .filter_host(filter_host)
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("the admitted member", DEADLINE, || {
        log.contains("cluster-2/m=1")
    })
    .await;
    if !filter_host {
        eventually("the host", DEADLINE, || log.contains("<host>/h=1")).await;
    }
    // A later object in the admitted member: everything queued before it is done.
    create_cm(env.member("cluster-2").client(), "later", "1").await;
    eventually("the later object", DEADLINE, || {
        log.contains("cluster-2/later=1")
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(log.count("cluster-1/"), 0, "{:?}", log.entries());
    log
}

#[tokio::test]
async fn the_filter_does_not_filter_the_host_unless_asked() {
    let log = run_with_filter(false).await;
    assert!(log.contains("<host>/h=1"), "{:?}", log.entries());
}

#[tokio::test]
async fn filter_host_applies_the_filter_to_the_host() {
    let log = run_with_filter(true).await;
    assert_eq!(log.count("<host>/h"), 0, "{:?}", log.entries());
}
