//! A `cluster_filter` picks among provider clusters; whether the host is watched is said by the
//! controller's scope alone.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{ClusterScope, Controller};

async fn run_with_filter(scope: ClusterScope) -> Log {
    let env = Env::start(2).await;
    create_cm(env.host.client(), "h", "1").await;
    for c in ["cluster-1", "cluster-2"] {
        create_cm(env.member(c).client(), "m", "1").await;
    }
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .scope(scope)
        .cluster_filter(|name, _| name.as_str() == "cluster-2")
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("the admitted member", DEADLINE, || {
        log.contains("cluster-2/m=1")
    })
    .await;
    if scope.includes(true) {
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
async fn the_filter_does_not_filter_the_host() {
    let log = run_with_filter(ClusterScope::All).await;
    assert!(log.contains("<host>/h=1"), "{:?}", log.entries());
}

#[tokio::test]
async fn the_scope_alone_leaves_the_host_out() {
    let log = run_with_filter(ClusterScope::Provider).await;
    assert_eq!(log.count("<host>/h"), 0, "{:?}", log.entries());
}

/// Issue 26, item 5: a cluster filter per input. The reconciled type is watched (and
/// reconciled) only in `cluster-2`; a second input maps `Secret`s of `cluster-1` only. A
/// refused cluster does not even get the input's informer.
#[tokio::test]
async fn a_per_input_filter_limits_that_input_alone() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::{
        Api,
        api::{ObjectMeta, PostParams},
        runtime::reflector::ObjectRef,
    };
    use mcr_manager::{Request, WatchOptions};

    let env = Env::start(2).await;
    for c in ["cluster-1", "cluster-2"] {
        create_cm(env.member(c).client(), "m", "1").await;
    }
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_with::<ConfigMap>(
            WatchOptions::new().cluster_filter(|name, _| name.as_str() == "cluster-2"),
        )
        .watches_with::<Secret, _>(
            WatchOptions::new().cluster_filter(|name, _| name.as_str() == "cluster-1"),
            |secret: Arc<Secret>, cluster: &mcr_core::ClusterName| {
                // Every Secret asks for the ConfigMap `m` of cluster-2.
                let _ = secret;
                let _ = cluster;
                Some(Request::new(
                    mcr_core::ClusterName::new("cluster-2"),
                    ObjectRef::<ConfigMap>::new("m").within("default"),
                ))
            },
        )
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("cluster-2 reconciled", DEADLINE, || {
        log.contains("cluster-2/m=1")
    })
    .await;

    // A Secret in cluster-1 (admitted by the Secret input) triggers cluster-2's ConfigMap again;
    // one in cluster-2 (refused by it) does not.
    let secret = |name: &str| Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    for c in ["cluster-1", "cluster-2"] {
        Api::<Secret>::namespaced(env.member(c).client(), "default")
            .create(&PostParams::default(), &secret(c))
            .await
            .unwrap();
    }
    eventually("the Secret of cluster-1 mapped", DEADLINE, || {
        log.count("cluster-2/m=1") >= 2
    })
    .await;
    update_cm(env.member("cluster-2").client(), "m", "2").await;
    eventually("the later change", DEADLINE, || {
        log.contains("cluster-2/m=2")
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(log.count("cluster-1/"), 0, "{:?}", log.entries());
    assert_eq!(log.count("cluster-2/m=1"), 2, "{:?}", log.entries());
    if !env.member("cluster-1").backend().is_real() {
        assert_eq!(
            env.member("cluster-1").request_count("watch", "configmaps"),
            0
        );
        assert_eq!(env.member("cluster-2").request_count("watch", "secrets"), 0);
        assert_eq!(env.member("cluster-1").request_count("watch", "secrets"), 1);
    }
}
