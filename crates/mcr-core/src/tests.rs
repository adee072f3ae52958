//! Unit tests of the lifecycle and cache rules that need no API server (a client whose
//! requests never complete stands for an unreachable cluster). The behaviour against a real
//! API server is covered by the integration tests in `tests/`.

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use mcr_envtest::wait::{DEFAULT_TIMEOUT, eventually};
use tokio_util::sync::CancellationToken;

use crate::{
    AddOutcome, Aware, Cluster, ClusterName, Clusters, ClustersOptions, Error, FieldIndex,
    InformerOptions, Provider, Registry, is_cluster_not_found,
    providers::{clusters::ClustersProvider, nop::NopProvider, single::SingleProvider},
};

/// A client for a cluster that never answers.
fn hanging_client() -> kube::Client {
    let service = tower::service_fn(|_req: http::Request<kube::client::Body>| {
        futures::future::pending::<Result<http::Response<kube::client::Body>, Infallible>>()
    });
    kube::Client::new(service, "default")
}

fn by_app() -> FieldIndex {
    FieldIndex::new::<ConfigMap>("app", |cm| {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned())
            .into_iter()
            .collect()
    })
}

/// Records engagements; fails them when asked to.
#[derive(Default)]
struct Recorder {
    fail: bool,
    engaged: Mutex<Vec<(ClusterName, CancellationToken)>>,
}

impl Aware for Recorder {
    fn engage(&self, token: CancellationToken, name: ClusterName, _: Cluster) -> Result<(), Error> {
        if self.fail {
            return Err(Error::Engage {
                cluster: name,
                reason: "refused by test".into(),
            });
        }
        self.engaged.lock().unwrap().push((name, token));
        Ok(())
    }
}

fn short() -> ClustersOptions {
    ClustersOptions {
        sync_timeout: Duration::from_millis(200),
    }
}

#[tokio::test]
async fn informers_are_shared_per_type_and_selector() {
    let cluster = Cluster::new("a", hanging_client());
    let cache = cluster.cache();
    let _a = cache.informer::<ConfigMap>();
    let _b = cache.informer::<ConfigMap>();
    assert_eq!(cache.informer_count(), 1);
    let labelled = InformerOptions {
        label_selector: Some("app=x".into()),
        ..Default::default()
    };
    let _c = cache.informer_with::<ConfigMap>((), labelled.clone());
    let _d = cache.informer_with::<ConfigMap>((), labelled);
    assert_eq!(cache.informer_count(), 2);
    let _e = cache.metadata_informer::<ConfigMap>((), InformerOptions::default());
    let _f = cache.informer::<Secret>();
    assert_eq!(cache.informer_count(), 4);
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let _g = cache.informer_with::<DynamicObject>(ar.clone(), InformerOptions::default());
    let _h = cache.informer_with::<DynamicObject>(ar, InformerOptions::default());
    assert_eq!(cache.informer_count(), 5);
}

#[tokio::test]
async fn unstarted_cache_is_inert_and_times_out() {
    let cluster = Cluster::new("a", hanging_client());
    let informer = cluster.cache().informer::<ConfigMap>();
    assert!(!cluster.cache().is_started());
    assert!(!cluster.cache().is_synced());
    let err = informer
        .wait_for_sync(Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::SyncTimeout { ref cluster, ref resource, .. }
        if cluster == "a" && resource == "configmaps"),
        "{err}"
    );
}

#[tokio::test]
async fn cache_without_informers_is_synced() {
    let cluster = Cluster::new("a", hanging_client());
    assert!(cluster.cache().is_synced());
    cluster
        .cache()
        .wait_for_sync(Duration::from_millis(10))
        .await
        .unwrap();
}

#[tokio::test]
async fn cancelled_token_stops_informers_and_ends_subscriptions() {
    use futures::StreamExt;
    let cluster = Cluster::new("a", hanging_client());
    let token = CancellationToken::new();
    let informer = cluster.cache().informer::<ConfigMap>();
    let mut events = informer.subscribe();
    cluster.cache().start(token.clone());
    cluster.cache().start(CancellationToken::new()); // ignored: idempotent
    assert!(cluster.cache().is_started());
    token.cancel();
    assert!(events.next().await.is_none());
    let err = cluster
        .cache()
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Stopped(ref c) if c == "a"), "{err}");
    // An informer requested after the stop is stopped too.
    let late = cluster.cache().informer::<Secret>();
    let err = late
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Stopped(_)), "{err}");
    assert!(late.subscribe().next().await.is_none());
}

