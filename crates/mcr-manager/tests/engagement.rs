//! Engagement edge cases: clusters that cannot sync, instances replaced under the same name,
//! clusters leaving with queued work, and controllers added after clusters were engaged.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{ResourceExt, runtime::controller::Action};
use mcr_core::{Aware, Cluster, ClusterName};
use mcr_envtest::{Partition, TestCluster};
use mcr_manager::{Context, Controller, Manager};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_cluster_that_cannot_sync_is_reported_not_fatal_and_catches_up_after_heal() {
    let env = Env::start(1).await;
    let stuck = TestCluster::start("stuck").await.unwrap();
    create_cm(stuck.client(), "waiting", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    create_cm(env.member("cluster-1").client(), "before", "1").await;
    eventually("cluster-1 reconciled", DEADLINE, || {
        log.contains("cluster-1/before=1")
    })
    .await;

    // Engaged by hand (a provider would wait for the sync first): its list request hangs.
    stuck.partition(Partition::Hang);
    let engagement = CancellationToken::new();
    let cluster = Cluster::new("stuck", stuck.client());
    cluster.cache().start(engagement.child_token());
    env.mgr
        .engage(engagement.clone(), ClusterName::new("stuck"), cluster)
        .unwrap();
    eventually(
        "the stuck cluster is reported as not synced",
        DEADLINE,
        || env.mgr.unsynced_clusters() == vec![ClusterName::new("stuck")],
    )
    .await;

    // Not fatal: the manager runs on and the other cluster keeps reconciling.
    create_cm(env.member("cluster-1").client(), "during", "1").await;
    eventually("cluster-1 still reconciled", DEADLINE, || {
        log.contains("cluster-1/during=1")
    })
    .await;
    assert!(
        !run.is_finished(),
        "an unsynced cluster stopped the manager"
    );
    assert_eq!(env.mgr.unsynced_clusters(), vec![ClusterName::new("stuck")]);
    assert_eq!(log.count("stuck/"), 0, "nothing reconciled before the sync");

    stuck.heal();
    eventually("the stuck cluster's objects reconciled", DEADLINE, || {
        log.contains("stuck/waiting=1")
    })
    .await;
    eventually("ready", DEADLINE, || env.mgr.unsynced_clusters().is_empty()).await;
    create_cm(stuck.client(), "after", "1").await;
    eventually("its watch works", DEADLINE, || {
        log.contains("stuck/after=1")
    })
    .await;

    env.token.cancel();
    run.await.unwrap().unwrap();
    engagement.cancel();
}

/// Records `cluster/name=value@instance`, the instance being the client's cluster id.
async fn record_instance(cm: Arc<ConfigMap>, ctx: Context<Log>) -> Res {
    ctx.data().push(format!(
        "{}/{}={}@{}",
        ctx.cluster_name(),
        cm.name_any(),
        value(&cm),
        ctx.current_cluster().id()
    ));
    Ok(Action::await_change())
}

#[tokio::test]
async fn a_new_instance_under_the_same_name_replaces_the_old_one() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let a = TestCluster::start("a").await.unwrap();
    let b = TestCluster::start("b").await.unwrap();
    create_cm(a.client(), "shared", "from-a").await;
    create_cm(b.client(), "shared", "from-b").await;
    let mgr = Manager::new(host.client(), None);
    let log = Log::default();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .scope(mcr_manager::ClusterScope::Provider)
        .register(record_instance, retry, Arc::new(log.clone()))
        .unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });

    let (old, new) = (Cluster::new("x", a.client()), Cluster::new("x", b.client()));
    let (old_id, new_id) = (old.id(), new.id());
    let (token_a, token_b) = (CancellationToken::new(), CancellationToken::new());
    old.cache().start(token_a.child_token());
    new.cache().start(token_b.child_token());
    mgr.engage(token_a.clone(), ClusterName::new("x"), old)
        .unwrap();
    eventually("A's object reconciled as x", DEADLINE, || {
        log.contains(&format!("x/shared=from-a@{old_id}"))
    })
    .await;

    // Swap: B's instance under the same name; A's token is NOT cancelled.
    mgr.engage(token_b.clone(), ClusterName::new("x"), new.clone())
        .unwrap();
    eventually("B's object reconciled as x", DEADLINE, || {
        log.contains(&format!("x/shared=from-b@{new_id}"))
    })
    .await;
    let swapped = log.entries().len();
    assert!(mgr.cluster("x").await.unwrap().same_instance(&new));

    // Changes in A after the swap trigger nothing (its watches stopped); B's still do.
    update_cm(a.client(), "shared", "a-again").await;
    create_cm(a.client(), "a-late", "1").await;
    create_cm(b.client(), "b-late", "1").await;
    eventually("B's new object reconciled", DEADLINE, || {
        log.contains(&format!("x/b-late=1@{new_id}"))
    })
    .await;
    let after: Vec<String> = log.entries().split_off(swapped);
    assert!(
        after.iter().all(|e| e.ends_with(&format!("@{new_id}"))),
        "reconciled against the old instance after the swap: {after:?}"
    );
    assert!(
        !after
            .iter()
            .any(|e| e.starts_with("x/shared=") || e.contains("a-late")),
        "an event of the old instance triggered a reconcile: {after:?}"
    );

    token.cancel();
    run.await.unwrap().unwrap();
    token_a.cancel();
    token_b.cancel();
}

