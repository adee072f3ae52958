//! kube-runtime's shapes: a `watcher::Config` per input, `concurrency(0)` as unbounded, and
//! the outcome of every reconcile observable through a hook.

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{ObjectMeta, PostParams},
    runtime::{controller::Action, watcher},
};
use mcr_manager::{Context, Controller, ReconcileResult};

fn labelled(name: &str, app: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_owned(), app.to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_owned(), "1".to_owned())].into()),
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn a_watcher_config_selects_and_pages_the_input() {
    let env = Env::start(1).await;
    let api: Api<ConfigMap> = Api::namespaced(env.member("cluster-1").client(), "default");
    for (name, app) in [("w1", "web"), ("w2", "web"), ("w3", "web"), ("d1", "db")] {
        api.create(&PostParams::default(), &labelled(name, app))
            .await
            .unwrap();
    }
    let log = Log::default();
    // kube-runtime's input configuration, unchanged: a selector, and pages of one object so
    // the initial list takes several requests.
    let config = watcher::Config::default().labels("app=web").page_size(1);
    Controller::new(&env.mgr)
        .for_with::<ConfigMap>(config.into())
        .concurrency(0) // unbounded, as in kube-runtime
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("every selected object", DEADLINE, || {
        ["w1", "w2", "w3"]
            .iter()
            .all(|n| log.contains(&format!("cluster-1/{n}=1")))
    })
    .await;
    // A later selected object arrives after the unselected one: the order proves d1 was
    // never queued.
    api.create(&PostParams::default(), &labelled("w4", "web"))
        .await
        .unwrap();
    eventually("the later object", DEADLINE, || {
        log.contains("cluster-1/w4=1")
    })
    .await;
    assert_eq!(log.count("cluster-1/d1"), 0, "{:?}", log.entries());

    env.token.cancel();
    run.await.unwrap().unwrap();
}

async fn fail_on_bad(cm: Arc<ConfigMap>, _: Context<Log>) -> Res {
    if cm.name_any() == "bad" {
        return Err(mcr_core::Error::Stopped("nowhere".into()));
    }
    Ok(Action::requeue(Duration::from_secs(3600)))
}

#[tokio::test]
async fn every_reconcile_outcome_reaches_the_hook() {
    let env = Env::start(1).await;
    let member = env.member("cluster-1").client();
    create_cm(member.clone(), "good", "1").await;
    create_cm(member, "bad", "1").await;
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let hook_seen = seen.clone();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .on_outcome(move |o| {
            let shown = match o.result {
                ReconcileResult::Ok(action) => format!("{} ok {action:?}", o.request),
                ReconcileResult::Err(err) => format!("{} err {err}", o.request),
                ReconcileResult::Panicked(msg) => format!("{} panic {msg}", o.request),
                _ => format!("{} other", o.request),
            };
            hook_seen.lock().unwrap().push(shown);
        })
        .register(fail_on_bad, retry, Arc::new(Log::default()))
        .unwrap();
    let run = env.run();
    let has = |entry: &str| seen.lock().unwrap().iter().any(|e| e == entry);
    eventually("the success", DEADLINE, || {
        has("cluster://cluster-1/default/good ok Action { requeue_after: Some(3600s) }")
    })
    .await;
    eventually("the failure, retried", DEADLINE, || {
        let failures = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|e| *e == "cluster://cluster-1/default/bad err cluster \"nowhere\" is stopped")
            .count();
        failures >= 2
    })
    .await;

    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[derive(Debug, thiserror::Error)]
#[error("refused {0}")]
struct Refused(String);

/// `run` hands out the reconciler's own error type, as kube-runtime's `controller::Error`
/// does, not its message.
#[tokio::test]
async fn run_yields_the_reconcilers_own_error_type() {
    use futures::StreamExt;
    use mcr_manager::RunError;
    let env = Env::start(1).await;
    create_cm(env.member("cluster-1").client(), "bad", "1").await;
    let errors = Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .run(
            |cm: Arc<ConfigMap>, _: Arc<()>| async move { Err::<Action, _>(Refused(cm.name_any())) },
            |_, _: &Refused, _| Action::requeue(Duration::from_secs(600)),
            |_| (),
        )
        .filter_map(|item| async move { item.err() });
    let mut errors = Box::pin(errors);
    let first = tokio::time::timeout(DEADLINE, errors.next())
        .await
        .expect("an error within the deadline")
        .expect("the stream yields the failure");
    match first {
        RunError::ReconcilerFailed { request, error } => {
            let typed: &Refused = &error;
            assert_eq!(typed.0, "bad");
            assert!(request.contains("cluster-1"), "{request}");
        }
        other => panic!("expected the reconciler's error, got {other}"),
    }
}
