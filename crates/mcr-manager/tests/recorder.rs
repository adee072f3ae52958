//! `ctx.recorder()`: Events published into the cluster being reconciled, reported by the
//! controller, repeats aggregated into a series, and a member that refuses them costs the
//! reconcile nothing.

mod common;

use std::{sync::Arc, time::Duration};

use common::*;
use k8s_openapi::api::{core::v1::ConfigMap, events::v1::Event as K8sEvent};
use kube::{
    Api,
    runtime::{
        controller::Action,
        events::{Event, EventType},
    },
};
use mcr_envtest::Partition;
use mcr_manager::{Context, Controller, RecorderError};

fn synced() -> Event {
    Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("seen by the recorder test".into()),
        action: "Sync".into(),
        secondary: None,
    }
}

/// Publishes the same event twice per reconcile; logs `cluster/name ok` or the error.
async fn announce(cm: Arc<ConfigMap>, ctx: Context<Log>) -> Res {
    let name = cm.metadata.name.clone().unwrap_or_default();
    for _ in 0..2 {
        let outcome = match ctx.recorder().publish_for(&synced(), cm.as_ref()).await {
            Ok(()) => "ok".to_owned(),
            Err(RecorderError::Timeout { .. }) => "timeout".to_owned(),
            Err(err) => format!("error {err}"),
        };
        ctx.data()
            .push(format!("{}/{name} {outcome}", ctx.cluster_name()));
    }
    Ok(Action::await_change())
}

async fn events_about(client: kube::Client, name: &str) -> Vec<K8sEvent> {
    let api: Api<K8sEvent> = Api::namespaced(client, "default");
    let list = api.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

#[tokio::test]
async fn events_land_in_the_reconciled_cluster_as_one_series() {
    let env = Env::start(2).await;
    create_cm(env.member("cluster-1").client(), "one", "1").await;
    create_cm(env.member("cluster-2").client(), "two", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .named("announcer")
        .register(announce, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("both published twice", DEADLINE, || {
        log.count("cluster-1/one ok") == 2 && log.count("cluster-2/two ok") == 2
    })
    .await;

    // Each Event is in the object's own cluster only, reported by the controller, and the
    // repeat is aggregated into a series of 2.
    for (member, own, other) in [("cluster-1", "one", "two"), ("cluster-2", "two", "one")] {
        let client = env.member(member).client();
        let own_events = events_about(client.clone(), own).await;
        assert_eq!(own_events.len(), 1, "{member}: {own_events:?}");
        let event = &own_events[0];
        assert_eq!(event.reporting_controller.as_deref(), Some("announcer"));
        assert_eq!(event.reason.as_deref(), Some("Synced"));
        assert_eq!(event.series.as_ref().map(|s| s.count), Some(2), "{event:?}");
        assert!(events_about(client, other).await.is_empty());
    }
    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// Publishes once per reconcile and comes back every 100 ms.
async fn announce_often(cm: Arc<ConfigMap>, ctx: Context<Log>) -> Res {
    let name = cm.metadata.name.clone().unwrap_or_default();
    let outcome = match ctx.recorder().publish_for(&synced(), cm.as_ref()).await {
        Ok(()) => "ok",
        Err(RecorderError::Timeout { .. }) => "timeout",
        Err(_) => "error",
    };
    ctx.data()
        .push(format!("{}/{name} {outcome}", ctx.cluster_name()));
    Ok(Action::requeue(Duration::from_millis(100)))
}

#[tokio::test]
async fn a_member_that_hangs_on_events_does_not_stall_the_reconcile() {
    let env = Env::start(1).await;
    let member = env.member("cluster-1");
    create_cm(member.client(), "one", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(announce_often, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("published", DEADLINE, || log.contains("cluster-1/one ok")).await;

    // Every new request to the member hangs now: the publish gives up at its bound and the
    // reconcile goes on (it would otherwise wait for the client's 300 s read timeout).
    member.partition(Partition::Hang);
    eventually("the publish gave up, the reconcile ended", DEADLINE, || {
        log.contains("cluster-1/one timeout")
    })
    .await;
    member.heal();
    env.token.cancel();
    run.await.unwrap().unwrap();
}