#[tokio::test]
async fn index_registration_rules() {
    let cluster = Cluster::new("a", hanging_client());
    let cache = cluster.cache();
    let err = cache.list_by_index::<ConfigMap>("app", "x").unwrap_err();
    assert!(matches!(err, Error::Index { .. }), "{err}");
    cache.index_field(&by_app()).unwrap();
    assert_eq!(
        cache.informer_count(),
        1,
        "index_field starts the type's informer"
    );
    // Same name on the same type again (even another instance): no-op.
    cache.index_field(&by_app()).unwrap();
    assert!(
        cache
            .list_by_index::<ConfigMap>("app", "x")
            .unwrap()
            .is_empty()
    );
    // Same name on another type: error naming both.
    let other = FieldIndex::new::<Secret>("app", |_| vec![]);
    let err = cache.index_field(&other).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("configmaps") && msg.contains("secrets") && msg.contains("\"a\""),
        "{msg}"
    );
    // Unknown index on a known informer.
    let err = cache
        .informer::<ConfigMap>()
        .list_by_index("nope", "x")
        .unwrap_err();
    assert!(matches!(err, Error::Index { ref index, .. } if index == "nope"));
}

#[tokio::test]
async fn clusters_add_get_remove() {
    let clusters = Clusters::with_options(short());
    let parent = CancellationToken::new();
    let aware = Recorder::default();
    let cluster = Cluster::new("a", hanging_client());
    clusters
        .add(&parent, cluster.clone(), &aware)
        .await
        .unwrap();
    assert_eq!(clusters.names(), ["a"]);
    assert_eq!(clusters.len(), 1);
    assert!(clusters.get(&"a".into()).unwrap().same_instance(&cluster));
    assert!(cluster.cache().is_started());
    let token = clusters.token(&"a".into()).unwrap();
    let engaged = aware.engaged.lock().unwrap().clone();
    assert_eq!(engaged.len(), 1);
    assert!(!engaged[0].1.is_cancelled());

    assert!(clusters.remove(&"a".into()));
    assert!(!clusters.remove(&"a".into()));
    assert!(token.is_cancelled() && engaged[0].1.is_cancelled());
    let err = clusters.get(&"a".into()).unwrap_err();
    assert!(is_cluster_not_found(&err));
    assert!(clusters.is_empty());
}

#[tokio::test]
async fn clusters_refuse_duplicates_and_keep_the_first() {
    let clusters = Clusters::with_options(short());
    let parent = CancellationToken::new();
    let aware = Recorder::default();
    let first = Cluster::new("a", hanging_client());
    clusters.add(&parent, first.clone(), &aware).await.unwrap();
    let second = Cluster::new("a", hanging_client());
    let err = clusters
        .add(&parent, second.clone(), &aware)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::AlreadyEngaged(ref n) if n == "a"),
        "{err}"
    );
    assert!(clusters.get(&"a".into()).unwrap().same_instance(&first));
    assert!(
        !second.cache().is_started(),
        "a refused cluster is not started"
    );
    assert!(!clusters.token(&"a".into()).unwrap().is_cancelled());
}

#[tokio::test]
async fn clusters_sync_timeout_leaves_nothing_behind() {
    let clusters = Clusters::with_options(short());
    clusters.index_field(&by_app()).await.unwrap();
    let parent = CancellationToken::new();
    let aware = Recorder::default();
    let cluster = Cluster::new("slow", hanging_client());
    let err = clusters
        .add(&parent, cluster.clone(), &aware)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::SyncTimeout { ref cluster, .. } if cluster == "slow"),
        "{err}"
    );
    assert!(err.to_string().contains("slow"));
    assert!(clusters.names().is_empty() && clusters.token(&"slow".into()).is_none());
    assert!(aware.engaged.lock().unwrap().is_empty());
    assert!(!parent.is_cancelled());
    // The cache was stopped: its informer reports Stopped, not a pending sync.
    let err = cluster
        .cache()
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Stopped(_)), "{err}");
}

