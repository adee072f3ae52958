//! A namespace cluster's cache: derived from the host's informers, one host watch for all.

mod support;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use mcr_core::{CacheEvent, FieldIndex, Provider};
use mcr_envtest::TestCluster;
use support::{
    DEADLINE, Running, SYNC, create_cm, create_namespace, eventually, init_tracing, test_opts,
};

fn names(objs: &[Arc<ConfigMap>]) -> Vec<String> {
    let mut v: Vec<String> = objs
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    v.sort();
    v
}

fn by_app() -> FieldIndex {
    mcr_test_support::label_index("app")
}

#[tokio::test]
async fn existing_new_updated_and_deleted_objects_reach_each_cache() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    create_namespace(&host, "team-a", &[]).await;
    create_namespace(&host, "team-b", &[]).await;
    create_cm(&host, "team-a", "old-a", "x").await;
    create_cm(&host, "team-b", "old-b", "x").await;
    let run = Running::start(env, test_opts());
    let a = run.wait_for("team-a").await;
    let b = run.wait_for("team-b").await;

    let a_cms = a.cache().informer::<ConfigMap>();
    let b_cms = b.cache().informer::<ConfigMap>();
    a_cms.wait_for_sync(SYNC).await.unwrap();
    b_cms.wait_for_sync(SYNC).await.unwrap();
    // Existing objects, each in its own cluster, in `default`.
    assert_eq!(names(&a_cms.list()), ["old-a"]);
    assert_eq!(names(&b_cms.list()), ["old-b"]);
    let old = a_cms.get(Some("default"), "old-a").expect("in default");
    assert_eq!(old.metadata.namespace.as_deref(), Some("default"));
    assert!(a_cms.get(Some("team-a"), "old-a").is_none());
    let mut a_events = a_cms.subscribe();

    // New objects: created on the host and through the namespace client.
    create_cm(&host, "team-a", "new-a", "y").await;
    Api::<ConfigMap>::default_namespaced(b.client())
        .create(&Default::default(), &support::cm("new-b", "default", "y"))
        .await
        .unwrap();
    eventually("new objects cached", DEADLINE, || {
        names(&a_cms.list()) == ["new-a", "old-a"] && names(&b_cms.list()) == ["new-b", "old-b"]
    })
    .await;

    // Updated.
    let patch = serde_json::json!({"data": {"v": "changed"}});
    Api::<ConfigMap>::namespaced(host.clone(), "team-a")
        .patch("old-a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("update cached", DEADLINE, || {
        a_cms
            .get(Some("default"), "old-a")
            .is_some_and(|cm| cm.data.as_ref().is_some_and(|d| d["v"] == "changed"))
    })
    .await;

    // Deleted.
    Api::<ConfigMap>::default_namespaced(a.client())
        .delete("new-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("delete cached", DEADLINE, || {
        names(&a_cms.list()) == ["old-a"]
    })
    .await;
    assert_eq!(names(&b_cms.list()), ["new-b", "old-b"]);

    // The subscription saw the same story, all in `default`, none of team-b's objects.
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let ev = tokio::time::timeout(support::DEADLINE, a_events.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ev.object().metadata.namespace.as_deref(), Some("default"));
        let kind = if matches!(ev, CacheEvent::Listed(_) | CacheEvent::Applied(_)) {
            "applied"
        } else {
            "deleted"
        };
        seen.push(format!(
            "{kind} {}",
            ev.object().metadata.name.clone().unwrap()
        ));
    }
    assert_eq!(
        seen,
        [
            "applied old-a",
            "applied new-a",
            "applied old-a",
            "deleted new-a"
        ]
    );
    run.stop().await;
}

#[tokio::test]
async fn indexes_are_per_cluster() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    create_namespace(&host, "team-a", &[]).await;
    create_cm(&host, "team-a", "a-web", "web").await;
    let run = Running::start(env, test_opts());
    // Registered before team-b exists and after team-a is engaged.
    run.wait_for("team-a").await;
    run.provider.index_field(&by_app()).await.unwrap();
    create_namespace(&host, "team-b", &[]).await;
    create_cm(&host, "team-b", "b-web", "web").await;
    create_cm(&host, "team-b", "b-db", "db").await;
    let a = run.wait_for("team-a").await;
    let b = run.wait_for("team-b").await;
    a.cache().wait_for_sync(SYNC).await.unwrap();
    b.cache().wait_for_sync(SYNC).await.unwrap();

    eventually("indexes filled", DEADLINE, || {
        let a_web = a.cache().list_by_index::<ConfigMap>("app", "web").unwrap();
        let b_web = b.cache().list_by_index::<ConfigMap>("app", "web").unwrap();
        let b_db = b.cache().list_by_index::<ConfigMap>("app", "db").unwrap();
        names(&a_web) == ["a-web"] && names(&b_web) == ["b-web"] && names(&b_db) == ["b-db"]
    })
    .await;
    let b_db = b.cache().list_by_index::<ConfigMap>("app", "db").unwrap();
    assert_eq!(names(&b_db), ["b-db"]);
    assert_eq!(b_db[0].metadata.namespace.as_deref(), Some("default"));
    assert!(
        a.cache()
            .list_by_index::<ConfigMap>("app", "db")
            .unwrap()
            .is_empty()
    );
    // Registering the same index again is a no-op.
    run.provider.index_field(&by_app()).await.unwrap();
    run.stop().await;
}

#[tokio::test]
async fn many_namespace_clusters_share_one_host_watch() {
    init_tracing();
    const N: usize = 25;
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    for i in 0..N {
        create_namespace(&host, &format!("ns-{i:02}"), &[]).await;
    }
    let run = Running::start(env, test_opts());
    eventually("all namespaces engaged", DEADLINE, || {
        run.registry.names().len() == N + 1
    })
    .await;
    let mut informers = Vec::new();
    for i in 0..N {
        let cluster = run.wait_for(&format!("ns-{i:02}")).await;
        let informer = cluster.cache().informer::<ConfigMap>();
        informer.wait_for_sync(SYNC).await.unwrap();
        informers.push(informer);
    }
    // An object created after every cache synced reaches its cluster only through the watch.
    for i in 0..N {
        create_cm(&host, &format!("ns-{i:02}"), "after-sync", "x").await;
    }
    eventually("every cluster sees its object", DEADLINE, || {
        informers
            .iter()
            .all(|inf| inf.get(Some("default"), "after-sync").is_some())
    })
    .await;
    assert!(informers.iter().all(|inf| inf.list().len() == 1));
    if !run.env.backend().is_real() {
        assert_eq!(run.env.request_count("watch", "configmaps"), 1);
        assert_eq!(run.env.request_count("list", "configmaps"), 1);
    }
    run.stop().await;
}
