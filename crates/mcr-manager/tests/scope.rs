//! Per-input cluster scopes (`WatchOptions::scope`): the reconciled type on the host with
//! watched objects on the members, and the reverse; a `cluster_filter` never filters the host
//! unless asked.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, ResourceExt,
    api::{ObjectMeta, PostParams},
    runtime::reflector::ObjectRef,
};
use mcr_core::ClusterName;
use mcr_manager::{ClusterScope, Controller, Request, WatchOptions};

async fn create_secret(client: kube::Client, name: &str) {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client, "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn primary_on_the_host_watched_objects_on_the_members() {
    let env = Env::start(2).await;
    create_cm(env.host.client(), "target", "1").await;
    for c in ["cluster-1", "cluster-2"] {
        // Members' ConfigMaps are outside the reconciled type's scope: never reconciled.
        create_cm(env.member(c).client(), "target", "member").await;
    }
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_with::<ConfigMap>(WatchOptions::new().scope(ClusterScope::Host))
        .watches_with::<Secret, _>(
            WatchOptions::new(),
            |s: Arc<Secret>, member: &ClusterName| {
                assert!(!member.is_host(), "the Secret input watches only members");
                Some(Request::new(
                    ClusterName::host(),
                    ObjectRef::new(&s.name_any()).within("default"),
                ))
            },
        )
        .cluster_filter(|name, _| name.as_str() == "cluster-1")
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("the host's ConfigMap", DEADLINE, || {
        log.count("<host>/target=1") >= 1
    })
    .await;
    let before = log.count("<host>/target=1");
    // A Secret in a member re-triggers the host's ConfigMap (nothing else changed it).
    create_secret(env.member("cluster-1").client(), "target").await;
    eventually("a member's Secret triggers the host", DEADLINE, || {
        log.count("<host>/target=1") > before
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(log.count("cluster-"), 0, "{:?}", log.entries());
}

#[tokio::test]
async fn primary_on_the_members_watched_objects_on_the_host() {
    let env = Env::start(2).await;
    for c in ["cluster-1", "cluster-2"] {
        create_cm(env.member(c).client(), "target", c).await;
    }
    create_cm(env.host.client(), "target", "host").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .watches_with::<Secret, _>(
            WatchOptions::new().scope(ClusterScope::Host),
            |s: Arc<Secret>, host: &ClusterName| {
                assert!(host.is_host(), "the Secret input watches only the host");
                ["cluster-1", "cluster-2"]
                    .map(|m| Request::new(m, ObjectRef::new(&s.name_any()).within("default")))
            },
        )
        // The filter admits no host by name, yet the host's Secrets are still watched:
        // the filter picks provider clusters, the scope alone says where the host is.
        .cluster_filter(|name, _| name.as_str().starts_with("cluster-"))
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    for c in ["cluster-1", "cluster-2"] {
        eventually(c, DEADLINE, || log.count(&format!("{c}/target={c}")) >= 1).await;
    }
    let before = log.count("cluster-2/target=cluster-2");
    create_secret(env.host.client(), "target").await;
    eventually("a host Secret triggers the members", DEADLINE, || {
        log.count("cluster-2/target=cluster-2") > before
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
    // The host's ConfigMap is outside the reconciled type's scope.
    assert_eq!(log.count("<host>/"), 0, "{:?}", log.entries());
}

#[tokio::test]
async fn both_scopes_reconcile_host_and_members() {
    let env = Env::start(1).await;
    create_cm(env.host.client(), "a", "1").await;
    create_cm(env.member("cluster-1").client(), "a", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_with::<ConfigMap>(WatchOptions::new().scope(ClusterScope::All))
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("host and member", DEADLINE, || {
        log.contains("<host>/a=1") && log.contains("cluster-1/a=1")
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}