#[tokio::test]
async fn clusters_engage_error_leaves_nothing_behind() {
    let clusters = Clusters::with_options(short());
    let parent = CancellationToken::new();
    let aware = Recorder {
        fail: true,
        ..Default::default()
    };
    // No informer: the cache is synced at once, so the add reaches the engage step.
    let cluster = Cluster::new("bad", hanging_client());
    let err = clusters
        .add(&parent, cluster.clone(), &aware)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Engage { ref cluster, .. } if cluster == "bad"),
        "{err}"
    );
    assert!(clusters.names().is_empty() && clusters.token(&"bad".into()).is_none());
    let late = cluster.cache().informer::<ConfigMap>();
    let err = late
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Stopped(_)),
        "the cache's token was cancelled: {err}"
    );
    // The name is free again.
    let ok = Recorder::default();
    clusters
        .add(&parent, Cluster::new("bad", hanging_client()), &ok)
        .await
        .unwrap();
    assert_eq!(clusters.names(), ["bad"]);
}

#[tokio::test]
async fn clusters_forget_clusters_when_the_parent_is_cancelled() {
    let clusters = Clusters::with_options(short());
    let parent = CancellationToken::new();
    let aware = Recorder::default();
    clusters
        .add(&parent, Cluster::new("a", hanging_client()), &aware)
        .await
        .unwrap();
    clusters
        .add(&parent, Cluster::new("b", hanging_client()), &aware)
        .await
        .unwrap();
    assert_eq!(clusters.names(), ["a", "b"]);
    parent.cancel();
    assert!(clusters.names().is_empty());
    eventually("entries forgotten", DEFAULT_TIMEOUT, || {
        clusters.token(&"a".into()).is_none()
    })
    .await;
}

#[tokio::test]
async fn add_or_replace_uses_the_connection_hash() {
    let clusters = Clusters::with_options(short());
    let parent = CancellationToken::new();
    let aware = Recorder::default();
    let v1 = Cluster::new("a", hanging_client()).with_connection_hash("h1");
    let out = clusters
        .add_or_replace(&parent, v1.clone(), &aware)
        .await
        .unwrap();
    assert_eq!(out, AddOutcome::Added);
    let same = Cluster::new("a", hanging_client()).with_connection_hash("h1");
    let out = clusters
        .add_or_replace(&parent, same, &aware)
        .await
        .unwrap();
    assert_eq!(out, AddOutcome::Unchanged);
    assert!(clusters.get(&"a".into()).unwrap().same_instance(&v1));
    let old_token = clusters.token(&"a".into()).unwrap();
    let v2 = Cluster::new("a", hanging_client()).with_connection_hash("h2");
    let out = clusters
        .add_or_replace(&parent, v2.clone(), &aware)
        .await
        .unwrap();
    assert_eq!(out, AddOutcome::Replaced);
    assert!(old_token.is_cancelled());
    assert!(clusters.get(&"a".into()).unwrap().same_instance(&v2));
    // No hash: always replaced.
    let v3 = Cluster::new("a", hanging_client());
    let out = clusters.add_or_replace(&parent, v3, &aware).await.unwrap();
    assert_eq!(out, AddOutcome::Replaced);
}

#[tokio::test]
async fn clusters_apply_indexes_to_current_and_future_clusters_once() {
    let clusters = Clusters::with_options(short());
    let parent = CancellationToken::new();
    let aware = Recorder::default();
    clusters
        .add(&parent, Cluster::new("a", hanging_client()), &aware)
        .await
        .unwrap();
    // Current cluster: index applied now (it has an informer, so a later sync would be
    // waited for; here only the registration matters).
    clusters.index_field(&by_app()).await.unwrap();
    clusters.index_field(&by_app()).await.unwrap();
    let a = clusters.get(&"a".into()).unwrap();
    assert_eq!(a.cache().informer_count(), 1);
    assert!(a.cache().list_by_index::<ConfigMap>("app", "x").is_ok());
    let err = clusters
        .index_field(&FieldIndex::new::<Secret>("app", |_| vec![]))
        .await;
    assert!(matches!(err, Err(Error::Index { .. })));
    // Future cluster: the index is applied before sync, so with a hanging client the add
    // fails with a sync timeout on configmaps: proof that the index's informer exists.
    let err = clusters
        .add(&parent, Cluster::new("b", hanging_client()), &aware)
        .await;
    assert!(
        matches!(err, Err(Error::SyncTimeout { ref resource, .. }) if resource == "configmaps")
    );
}

