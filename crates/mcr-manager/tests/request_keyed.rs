//! `register with a `Request``: the reconciler runs for a key also when its object is gone, and reads
//! the cache itself; `watches_host_per_cluster` hands each engaged cluster (late ones too)
//! every host object.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::DeleteParams,
    runtime::{controller::Action, reflector::ObjectRef},
};
use mcr_core::Cluster;
use mcr_manager::{Context, Controller, Request};

/// Logs `cluster/name=value` for a cached object and `cluster/name gone` for a missing one.
async fn keyed(req: Request<ConfigMap>, ctx: Context<Log>) -> Res {
    let entry = match ctx.cached(&req.object) {
        Some(cm) => format!("{}/{}={}", req.cluster, req.object.name, value(&cm)),
        None => format!("{}/{} gone", req.cluster, req.object.name),
    };
    assert_eq!(&req.cluster, ctx.cluster_name());
    ctx.data().push(entry);
    Ok(Action::await_change())
}

fn keyed_retry(_: Request<ConfigMap>, _: &mcr_core::Error, _: Context<Log>) -> Action {
    Action::requeue(std::time::Duration::from_millis(20))
}

#[tokio::test]
async fn a_deleted_object_still_reaches_a_request_keyed_reconciler() {
    let env = Env::start(1).await;
    let member = env.member("cluster-1").client();
    create_cm(member.clone(), "doomed", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(keyed, keyed_retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();

    eventually("the object is reconciled", DEADLINE, || {
        log.contains("cluster-1/doomed=1")
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(member, "default");
    api.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deletion is reconciled", DEADLINE, || {
        log.contains("cluster-1/doomed gone")
    })
    .await;

    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_object_keyed_reconciler_still_skips_a_missing_object() {
    let env = Env::start(1).await;
    let member = env.member("cluster-1").client();
    create_cm(member.clone(), "doomed", "1").await;
    create_cm(member.clone(), "marker", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("both reconciled", DEADLINE, || {
        log.contains("cluster-1/doomed=1") && log.contains("cluster-1/marker=1")
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(member.clone(), "default");
    api.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    // A later change is reconciled; the deleted key never reached the reconciler again.
    update_cm(member, "marker", "2").await;
    eventually("the later change", DEADLINE, || {
        log.contains("cluster-1/marker=2")
    })
    .await;
    assert_eq!(log.count("cluster-1/doomed"), 1, "{:?}", log.entries());

    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn host_objects_reach_every_member_including_a_late_one() {
    let mut env = Env::start(1).await;
    create_cm(env.host.client(), "source", "h").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .without_primary_watch()
        .watches_host_per_cluster::<ConfigMap, _>(Default::default(), |src: Arc<ConfigMap>, _| {
            Some(ObjectRef::from_obj(src.as_ref()))
        })
        .register(keyed, keyed_retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();

    // The member has no "source": the host's object triggers the key there anyway.
    eventually("cluster-1 gets the host object's key", DEADLINE, || {
        log.contains("cluster-1/source gone")
    })
    .await;
    assert_eq!(log.count("/source"), 0, "the host is not engaged");

    // A member that joins later is handed the host objects that exist already.
    let late = env.fleet.add("late").await.unwrap();
    create_cm(late.client(), "source", "copy").await;
    env.provider
        .add(Cluster::new("late", late.client()))
        .await
        .unwrap();
    eventually("the late member gets the key", DEADLINE, || {
        log.contains("late/source=copy")
    })
    .await;

    // A host change reaches both.
    update_cm(env.host.client(), "source", "h2").await;
    eventually("both members again", DEADLINE, || {
        log.count("cluster-1/source") >= 2 && log.count("late/source") >= 2
    })
    .await;

    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// Issue 23, item 12: when a member is replaced by a new instance (new credentials or a new
/// server), an object the old instance's cache held and the new one's does not (deleted while
/// the swap happened) still reaches a request-keyed reconciler as a key whose object is gone.
#[tokio::test]
async fn an_object_gone_across_a_replacement_reaches_a_request_keyed_reconciler() {
    let mut env = Env::start(1).await;
    let before = env.member("cluster-1").client();
    create_cm(before.clone(), "doomed", "1").await;
    create_cm(before, "kept", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(keyed, keyed_retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("both reconciled", DEADLINE, || {
        log.contains("cluster-1/doomed=1") && log.contains("cluster-1/kept=1")
    })
    .await;

    // The member's new instance reaches a server where "doomed" no longer exists: the old
    // instance never saw it go.
    let after = env.fleet.add("cluster-1-after").await.unwrap();
    create_cm(after.client(), "kept", "2").await;
    let replacement = Cluster::new("cluster-1", after.client());
    env.provider.want(replacement.clone()).unwrap();
    let engagements = env.provider.engagements();
    tokio::time::timeout(
        DEADLINE,
        engagements.until_active(&"cluster-1".into(), replacement.id()),
    )
    .await
    .expect("the new instance replaces the old one");
    eventually("the new instance is reconciled", DEADLINE, || {
        log.contains("cluster-1/kept=2")
    })
    .await;
    eventually(
        "the object gone across the swap is reconciled",
        DEADLINE,
        || log.contains("cluster-1/doomed gone"),
    )
    .await;

    env.token.cancel();
    run.await.unwrap().unwrap();
}
