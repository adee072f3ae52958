//! Namespace-scoped informers (`InformerOptions::namespaces`) against emulated or real API
//! servers: one watch per namespace, shared; a merged subscription; reads outside the watched
//! namespaces; derived caches, whose namespaces are the view's.

mod support;

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use mcr_core::{Cache, CacheEvent, CacheView, Cluster, InformerOptions};
use mcr_envtest::TestCluster;
use support::*;
use tokio_util::sync::CancellationToken;

async fn create_in(client: &kube::Client, ns: &str, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("creating namespace {ns}: {e}"),
    }
    let mut object = cm(name, "web");
    object.metadata.namespace = Some(ns.into());
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &object)
        .await
        .expect("create configmap");
}

fn in_namespaces(namespaces: &[&str]) -> InformerOptions {
    InformerOptions {
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
        ..InformerOptions::default()
    }
}

/// `namespace/name` of every object an event stream delivered, `-` before deletions.
type Seen = Arc<Mutex<Vec<String>>>;

fn record(mut events: futures::stream::BoxStream<'static, CacheEvent<ConfigMap>>) -> Seen {
    let seen: Seen = Arc::default();
    let out = seen.clone();
    tokio::spawn(async move {
        while let Some(ev) = events.next().await {
            let o = ev.object();
            let deleted = if matches!(ev, CacheEvent::Deleted(_)) {
                "-"
            } else {
                ""
            };
            out.lock().unwrap().push(format!(
                "{deleted}{}/{}",
                o.metadata.namespace.as_deref().unwrap_or_default(),
                o.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    });
    seen
}

fn has(seen: &Seen, entry: &str) -> bool {
    seen.lock().unwrap().iter().any(|e| e == entry)
}

#[tokio::test]
async fn one_watch_per_namespace_shared_and_merged() {
    let tc = TestCluster::start("namespaces").await.unwrap();
    let client = tc.client();
    for (ns, name) in [("a", "a1"), ("b", "b1"), ("c", "c1")] {
        create_in(&client, ns, name).await;
    }
    let cluster = Cluster::new("namespaces", client.clone());
    let cache = cluster.cache();
    let token = CancellationToken::new();
    let both = cache.informer_with::<ConfigMap>((), in_namespaces(&["b", "a"]));
    let only_a = cache.informer_with::<ConfigMap>((), in_namespaces(&["a"]));
    // Namespaces are cluster-scoped: their namespaces are ignored, one cluster-wide watch.
    let namespaces = cache.informer_with::<Namespace>((), in_namespaces(&["a"]));
    assert_eq!(cache.informer_count(), 3);
    assert_eq!(
        [Some("a"), Some("b"), Some("c"), None].map(|ns| cache.watch_count(ns)),
        [1, 1, 0, 1]
    );
    assert_eq!(both.namespaces(), ["a", "b"]);
    assert!(namespaces.namespaces().is_empty() && namespaces.covers(Some("anything")));
    cache.start(token.child_token());
    both.wait_for_sync(DEADLINE).await.unwrap();
    only_a.wait_for_sync(DEADLINE).await.unwrap();
    // No deadline at all (what the runtime gives while a cluster is engaged) is accepted.
    both.wait_for_sync(std::time::Duration::MAX).await.unwrap();
    cache.wait_for_sync(std::time::Duration::MAX).await.unwrap();
    let seen = record(both.subscribe());
    assert_eq!(names(&both.list()), ["a1", "b1"]);
    assert_eq!(names(&only_a.list()), ["a1"]);
    assert!(both.get(Some("b"), "b1").is_some());
    assert!(!both.covers(Some("c")) && both.get(Some("c"), "c1").is_none());

    // Live changes of both namespaces arrive on the one merged stream.
    create_in(&client, "a", "a2").await;
    create_in(&client, "c", "c2").await;
    Api::<ConfigMap>::namespaced(client.clone(), "b")
        .delete("b1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("a2 and the deletion of b1", DEADLINE, || {
        has(&seen, "a/a2") && has(&seen, "-b/b1")
    })
    .await;
    assert!(has(&seen, "a/a1"), "the replay: {:?}", seen.lock().unwrap());
    assert_eq!(names(&both.list()), ["a1", "a2"]);
    assert!(!seen.lock().unwrap().iter().any(|e| e.contains("c/")));
    if !tc.backend().is_real() {
        // One watch each in a and b (a's shared), one of Namespaces.
        assert_eq!(tc.request_count("watch", "configmaps"), 2);
    }
    token.cancel();
}

/// Shows namespace `a` of the parent as `default`, and hides every other namespace.
struct AAsDefault;

impl CacheView for AAsDefault {
    fn view(&self, meta: &mut ObjectMeta) -> bool {
        if meta.namespace.as_deref() == Some("a") {
            meta.namespace = Some("default".into());
            return true;
        }
        false
    }
}

#[tokio::test]
async fn a_derived_cache_scopes_by_the_namespaces_of_its_view() {
    let tc = TestCluster::start("derived").await.unwrap();
    let client = tc.client();
    for (ns, name) in [("a", "a1"), ("default", "d1")] {
        create_in(&client, ns, name).await;
    }
    let parent = Cluster::new("parent", client.clone());
    let derived = Cache::derived("view".into(), client, parent.cache(), Arc::new(AAsDefault));
    let token = CancellationToken::new();
    parent.cache().start(token.child_token());
    derived.start(token.child_token());
    let in_default = derived.informer_with::<ConfigMap>((), in_namespaces(&["default"]));
    let elsewhere = derived.informer_with::<ConfigMap>((), in_namespaces(&["a"]));
    in_default.wait_for_sync(DEADLINE).await.unwrap();
    elsewhere.wait_for_sync(DEADLINE).await.unwrap();
    // The parent's real `default` (d1) is hidden by the view; its `a` is the view's `default`.
    assert_eq!(names(&in_default.list()), ["a1"]);
    assert!(in_default.get(Some("default"), "a1").is_some());
    assert!(elsewhere.list().is_empty(), "the view has no namespace `a`");
    // The parent watches every namespace once for both.
    assert_eq!(parent.cache().watch_count(None), 1);
    assert_eq!(parent.cache().informer_count(), 1);
    token.cancel();
}

#[tokio::test]
async fn a_field_index_in_namespaces_sits_on_their_watches() {
    let tc = TestCluster::start("indexes").await.unwrap();
    let client = tc.client();
    for (ns, name) in [("a", "a1"), ("b", "b1"), ("c", "c1")] {
        create_in(&client, ns, name).await;
    }
    let cluster = Cluster::new("indexes", client);
    let cache = cluster.cache();
    let by_app = mcr_core::FieldIndex::new::<ConfigMap>("app", app_of);
    cache
        .index_field(&by_app.in_namespaces(["b", "a"]))
        .unwrap();
    // Again: a no-op; in other namespaces: refused, naming both.
    cache
        .index_field(&by_app.in_namespaces(["a", "b"]))
        .unwrap();
    let err = cache.index_field(&by_app).unwrap_err().to_string();
    assert!(err.contains(r#"["a", "b"]"#), "{err}");
    assert_eq!(cache.watch_count(None), 0, "no cluster-wide watch");
    assert_eq!(cache.informer_count(), 2);
    let token = CancellationToken::new();
    cache.start(token.child_token());
    cache.wait_for_sync(DEADLINE).await.unwrap();
    let web = cache.list_by_index::<ConfigMap>("app", "web").unwrap();
    assert_eq!(names(&web), ["a1", "b1"]);
    token.cancel();
}
