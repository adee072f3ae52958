//! Namespace-scoped watches: `WatchOptions::namespace(s)`, the manager's default namespaces,
//! one shared watch per (type, namespace scope) in each cluster's cache, and reads outside the
//! watched namespaces.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, ResourceExt,
    api::PostParams,
    runtime::{controller::Action, reflector::ObjectRef},
};
use mcr_core::InformerOptions;
use mcr_manager::{Context, Controller, Manager, Request, WatchOptions};

/// Creates namespace `ns` and ConfigMap `name` in it (value `v` = `ns`).
async fn create_in(client: &kube::Client, ns: &str, name: &str) {
    mcr_test_support::create_namespace(client, ns, &[]).await;
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm(name, ns))
        .await
        .unwrap();
}

/// Records `controller:cluster/namespace/name`.
async fn seen(cm: Arc<ConfigMap>, ctx: Context<(Log, &'static str)>) -> Res {
    let (log, controller) = ctx.data().as_ref();
    log.push(format!(
        "{controller}:{}/{}/{}",
        ctx.cluster_name(),
        cm.namespace().unwrap_or_default(),
        cm.name_any()
    ));
    Ok(Action::await_change())
}

fn again(_: Arc<ConfigMap>, _: &mcr_core::Error, _: Context<(Log, &'static str)>) -> Action {
    Action::requeue(std::time::Duration::from_millis(50))
}

/// Two controllers over `[team-a, team-b]` and `[team-a]`: three namespaced watches asked for,
/// two opened (team-a's shared), none cluster-wide; each controller sees its namespaces only.
#[tokio::test]
async fn controllers_asking_for_the_same_namespace_share_its_watch() {
    let env = Env::start(1).await;
    let member = env.member("cluster-1");
    let client = member.client();
    for (ns, name) in [("team-a", "a1"), ("team-b", "b1"), ("other", "o1")] {
        create_in(&client, ns, name).await;
    }
    let log = Log::default();
    Controller::new(&env.mgr)
        .named("both")
        .for_with::<ConfigMap>(WatchOptions::new().namespaces(["team-b", "team-a", "team-b"]))
        .register(seen, again, Arc::new((log.clone(), "both")))
        .unwrap();
    Controller::new(&env.mgr)
        .named("one")
        .for_with::<ConfigMap>(WatchOptions::new().namespace("team-a"))
        .register(seen, again, Arc::new((log.clone(), "one")))
        .unwrap();
    let run = env.run();
    eventually("both controllers saw their namespaces", DEADLINE, || {
        [
            "both:cluster-1/team-a/a1",
            "both:cluster-1/team-b/b1",
            "one:cluster-1/team-a/a1",
        ]
        .iter()
        .all(|e| log.contains(e))
    })
    .await;
    // Created after the watches started: delivered through team-b's watch only.
    create_in(&client, "team-b", "b2").await;
    create_in(&client, "other", "o2").await;
    eventually("a later object in team-b", DEADLINE, || {
        log.contains("both:cluster-1/team-b/b2")
    })
    .await;

    let cluster = env.mgr.fleet().get(&"cluster-1".into()).unwrap();
    let cache = cluster.cache();
    assert_eq!(
        cache.watch_count(Some("team-a")),
        1,
        "team-a's watch is shared"
    );
    assert_eq!(cache.watch_count(Some("team-b")), 1);
    assert_eq!(cache.watch_count(None), 0, "no cluster-wide watch");
    assert_eq!(cache.watch_count(Some("other")), 0);
    // The informer both controllers read: every object of its namespaces, none of `other`.
    let informer = cache.informer_with::<ConfigMap>(
        (),
        InformerOptions {
            namespaces: vec!["team-a".into(), "team-b".into()],
            ..InformerOptions::default()
        },
    );
    assert_eq!(cache.informer_count(), 2, "asking again opened nothing");
    assert_eq!(informer.namespaces(), ["team-a", "team-b"]);
    let mut names: Vec<String> = informer.list().iter().map(|c| c.name_any()).collect();
    names.sort();
    assert_eq!(names, ["a1", "b1", "b2"]);
    assert!(informer.get(Some("team-b"), "b2").is_some());
    assert!(!informer.covers(Some("other")));
    assert!(informer.get(Some("other"), "o1").is_none(), "not watched");
    if !member.backend().is_real() {
        assert_eq!(member.request_count("watch", "configmaps"), 2);
    }
    env.token.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(log.count("both:cluster-1/other"), 0, "{:?}", log.entries());
    assert_eq!(log.count("one:cluster-1/other"), 0, "{:?}", log.entries());
    assert_eq!(log.count("one:cluster-1/team-b"), 0, "{:?}", log.entries());
}

/// What a request-keyed reconciler reads: `cached`, and whether the key's namespace is watched.
async fn read(req: Request<ConfigMap>, ctx: Context<Log>) -> Res {
    let ns = req.object.namespace.clone();
    ctx.data().push(format!(
        "{}/{}: cached={} watched={}",
        ns.as_deref().unwrap_or_default(),
        req.object.name,
        ctx.cached(&req.object).is_some(),
        ctx.is_watched(ns.as_deref()),
    ));
    Ok(Action::await_change())
}

fn read_again(_: Request<ConfigMap>, _: &mcr_core::Error, _: Context<Log>) -> Action {
    Action::requeue(std::time::Duration::from_millis(50))
}

/// The manager's default namespaces apply to every watch that names none, in the host and the
/// members alike, and to field indexes; `all_namespaces` opts out; a cluster-scoped type stays
/// cluster-wide; and a key outside the watched namespaces reads as "not watched", not as "gone".
#[tokio::test]
async fn the_manager_default_applies_to_watches_that_name_no_namespace() {
    let env = Env::start(1).await;
    let client = env.member("cluster-1").client();
    create_in(&client, "team-a", "a1").await;
    create_in(&client, "other", "o1").await;
    let mgr = Manager::builder(env.host.client())
        .provider(env.provider.clone())
        .default_namespaces(["team-a"])
        .build();
    let log = Log::default();
    // Every ConfigMap of any namespace (a second input, cluster-wide) asks for itself, so the
    // reconciler also gets `other/o1`, which the reconciled type's watch does not cover.
    Controller::new(&mgr)
        .named("defaulted")
        .for_::<ConfigMap>()
        .watches_with::<ConfigMap, _>(
            WatchOptions::new().all_namespaces(),
            |cm: Arc<ConfigMap>, _| Some(ObjectRef::from_obj(cm.as_ref())),
        )
        .watches::<Namespace, _>(|_: Arc<Namespace>, _| None::<ObjectRef<ConfigMap>>)
        .register(read, read_again, Arc::new(log.clone()))
        .unwrap();
    // An index that names no namespaces takes the manager's: no cluster-wide watch for it.
    let by_value = mcr_core::FieldIndex::new::<ConfigMap>("v", |cm| vec![value(cm)]);
    mgr.index_field(&by_value).await.unwrap();
    let token = env.token.clone();
    let run = tokio::spawn({
        let mgr = mgr.clone();
        async move { mgr.run_until(token).await }
    });
    eventually("both keys reconciled", DEADLINE, || {
        log.contains("team-a/a1: cached=true watched=true")
            && log.contains("other/o1: cached=false watched=false")
    })
    .await;
    let cluster = mgr.fleet().get(&"cluster-1".into()).unwrap();
    let cache = cluster.cache();
    assert_eq!(cache.watch_count(Some("team-a")), 1, "the default");
    // The cluster-wide ConfigMap input, and Namespaces (cluster-scoped: no namespace).
    assert_eq!(cache.watch_count(None), 2);
    assert_eq!(cache.informer_count(), 3);
    let found = cache.list_by_index::<ConfigMap>("v", "team-a").unwrap();
    assert_eq!(
        found.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        ["a1"]
    );
    assert!(
        cache
            .list_by_index::<ConfigMap>("v", "other")
            .unwrap()
            .is_empty()
    );
    env.token.cancel();
    run.await.unwrap().unwrap();
}