#[tokio::test]
async fn disengaging_drops_the_clusters_pending_requests() {
    if !mcr_envtest::require_emulator(
        "a real API server keeps ConfigMaps of its own in kube-system, which this count includes",
    ) {
        return;
    }
    let env = Env::start(2).await;
    for i in 0..20 {
        create_cm(env.member("cluster-1").client(), &format!("cm-{i}"), "1").await;
    }
    let log = Log::default();
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .concurrency(1)
        .register(
            move |cm: Arc<ConfigMap>, ctx: Context<Log>| {
                let g = g.clone();
                async move {
                    let me = format!("{}/{}", ctx.cluster_name(), cm.name_any());
                    let first = ctx.data().count("start cluster-1/") == 0;
                    ctx.data().push(format!("start {me}"));
                    if first && me.starts_with("cluster-1/") {
                        g.notified().await; // the only slot is held: the rest of cluster-1 queues
                        ctx.data().push(format!("finished {me}"));
                    }
                    Ok::<_, mcr_core::Error>(Action::await_change())
                }
            },
            retry,
            Arc::new(log.clone()),
        )
        .unwrap();
    let run = env.run();
    eventually(
        "cluster-1 has one running and the rest queued",
        DEADLINE,
        || log.count("start cluster-1/") == 1 && depth(&env.mgr, "cluster-1") == 19,
    )
    .await;

    assert!(env.provider.remove(&ClusterName::new("cluster-1")));
    eventually("the controller let cluster-1 go", DEADLINE, || {
        !env.mgr
            .metrics()
            .encode()
            .contains(r#"cluster="cluster-1""#)
    })
    .await;
    create_cm(env.member("cluster-2").client(), "probe", "1").await;
    gate.notify_one();
    // With one slot, the probe runs only after the held reconcile was cancelled (its cluster
    // left) and the queue was asked for the next key: any cluster-1 request left would have
    // started by then.
    eventually("the other cluster's request ran", DEADLINE, || {
        log.contains("start cluster-2/probe")
    })
    .await;
    assert_eq!(
        log.count("start cluster-1/"),
        1,
        "a request of the disengaged cluster started: {:?}",
        log.entries()
    );
    assert_eq!(
        log.count("finished cluster-1/"),
        0,
        "the running one was cancelled when its cluster left"
    );

    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_controller_added_later_gets_every_engaged_cluster() {
    let env = Env::start(2).await;
    for c in ["cluster-1", "cluster-2"] {
        create_cm(env.member(c).client(), "there", c).await;
    }
    let run = env.run();
    eventually("both clusters engaged", DEADLINE, || {
        env.mgr.engaged_clusters().len() == 2
    })
    .await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    for c in ["cluster-1", "cluster-2"] {
        eventually("reconciled by the late controller", DEADLINE, || {
            log.contains(&format!("{c}/there={c}"))
        })
        .await;
    }
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_context_names_the_cluster_as_engaged_not_as_built() {
    // Under the multi provider a cluster built as "dev" is engaged as "kind#dev": the reconciler
    // must see the engaged name, the one `Manager::cluster` answers to.
    let env = Env::start(0).await;
    let member = TestCluster::start("dev").await.unwrap();
    create_cm(member.client(), "settings", "1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    let cluster = Cluster::new("dev", member.client());
    let token = CancellationToken::new();
    cluster.cache().start(token.child_token());
    env.mgr
        .engage(token, ClusterName::new("kind#dev"), cluster)
        .unwrap();
    eventually("reconciled under the engaged name", DEADLINE, || {
        log.contains("kind#dev/settings=1")
    })
    .await;
    assert!(
        !log.contains("dev/settings=1"),
        "reconciled under the built name"
    );
    assert!(env.mgr.cluster("kind#dev").await.is_ok());
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_panicking_mapper_drops_its_event_and_the_controller_keeps_going() {
    let env = Env::start(1).await;
    let member = env.member("cluster-1").client();
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .watches::<k8s_openapi::api::core::v1::Secret, _>(|secret, _cluster| {
            assert!(secret.name_any() != "boom", "mapper bug");
            Some(
                kube::runtime::reflector::ObjectRef::<ConfigMap>::new(&secret.name_any())
                    .within("default"),
            )
        })
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(member.clone(), "default");
    let secret = |name: &str| k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets
        .create(&Default::default(), &secret("boom"))
        .await
        .unwrap();
    // Events after the panic still flow, through the same input and through the primary one.
    create_cm(member.clone(), "after", "1").await;
    eventually("cluster-1 reconciled after the panic", DEADLINE, || {
        log.contains("cluster-1/after=1")
    })
    .await;
    create_cm(member.clone(), "mapped", "1").await;
    eventually("mapped reconciled once", DEADLINE, || {
        log.count("cluster-1/mapped=1") >= 1
    })
    .await;
    secrets
        .create(&Default::default(), &secret("mapped"))
        .await
        .unwrap();
    eventually("the mapper still maps", DEADLINE, || {
        log.count("cluster-1/mapped=1") >= 2
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// The cache is started in one place (`Clusters`): a cluster handed to the manager with a cache
/// nobody started is refused with an error that says what to do, not engaged to never sync.
#[tokio::test]
async fn a_cluster_whose_cache_is_not_started_is_refused() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start("member").await.unwrap();
    let mgr = Manager::new(host.client(), None);
    let err = mgr
        .engage(
            CancellationToken::new(),
            ClusterName::new("member"),
            Cluster::new("member", member.client()),
        )
        .unwrap_err();
    let chain = mcr_core::ErrorChain(&err).to_string();
    assert!(
        chain.contains("\"member\"") && chain.contains("Engagements::add"),
        "{chain}"
    );
    assert!(mgr.engaged_clusters().is_empty());
    // Through the manager's table, the same cluster is engaged.
    let token = CancellationToken::new();
    mgr.engagements()
        .add(&token, Cluster::new("member", member.client()))
        .await
        .unwrap();
    assert_eq!(mgr.engaged_clusters(), [ClusterName::new("member")]);
    token.cancel();
}

/// A new instance that the reconciled type's filter refuses is only watched, and one it
/// admits is reconciled: either way the instance it replaced stops, though its engager keeps
/// its token (engaging by hand). Instance `a` is reconciled, `b` (refused) only watched,
/// `c` (admitted again) reconciled.
#[tokio::test]
async fn an_instance_that_leaves_the_reconciled_scope_is_only_watched_and_back() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, ObjectMeta, PostParams};
    use mcr_manager::{ClusterScope, Request, WatchOptions};

    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let (one, two) = (
        TestCluster::start("one").await.unwrap(),
        TestCluster::start("two").await.unwrap(),
    );
    create_cm(one.client(), "shared", "from-one").await;
    create_cm(two.client(), "shared", "from-two").await;
    let (a, b, c) = (
        Cluster::new("x", one.client()),
        Cluster::new("x", two.client()),
        Cluster::new("x", one.client()),
    );
    let admitted = [a.id(), c.id()];
    let mgr = Manager::new(host.client(), None);
    let log = Log::default();
    let mapped = log.clone();
    Controller::new(&mgr)
        .for_with::<ConfigMap>(
            WatchOptions::new().cluster_filter(move |_, cluster| admitted.contains(&cluster.id())),
        )
        .watches_with::<Secret, _>(
            WatchOptions::new(),
            move |s: Arc<Secret>, _: &ClusterName| {
                mapped.push(format!("mapped {}", s.name_any()));
                None::<Request<ConfigMap>>
            },
        )
        .scope(ClusterScope::Provider)
        .register(record_instance, retry, Arc::new(log.clone()))
        .unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });
    let secret = |client: kube::Client, name: &str| {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        async move {
            Api::<Secret>::namespaced(client, "default")
                .create(&PostParams::default(), &secret)
                .await
                .unwrap();
        }
    };
    let (a_id, c_id) = (a.id(), c.id());
    let tokens = [(); 3].map(|()| CancellationToken::new());
    for (cluster, token) in [&a, &b, &c].into_iter().zip(&tokens) {
        cluster.cache().start(token.child_token());
    }

    mgr.engage(tokens[0].clone(), ClusterName::new("x"), a)
        .unwrap();
    eventually("a reconciled", DEADLINE, || {
        log.contains(&format!("x/shared=from-one@{a_id}"))
    })
    .await;

    // b is only watched; a, replaced, is reconciled no more (its token is still live).
    mgr.engage(tokens[1].clone(), ClusterName::new("x"), b)
        .unwrap();
    secret(two.client(), "in-b").await;
    eventually("b watched", DEADLINE, || log.contains("mapped in-b")).await;
    let swapped = log.entries().len();
    update_cm(one.client(), "shared", "one-again").await;
    secret(one.client(), "in-a").await;
    secret(two.client(), "in-b-later").await;
    eventually("b watched still", DEADLINE, || {
        log.contains("mapped in-b-later")
    })
    .await;
    let before_c = log.entries().len();

    // c is reconciled; b, replaced, is watched no more (its token is still live).
    mgr.engage(tokens[2].clone(), ClusterName::new("x"), c)
        .unwrap();
    eventually("c reconciled", DEADLINE, || {
        log.contains(&format!("x/shared=one-again@{c_id}"))
    })
    .await;
    secret(two.client(), "in-b-after-c").await;
    update_cm(one.client(), "shared", "one-last").await;
    eventually("c reconciles the later change", DEADLINE, || {
        log.contains(&format!("x/shared=one-last@{c_id}"))
    })
    .await;
    let entries = log.entries();
    let (b_only, after_c) = (&entries[swapped..before_c], &entries[before_c..]);
    assert!(
        !entries[swapped..]
            .iter()
            .any(|e| e.ends_with(&format!("@{a_id}"))),
        "the replaced instance a was reconciled after the swap: {entries:?}"
    );
    // (c watches the cluster a ran against: it lists `in-a` itself.)
    assert!(
        !b_only.contains(&"mapped in-a".to_string()),
        "the replaced instance a was still watched: {b_only:?}"
    );
    assert!(
        !after_c.contains(&"mapped in-b-after-c".to_string()),
        "the replaced instance b was still watched: {after_c:?}"
    );

    token.cancel();
    run.await.unwrap().unwrap();
    for token in tokens {
        token.cancel();
    }
}
