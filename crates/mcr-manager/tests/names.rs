//! One name per cluster: the host is its own variant (`<host>` in logs and metrics), and no
//! provider can engage a member that is the host or has the empty name.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::{Aware, Cluster, ClusterName, Error, cluster_not_found};
use mcr_manager::Controller;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn the_host_is_not_the_empty_name_and_cannot_be_engaged() {
    let env = Env::start(1).await;
    create_cm(env.host.client(), "h", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .scope(mcr_manager::ClusterScope::All)
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("the host reconciled under its own name", DEADLINE, || {
        log.contains("<host>/h=1")
    })
    .await;
    let metrics = env.mgr.metrics().encode();
    assert!(
        metrics.contains(
            r#"mcr_reconcile_total{controller="configmap",cluster="<host>",result="success"}"#
        ),
        "{metrics}"
    );

    // A provider engaging "" or the host's name is refused with a clear error.
    let impostor = Cluster::new("x", env.host.client());
    for name in [ClusterName::new(""), ClusterName::host(), "<host>".into()] {
        let err = env
            .mgr
            .engage(CancellationToken::new(), name.clone(), impostor.clone())
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidName { cluster: ref n, .. } if *n == name),
            "{name:?}: {err}"
        );
    }
    assert_eq!(env.mgr.engaged_clusters(), [ClusterName::new("cluster-1")]);

    // The empty name is no longer the host.
    let err = env.mgr.cluster("").await.unwrap_err();
    assert!(cluster_not_found(&err).is_some(), "{err}");
    assert!(env.mgr.fleet().get(&"".into()).is_err());
    let host = env.mgr.cluster(ClusterName::host()).await.unwrap();
    assert!(host.same_instance(env.mgr.host()));
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_cluster_is_known_by_the_name_it_was_engaged_under() {
    let env = Env::start(1).await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    // What the multi provider does: a child's cluster `dev`, engaged as `kind#dev`.
    let dev = mcr_envtest::TestCluster::start("dev").await.unwrap();
    create_cm(dev.client(), "x", "1").await;
    let cluster = Cluster::new("dev", dev.client());
    let token = CancellationToken::new();
    cluster.cache().start(token.child_token());
    env.mgr
        .engage(token.clone(), "kind#dev".into(), cluster.clone())
        .unwrap();
    eventually("reconciled as kind#dev", DEADLINE, || {
        log.contains("kind#dev/x=1")
    })
    .await;
    // The cache and its informers name it as engaged, in errors too.
    assert_eq!(cluster.cache().cluster(), "kind#dev");
    let informer = cluster.cache().informer::<ConfigMap>();
    token.cancel();
    mcr_envtest::wait::eventually_async("stopped, as kind#dev", DEADLINE, || {
        let informer = informer.clone();
        async move {
            let res = informer
                .wait_for_sync(std::time::Duration::from_millis(10))
                .await;
            matches!(res, Err(Error::Stopped(ref n)) if n == "kind#dev")
        }
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}
