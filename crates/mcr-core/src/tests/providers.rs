//! Engaging by hand, and the tiny providers: single, nop and clusters.

use super::*;

#[tokio::test]
async fn engaging_by_hand_follows_the_token() {
    let registry = Engagements::new();
    let t1 = CancellationToken::new();
    let a1 = Cluster::new("a", hanging_client());
    a1.cache().start(t1.clone());
    registry.engage(t1.clone(), "a".into(), a1.clone()).unwrap();
    assert_eq!(registry.names(), ["a"]);
    // Same instance again: no-op.
    registry
        .engage(CancellationToken::new(), "a".into(), a1.clone())
        .unwrap();
    // New instance under the same name replaces; the old engagement's token no longer removes it.
    let t2 = CancellationToken::new();
    let a2 = Cluster::new("a", hanging_client());
    a2.cache().start(t2.clone());
    registry.engage(t2.clone(), "a".into(), a2.clone()).unwrap();
    t1.cancel();
    tokio::task::yield_now().await;
    assert!(registry.get(&"a".into()).unwrap().same_instance(&a2));
    t2.cancel();
    assert!(cluster_not_found(&registry.get(&"a".into()).unwrap_err()).is_some());
    eventually("registry entry removed", DEFAULT_TIMEOUT, || {
        registry.names().is_empty()
    })
    .await;
    assert_eq!(registry.names().len(), 0);
    assert!(registry.names().is_empty());
}

#[tokio::test]
async fn single_provider_engages_on_start() {
    let provider = Arc::new(SingleProvider::with_sync_timeout(
        "one",
        Cluster::new("other-name", hanging_client()),
        SHORT,
    ));
    assert!(cluster_not_found(&provider.get(&"one".into()).await.unwrap_err()).is_some());
    let registry = Engagements::new();
    let token = CancellationToken::new();
    let run = {
        let provider = provider.clone();
        let token = token.clone();
        let registry = registry.clone();
        tokio::spawn(async move {
            let runnable = provider.runnable().unwrap();
            runnable.start(token, registry).await
        })
    };
    eventually("cluster engaged", DEFAULT_TIMEOUT, || {
        registry.names() == ["one"]
    })
    .await;
    assert_eq!(provider.get(&"one".into()).await.unwrap().name(), "one");
    token.cancel();
    run.await.unwrap().unwrap();
    assert!(provider.engagements().names().is_empty());
}

#[tokio::test]
async fn nop_provider_has_nothing() {
    let p: Arc<dyn Provider> = Arc::new(NopProvider);
    assert!(cluster_not_found(&p.get(&"x".into()).await.unwrap_err()).is_some());
    p.index_field(&by_app()).await.unwrap();
    assert!(p.runnable().is_none());
}

#[tokio::test]
async fn clusters_provider_queues_until_start_then_engages_live() {
    let provider = Arc::new(ClustersProvider::with_sync_timeout(SHORT));
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
    assert!(cluster_not_found(&provider.get(&"early".into()).await.unwrap_err()).is_some());

    let registry = Engagements::new();
    let token = CancellationToken::new();
    let run = {
        let (provider, token, registry) = (provider.clone(), token.clone(), registry.clone());
        tokio::spawn(async move { provider.runnable().unwrap().start(token, registry).await })
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
    eventually("all gone", DEFAULT_TIMEOUT, || registry.names().is_empty()).await;
}
