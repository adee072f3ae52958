//! One controller across a fleet of envtest clusters fed through `ClustersProvider`.

mod common;

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, Resource, ResourceExt,
    api::{ObjectMeta, PostParams},
    runtime::{controller::Action, reflector::ObjectRef},
};
use mcr_core::{Cluster, ClusterName, FieldIndex};
use mcr_manager::{Context, Controller, Request};
use tokio::sync::Notify;

#[tokio::test]
async fn uniform_reconciler_across_three_clusters_and_a_late_one() {
    let mut env = Env::start(3).await;
    for c in env.fleet.clusters() {
        create_cm(c.client(), "existing", "old").await;
    }
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();

    for c in ["cluster-1", "cluster-2", "cluster-3"] {
        eventually("existing objects reconciled", DEADLINE, || {
            log.contains(&format!("{c}/existing=old"))
        })
        .await;
        create_cm(env.member(c).client(), "created", "new").await;
        update_cm(env.member(c).client(), "existing", "changed").await;
    }
    for c in ["cluster-1", "cluster-2", "cluster-3"] {
        eventually("created objects", DEADLINE, || {
            log.contains(&format!("{c}/created=new"))
        })
        .await;
        eventually("updated objects", DEADLINE, || {
            log.contains(&format!("{c}/existing=changed"))
        })
        .await;
    }
    assert_eq!(
        log.count("/"),
        0,
        "the host cluster is not engaged when a provider is set"
    );

    // A cluster engaged after run() started is reconciled too.
    let late = env.fleet.add("late").await.unwrap();
    create_cm(late.client(), "hello", "late").await;
    env.provider
        .add(Cluster::new("late", late.client()))
        .await
        .unwrap();
    eventually("late cluster reconciled", DEADLINE, || {
        log.contains("late/hello=late")
    })
    .await;
    assert!(
        env.mgr
            .engaged_clusters()
            .contains(&ClusterName::new("late"))
    );
    assert!(env.mgr.cluster("late").await.is_ok());
    assert!(mcr_core::cluster_not_found(&env.mgr.cluster("nope").await.unwrap_err()).is_some());

    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn owner_references_resolve_inside_each_cluster() {
    let env = Env::start(2).await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .owns::<Secret>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    for c in ["cluster-1", "cluster-2"] {
        let parent = create_cm(env.member(c).client(), "parent", c).await;
        eventually("parent reconciled", DEADLINE, || {
            log.count(&format!("{c}/parent=")) == 1
        })
        .await;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("child".into()),
                owner_references: Some(vec![parent.controller_owner_ref(&()).unwrap()]),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        let api: Api<Secret> = Api::namespaced(env.member(c).client(), "default");
        api.create(&PostParams::default(), &secret).await.unwrap();
        eventually("owner reconciled by the child", DEADLINE, || {
            log.count(&format!("{c}/parent=")) >= 2
        })
        .await;
    }
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_host_watch_enqueues_into_a_member_cluster() {
    if !mcr_envtest::require_emulator(
        "a real API server keeps ConfigMaps of its own in kube-system, which this count includes",
    ) {
        return;
    }
    let env = Env::start(2).await;
    create_cm(env.member("cluster-2").client(), "target", "x").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .watches_with::<Secret, _>(
            mcr_manager::WatchOptions::new().scope(mcr_manager::ClusterScope::Host),
            |s: Arc<Secret>, _: &ClusterName| {
                Some(Request::new(
                    "cluster-2",
                    ObjectRef::new(&s.name_any()).within("default"),
                ))
            },
        )
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    eventually("target reconciled once", DEADLINE, || {
        log.count("cluster-2/target=") == 1
    })
    .await;
    let api: Api<Secret> = Api::namespaced(env.host.client(), "default");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("target".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    api.create(&PostParams::default(), &secret).await.unwrap();
    eventually("host secret triggered the member", DEADLINE, || {
        log.count("cluster-2/target=") >= 2
    })
    .await;
    assert_eq!(log.count("cluster-1/"), 0);
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn indexes_reach_a_cluster_engaged_later() {
    let mut env = Env::start(1).await;
    let index = FieldIndex::new::<ConfigMap>("by-value", |cm: &ConfigMap| vec![value(cm)]);
    env.mgr.index_field(&index).await.unwrap();
    assert!(
        env.mgr
            .host()
            .cache()
            .list_by_index::<ConfigMap>("by-value", "shared")
            .is_ok(),
        "the host cluster gets the index too when a provider is set"
    );
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            |cm: Arc<ConfigMap>, ctx: Context<Log>| async move {
                let same = ctx
                    .current_cluster()
                    .cache()
                    .list_by_index::<ConfigMap>("by-value", &value(&cm))?;
                ctx.data().push(format!(
                    "{}/{} same={}",
                    ctx.cluster_name(),
                    cm.name_any(),
                    same.len()
                ));
                Ok(Action::await_change())
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    let late = env.fleet.add("late").await.unwrap();
    for name in ["a", "b"] {
        create_cm(late.client(), name, "shared").await;
    }
    env.provider
        .add(Cluster::new("late", late.client()))
        .await
        .unwrap();
    eventually("index used in reconcile", DEADLINE, || {
        log.contains("late/a same=2") && log.contains("late/b same=2")
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn two_controllers_on_one_type_share_one_watch() {
    let env = Env::start(1).await;
    create_cm(env.member("cluster-1").client(), "shared", "1").await;
    let (a, b) = (Log::default(), Log::default());
    for (name, log) in [("first", &a), ("second", &b)] {
        Controller::new(&env.mgr)
            .named(name)
            .for_::<ConfigMap>()
            .register(record, retry, Arc::new(log.clone()))
            .unwrap();
    }
    let dup = Controller::new(&env.mgr)
        .named("first")
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(Log::default()));
    assert!(
        matches!(dup, Err(mcr_manager::Error::Builder(_))),
        "duplicate names are refused"
    );
    let run = env.run();
    eventually("both reconciled", DEADLINE, || {
        a.contains("cluster-1/shared=1") && b.contains("cluster-1/shared=1")
    })
    .await;
    let member = env.member("cluster-1");
    if !member.backend().is_real() {
        assert_eq!(
            member.request_count("watch", "configmaps"),
            1,
            "one watch for two controllers"
        );
        assert_eq!(
            member.request_count("list", "configmaps"),
            1,
            "one initial list"
        );
    }
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_panicking_reconciler_is_retried_and_others_keep_going() {
    let env = Env::start(2).await;
    create_cm(env.member("cluster-1").client(), "boom", "1").await;
    create_cm(env.member("cluster-2").client(), "calm", "1").await;
    let log = Log::default();
    let panicked = Arc::new(AtomicBool::new(false));
    let flag = panicked.clone();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let flag = flag.clone();
                async move {
                    if cm.name_any() == "boom" && !flag.swap(true, Ordering::SeqCst) {
                        panic!("reconciler bug");
                    }
                    record(cm, ctx).await
                }
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("retried after the panic", DEADLINE, || {
        log.contains("cluster-1/boom=1")
    })
    .await;
    eventually("other cluster unaffected", DEADLINE, || {
        log.contains("cluster-2/calm=1")
    })
    .await;
    assert!(panicked.load(Ordering::SeqCst));
    assert!(env.mgr.metrics().encode().contains(r#"result="panic"} 1"#));
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn disengaging_mid_flight_ends_quietly_and_drops_the_cluster() {
    let env = Env::start(2).await;
    create_cm(env.member("cluster-2").client(), "slow", "1").await;
    let log = Log::default();
    let gate = Arc::new(Notify::new());
    let (g, mgr) = (gate.clone(), env.mgr.clone());
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let (g, mgr) = (g.clone(), mgr.clone());
                async move {
                    if cm.name_any() == "slow" {
                        ctx.data()
                            .push(format!("{}/slow started", ctx.cluster_name()));
                        g.notified().await;
                        // The cluster left meanwhile: this fails with ClusterNotFound.
                        mgr.cluster(ctx.cluster_name().clone()).await?;
                    }
                    record(cm, ctx).await
                }
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually("slow reconcile in flight", DEADLINE, || {
        log.contains("cluster-2/slow started")
    })
    .await;
    assert!(env.provider.remove(&ClusterName::new("cluster-2")));
    eventually("cluster-2 disengaged", DEADLINE, || {
        !env.mgr
            .engaged_clusters()
            .contains(&ClusterName::new("cluster-2"))
    })
    .await;
    gate.notify_one();
    // Later events of the removed cluster are not reconciled; others still are.
    create_cm(env.member("cluster-2").client(), "ignored", "1").await;
    create_cm(env.member("cluster-1").client(), "after", "1").await;
    eventually("cluster-1 still reconciled", DEADLINE, || {
        log.contains("cluster-1/after=1")
    })
    .await;
    assert_eq!(
        log.count("cluster-2/slow started"),
        1,
        "no retry after ClusterNotFound"
    );
    assert_eq!(log.count("cluster-2/ignored"), 0);
    assert!(
        !env.mgr
            .metrics()
            .encode()
            .contains(r#"cluster="cluster-2""#)
    );
    env.token.cancel();
    run.await.unwrap().unwrap();
}