#[tokio::test]
async fn registry_follows_engagements() {
    let registry = Registry::new();
    let t1 = CancellationToken::new();
    let a1 = Cluster::new("a", hanging_client());
    registry.engage(t1.clone(), "a".into(), a1.clone()).unwrap();
    assert_eq!(registry.names(), ["a"]);
    // Same instance again: no-op.
    registry
        .engage(CancellationToken::new(), "a".into(), a1.clone())
        .unwrap();
    // New instance under the same name replaces; the old engagement's token no longer removes it.
    let t2 = CancellationToken::new();
    let a2 = Cluster::new("a", hanging_client());
    registry.engage(t2.clone(), "a".into(), a2.clone()).unwrap();
    t1.cancel();
    tokio::task::yield_now().await;
    assert!(registry.get(&"a".into()).unwrap().same_instance(&a2));
    t2.cancel();
    assert!(is_cluster_not_found(
        &registry.get(&"a".into()).unwrap_err()
    ));
    eventually("registry entry removed", DEFAULT_TIMEOUT, || {
        registry.is_empty()
    })
    .await;
    assert_eq!(registry.len(), 0);
    assert!(registry.names().is_empty());
}

#[tokio::test]
async fn single_provider_engages_on_start() {
    let provider = Arc::new(SingleProvider::with_options(
        "one",
        Cluster::new("other-name", hanging_client()),
        short(),
    ));
    assert_eq!(provider.name(), "one");
    assert!(is_cluster_not_found(
        &provider.get(&"one".into()).await.unwrap_err()
    ));
    let registry = Registry::new();
    let token = CancellationToken::new();
    let run = {
        let provider = provider.clone();
        let token = token.clone();
        let registry = registry.clone();
        tokio::spawn(async move {
            let runnable = provider.runnable().unwrap();
            runnable.start(token, Arc::new(registry)).await
        })
    };
    eventually("cluster engaged", DEFAULT_TIMEOUT, || {
        registry.names() == ["one"]
    })
    .await;
    assert_eq!(provider.get(&"one".into()).await.unwrap().name(), "one");
    token.cancel();
    run.await.unwrap().unwrap();
    assert!(provider.clusters().is_empty());
}

#[tokio::test]
async fn nop_provider_has_nothing() {
    let p: Arc<dyn Provider> = Arc::new(NopProvider);
    assert!(is_cluster_not_found(&p.get(&"x".into()).await.unwrap_err()));
    p.index_field(&by_app()).await.unwrap();
    assert!(p.runnable().is_none());
}

#[tokio::test]
async fn clusters_provider_queues_until_start_then_engages_live() {
    let provider = Arc::new(ClustersProvider::with_options(short()));
    provider
        .add(Cluster::new("early", hanging_client()))
        .await
        .unwrap();
    let err = provider
        .add(Cluster::new("early", hanging_client()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyEngaged(_)));
    provider
        .add(Cluster::new("dropped", hanging_client()))
        .await
        .unwrap();
    assert!(provider.remove(&"dropped".into()));
    assert!(is_cluster_not_found(
        &provider.get(&"early".into()).await.unwrap_err()
    ));

    let registry = Registry::new();
    let token = CancellationToken::new();
    let run = {
        let (provider, token, registry) = (provider.clone(), token.clone(), registry.clone());
        tokio::spawn(async move {
            provider
                .runnable()
                .unwrap()
                .start(token, Arc::new(registry))
                .await
        })
    };
    eventually("early cluster engaged", DEFAULT_TIMEOUT, || {
        registry.names() == ["early"]
    })
    .await;
    provider
        .add(Cluster::new("late", hanging_client()))
        .await
        .unwrap();
    assert_eq!(registry.names(), ["early", "late"]);
    assert!(provider.get(&"late".into()).await.is_ok());
    assert!(provider.remove(&"early".into()));
    eventually("early cluster left", DEFAULT_TIMEOUT, || {
        registry.names() == ["late"]
    })
    .await;
    token.cancel();
    run.await.unwrap().unwrap();
    eventually("all gone", DEFAULT_TIMEOUT, || registry.is_empty()).await;
}
