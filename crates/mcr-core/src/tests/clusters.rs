//! The [`Engagements`] lifecycle: add, replace, remove, failures leaving nothing behind, indexes.

use super::*;

#[tokio::test]
async fn clusters_add_get_remove() {
    let aware = Arc::new(Recorder::default());
    let clusters = table(&aware);
    let parent = CancellationToken::new();
    let cluster = Cluster::new("a", hanging_client());
    clusters.add(&parent, cluster.clone()).await.unwrap();
    assert_eq!(clusters.names(), ["a"]);
    assert_eq!(clusters.names().len(), 1);
    assert!(clusters.get(&"a".into()).unwrap().same_instance(&cluster));
    assert!(cluster.cache().is_started());
    let token = active_token(&clusters, "a").unwrap();
    let engaged = aware.engaged.lock().clone();
    assert_eq!(engaged.len(), 1);
    assert!(!engaged[0].1.is_cancelled());

    assert!(clusters.remove(&"a".into()));
    assert!(!clusters.remove(&"a".into()));
    assert!(token.is_cancelled() && engaged[0].1.is_cancelled());
    let err = clusters.get(&"a".into()).unwrap_err();
    assert!(cluster_not_found(&err).is_some());
    assert!(clusters.names().is_empty());
}

#[tokio::test]
async fn clusters_refuse_duplicates_and_keep_the_first() {
    let aware = Arc::new(Recorder::default());
    let clusters = table(&aware);
    let parent = CancellationToken::new();
    let first = Cluster::new("a", hanging_client());
    clusters.add(&parent, first.clone()).await.unwrap();
    let second = Cluster::new("a", hanging_client());
    let err = clusters.add(&parent, second.clone()).await.unwrap_err();
    assert!(
        matches!(err, Error::AlreadyEngaged(ref n) if n == "a"),
        "{err}"
    );
    assert!(clusters.get(&"a".into()).unwrap().same_instance(&first));
    assert!(
        !second.cache().is_started(),
        "a refused cluster is not started"
    );
    assert!(!active_token(&clusters, "a").unwrap().is_cancelled());
}

#[tokio::test]
async fn clusters_sync_timeout_leaves_nothing_behind() {
    let aware = Arc::new(Recorder::default());
    let clusters = table(&aware);
    clusters.index_field(&by_app()).await.unwrap();
    let parent = CancellationToken::new();
    let cluster = Cluster::new("slow", hanging_client());
    let err = clusters.add(&parent, cluster.clone()).await.unwrap_err();
    assert!(
        matches!(err, Error::SyncTimeout { ref cluster, .. } if cluster == "slow"),
        "{err}"
    );
    assert!(err.to_string().contains("slow"));
    assert!(clusters.names().is_empty() && clusters.member_state(&"slow".into()).is_none());
    // Engaged in phase 1 (to open informers), then disengaged: its token fired.
    let engaged = aware.engaged.lock().clone();
    assert_eq!(engaged.len(), 1);
    assert!(engaged.iter().all(|(_, token)| token.is_cancelled()));
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
    let aware = Arc::new(Recorder::default());
    aware.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let clusters = table(&aware);
    let parent = CancellationToken::new();
    // No informer: the cache is synced at once, so the add reaches the engage step.
    let cluster = Cluster::new("bad", hanging_client());
    let err = clusters.add(&parent, cluster.clone()).await.unwrap_err();
    assert!(
        matches!(err, Error::Engage { ref cluster, .. } if cluster == "bad"),
        "{err}"
    );
    assert!(clusters.names().is_empty() && clusters.member_state(&"bad".into()).is_none());
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
    aware.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    clusters
        .add(&parent, Cluster::new("bad", hanging_client()))
        .await
        .unwrap();
    assert_eq!(clusters.names(), ["bad"]);
}

#[tokio::test]
async fn clusters_forget_clusters_when_the_parent_is_cancelled() {
    let aware = Arc::new(Recorder::default());
    let clusters = table(&aware);
    let parent = CancellationToken::new();
    clusters
        .add(&parent, Cluster::new("a", hanging_client()))
        .await
        .unwrap();
    clusters
        .add(&parent, Cluster::new("b", hanging_client()))
        .await
        .unwrap();
    assert_eq!(clusters.names(), ["a", "b"]);
    parent.cancel();
    assert!(clusters.names().is_empty());
    eventually("entries forgotten", DEFAULT_TIMEOUT, || {
        clusters.member_state(&"a".into()).is_none()
    })
    .await;
}

