//! Cache rules without an API server: informer sharing, start/stop, sync timeouts, index
//! registration.

use super::*;

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