/// A want with the running source (the same connection hash) changes nothing; another one
/// replaces the running instance once the new one is up; no hash: every instance is its own.
#[tokio::test]
async fn want_uses_the_connection_hash() {
    let aware = Arc::new(Recorder::default());
    let clusters = table(&aware);
    let parent = CancellationToken::new();
    let name = ClusterName::new("a");
    let want = |c: &Cluster| {
        clusters
            .want(&parent, &name, Source::Cluster(c.clone()))
            .unwrap()
    };
    let v1 = Cluster::new("a", hanging_client()).with_connection_hash("h1");
    want(&v1);
    assert_eq!(
        clusters.until_settled(&name).await,
        Some(MemberState::Engaged)
    );
    assert!(clusters.get(&name).unwrap().same_instance(&v1));
    let same = Cluster::new("a", hanging_client()).with_connection_hash("h1");
    want(&same);
    assert!(!same.cache().is_started(), "unchanged: nothing built");
    assert!(clusters.get(&name).unwrap().same_instance(&v1));
    let old_token = active_token(&clusters, name.as_str()).unwrap();
    let v2 = Cluster::new("a", hanging_client()).with_connection_hash("h2");
    want(&v2);
    assert_eq!(
        clusters.until_settled(&name).await,
        Some(MemberState::Engaged)
    );
    assert!(old_token.is_cancelled());
    assert!(clusters.get(&name).unwrap().same_instance(&v2));
    // No hash: a new instance is a new source.
    let v3 = Cluster::new("a", hanging_client());
    want(&v3);
    assert_eq!(
        clusters.until_settled(&name).await,
        Some(MemberState::Engaged)
    );
    assert!(clusters.get(&name).unwrap().same_instance(&v3));
}

#[tokio::test]
async fn clusters_apply_indexes_to_current_and_future_clusters_once() {
    let aware = Arc::new(Recorder::default());
    let clusters = table(&aware);
    let parent = CancellationToken::new();
    clusters
        .add(&parent, Cluster::new("a", hanging_client()))
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
        .add(&parent, Cluster::new("b", hanging_client()))
        .await;
    assert!(
        matches!(err, Err(Error::SyncTimeout { ref resource, .. }) if resource == "configmaps")
    );
}

#[tokio::test]
async fn no_member_can_be_the_host_or_nameless() {
    let aware = Arc::new(Recorder::default());
    let clusters = table(&aware);
    let parent = CancellationToken::new();
    for name in [ClusterName::new(""), ClusterName::host(), "<host>".into()] {
        let cluster = Cluster::new(name.clone(), hanging_client());
        let err = clusters.add(&parent, cluster.clone()).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidName { cluster: ref n, .. } if *n == name),
            "{name:?}: {err}"
        );
        assert!(err.to_string().contains("not a valid member name"), "{err}");
        assert!(
            !cluster.cache().is_started(),
            "a refused cluster is not started"
        );
        let err = clusters
            .engage(parent.child_token(), name.clone(), cluster)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err}");
    }
    assert!(clusters.names().is_empty());
    assert!(aware.engaged.lock().is_empty());
}

/// A subscriber added while a member comes up (engaged, waiting for its informers to list) is
/// engaged with it too, once: by `subscribe`, since the attempt told the subscribers it had.
#[tokio::test]
async fn a_subscriber_added_while_a_member_comes_up_is_engaged_with_it() {
    let first = Arc::new(Recorder::default());
    let clusters = Engagements::new().with_sync_timeout(Duration::from_secs(3600));
    clusters.subscribe(first.clone());
    let parent = CancellationToken::new();
    let name = ClusterName::new("slow");
    // Never answers: the member stays in its attempt, engaged, waiting for sync.
    let cluster = Cluster::new("slow", hanging_client());
    cluster.cache().informer::<ConfigMap>();
    clusters
        .want(&parent, &name, Source::Cluster(cluster))
        .unwrap();
    eventually("engaged with the first subscriber", DEFAULT_TIMEOUT, || {
        !first.engaged.lock().is_empty()
    })
    .await;
    let late = Arc::new(Recorder::default());
    clusters.subscribe(late.clone());
    let engaged = late.engaged.lock().clone();
    assert_eq!(engaged.len(), 1, "{engaged:?}");
    assert_eq!(engaged[0].0, name);
    assert!(clusters.get(&name).is_err(), "still coming up");
    // Its engagement ends with the member.
    assert!(clusters.remove(&name));
    assert!(engaged[0].1.is_cancelled());
}
