//! The `Engagements` table and the small providers against emulated API servers.

mod support;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::{
    Aware, Cluster, ClusterName, Engagements, Error, FieldIndex, MemberState, Provider, Source,
    cluster_not_found, providers::clusters::ClustersProvider,
};
use mcr_envtest::{Fleet, Partition, TestCluster};
use mcr_test_support::active_token;
use support::*;
use tokio_util::sync::CancellationToken;

struct Refuse;
impl Aware for Refuse {
    fn engage(&self, _: CancellationToken, name: ClusterName, _: Cluster) -> Result<(), Error> {
        Err(Error::Engage {
            cluster: name,
            source: "refused by test".into(),
        })
    }
}

fn by_app() -> FieldIndex {
    FieldIndex::new::<ConfigMap>("app", app_of)
}

/// The cache's watch task has exited (`is_stopped` is set when the task ends) and the cache
/// refuses to report a sync.
async fn assert_cache_stopped(cluster: &Cluster) {
    let informer = cluster.cache().informer::<ConfigMap>();
    eventually("watch task exited", DEADLINE, || informer.is_stopped()).await;
    let err = cluster.cache().wait_for_sync(DEADLINE).await;
    assert!(
        matches!(err, Err(Error::Stopped(_))),
        "cache still running: {err:?}"
    );
    assert!(!cluster.cache().is_synced());
}

#[tokio::test]
async fn add_starts_syncs_indexes_and_engages() {
    let tc = TestCluster::start("member").await.unwrap();
    create(&tc.client(), "a", "x").await;
    let clusters = Engagements::new();
    clusters.index_field(&by_app()).await.unwrap();
    let registry = clusters.clone();
    let parent = CancellationToken::new();
    let cluster = Cluster::new("member", tc.client());
    clusters.add(&parent, cluster.clone()).await.unwrap();

    // Synced before engage: the index answers at once.
    let hits = cluster
        .cache()
        .list_by_index::<ConfigMap>("app", "x")
        .unwrap();
    assert_eq!(names(&hits), ["a"]);
    assert_eq!(clusters.names(), ["member"]);
    assert!(
        registry
            .get(&"member".into())
            .unwrap()
            .same_instance(&cluster)
    );

    // Removal cancels the engagement: the registry forgets it, the cache stops.
    let token = active_token(&clusters, "member").unwrap();
    assert!(clusters.remove(&"member".into()));
    assert!(token.is_cancelled());
    eventually("registry forgot the cluster", DEADLINE, || {
        registry.names().is_empty()
    })
    .await;
    assert!(cluster_not_found(&registry.get(&"member".into()).unwrap_err()).is_some());
    assert_cache_stopped(&cluster).await;
    assert!(clusters.names().is_empty());
}

#[tokio::test]
async fn sync_timeout_leaves_no_cluster_and_no_task() {
    let tc = TestCluster::start("hung").await.unwrap();
    tc.partition(Partition::Hang);
    let clusters = Engagements::new().with_sync_timeout(Duration::from_millis(300));
    clusters.index_field(&by_app()).await.unwrap();
    let registry = clusters.clone();
    let parent = CancellationToken::new();
    let cluster = Cluster::new("hung", tc.client());
    let err = clusters.add(&parent, cluster.clone()).await.unwrap_err();
    assert!(
        matches!(err, Error::SyncTimeout { ref cluster, .. } if cluster == "hung"),
        "{err}"
    );
    assert!(err.to_string().contains("\"hung\""));
    assert!(clusters.names().is_empty());
    assert!(clusters.member_state(&"hung".into()).is_none());
    assert!(registry.names().is_empty());
    assert!(!parent.is_cancelled());
    assert_cache_stopped(&cluster).await;

    // Once healed, a new instance joins fine.
    tc.heal();
    clusters
        .add(&parent, Cluster::new("hung", tc.client()))
        .await
        .unwrap();
    assert_eq!(registry.names(), ["hung"]);
    parent.cancel();
}

#[tokio::test]
async fn engage_error_leaves_no_cluster_and_no_task() {
    let tc = TestCluster::start("refused").await.unwrap();
    let clusters = Engagements::new();
    clusters.subscribe(std::sync::Arc::new(Refuse));
    clusters.index_field(&by_app()).await.unwrap();
    let parent = CancellationToken::new();
    let cluster = Cluster::new("refused", tc.client());
    let err = clusters.add(&parent, cluster.clone()).await.unwrap_err();
    assert!(
        matches!(err, Error::Engage { ref cluster, .. } if cluster == "refused"),
        "{err}"
    );
    assert!(clusters.names().is_empty() && clusters.member_state(&"refused".into()).is_none());
    assert_cache_stopped(&cluster).await;
}

#[tokio::test]
async fn duplicate_is_refused_and_the_first_keeps_running() {
    let tc = TestCluster::start("dup").await.unwrap();
    let clusters = Engagements::new();
    let registry = clusters.clone();
    let parent = CancellationToken::new();
    let first = Cluster::new("dup", tc.client());
    clusters.add(&parent, first.clone()).await.unwrap();
    let second = Cluster::new("dup", tc.client());
    let err = clusters.add(&parent, second.clone()).await.unwrap_err();
    assert!(matches!(err, Error::AlreadyEngaged(ref n) if n == "dup"));
    assert!(!second.cache().is_started());
    assert!(registry.get(&"dup".into()).unwrap().same_instance(&first));
    let informer = first.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    create(&tc.client(), "still-watching", "x").await;
    eventually("first cluster still live", DEADLINE, || {
        informer.get(Some("default"), "still-watching").is_some()
    })
    .await;
    parent.cancel();
}

#[tokio::test]
async fn clusters_provider_over_a_fleet() {
    let fleet = Fleet::start(3).await.unwrap();
    let provider = Arc::new(ClustersProvider::new());
    for tc in fleet.clusters() {
        provider
            .add(Cluster::new(tc.name(), tc.client()))
            .await
            .unwrap();
    }
    provider.index_field(&by_app()).await.unwrap();
    let registry = Engagements::new();
    let token = CancellationToken::new();
    let run = {
        let (provider, token, registry) = (provider.clone(), token.clone(), registry.clone());
        tokio::spawn(async move { provider.runnable().unwrap().start(token, registry).await })
    };
    eventually("all engaged", DEADLINE, || registry.names().len() == 3).await;
    for tc in fleet.clusters() {
        create(&tc.client(), &format!("cm-{}", tc.name()), "x").await;
    }
    for tc in fleet.clusters() {
        let cluster = provider.get(&tc.name().into()).await.unwrap();
        let want = format!("cm-{}", tc.name());
        eventually("indexed in its own cluster", DEADLINE, || {
            names(
                &cluster
                    .cache()
                    .list_by_index::<ConfigMap>("app", "x")
                    .unwrap(),
            ) == [want.clone()]
        })
        .await;
        if !tc.backend().is_real() {
            assert_eq!(tc.request_count("watch", "configmaps"), 1);
        }
    }
    assert!(provider.remove(&"cluster-2".into()));
    eventually("cluster-2 left", DEADLINE, || {
        registry.names() == ["cluster-1", "cluster-3"]
    })
    .await;
    assert!(cluster_not_found(&provider.get(&"cluster-2".into()).await.unwrap_err()).is_some());
    token.cancel();
    run.await.unwrap().unwrap();
    eventually("all left", DEADLINE, || registry.names().is_empty()).await;
}

/// Issue 23, item 12: a replacement that cannot sync leaves the running instance serving
/// (engaged, reachable through `get`, its token live); the name is never absent.
#[tokio::test]
async fn a_replacement_that_cannot_sync_keeps_the_old_instance() {
    let tc = TestCluster::start("kept").await.unwrap();
    let hung = TestCluster::start("kept-next").await.unwrap();
    hung.partition(Partition::Hang);
    let clusters = Engagements::new().with_sync_timeout(Duration::from_millis(500));
    clusters.index_field(&by_app()).await.unwrap();
    let registry = clusters.clone();
    let parent = CancellationToken::new();
    let v1 = Cluster::new("kept", tc.client()).with_connection_hash("v1");
    clusters.add(&parent, v1.clone()).await.unwrap();
    let v1_token = active_token(&clusters, "kept").unwrap();

    let v2 = Cluster::new("kept", hung.client()).with_connection_hash("v2");
    let kept = ClusterName::new("kept");
    clusters
        .want(&parent, &kept, Source::Cluster(v2.clone()))
        .unwrap();
    // While the new instance syncs, the old one is still the member.
    eventually("the new instance is being brought up", DEADLINE, || {
        v2.cache().is_started()
    })
    .await;
    assert!(clusters.get(&"kept".into()).unwrap().same_instance(&v1));
    assert!(registry.get(&"kept".into()).unwrap().same_instance(&v1));
    let state = clusters.until_settled(&kept).await;
    assert!(
        matches!(state, Some(MemberState::Failed { ref reason, retry_in: Some(_) })
            if reason.contains("did not sync")),
        "{state:?}"
    );
    // Afterwards too: the old instance keeps serving, the new one left nothing running.
    assert!(!v1_token.is_cancelled());
    assert!(clusters.get(&"kept".into()).unwrap().same_instance(&v1));
    assert!(registry.get(&"kept".into()).unwrap().same_instance(&v1));
    assert_cache_stopped(&v2).await;
    let informer = v1.cache().informer::<ConfigMap>();
    create(&tc.client(), "after-failed-replace", "x").await;
    eventually("the old instance still watches", DEADLINE, || {
        informer
            .get(Some("default"), "after-failed-replace")
            .is_some()
    })
    .await;

    // A replacement that syncs takes over, and the old instance stops.
    let v3 = Cluster::new("kept", tc.client()).with_connection_hash("v3");
    clusters
        .want(&parent, &kept, Source::Cluster(v3.clone()))
        .unwrap();
    assert_eq!(
        clusters.until_settled(&kept).await,
        Some(MemberState::Engaged)
    );
    assert!(v1_token.is_cancelled());
    assert!(clusters.get(&"kept".into()).unwrap().same_instance(&v3));
    eventually("the registry holds the new instance", DEADLINE, || {
        registry
            .get(&"kept".into())
            .is_ok_and(|c| c.same_instance(&v3))
    })
    .await;
    // Synced before it was engaged: the informers the old instance had are listed already.
    assert!(v3.cache().is_synced());
    assert_eq!(
        names(&v3.cache().list_by_index::<ConfigMap>("app", "x").unwrap()),
        ["after-failed-replace"]
    );
    parent.cancel();
}

/// Issue 23, item 8: an `add` dropped while its member synced (the provider's run ended
/// mid-sync) leaves nothing that makes the next run of the same provider skip the member.
#[tokio::test]
async fn an_add_dropped_mid_sync_does_not_hide_the_member_from_the_next_run() {
    let tc = TestCluster::start("dropped").await.unwrap();
    tc.partition(Partition::Hang);
    let clusters = Engagements::new().with_sync_timeout(Duration::from_secs(300));
    clusters.index_field(&by_app()).await.unwrap();
    let registry = clusters.clone();
    let first_run = CancellationToken::new();
    let adding = {
        let (clusters, run) = (clusters.clone(), first_run.clone());
        let cluster = Cluster::new("dropped", tc.client()).with_connection_hash("same");
        tokio::spawn(async move { clusters.add(&run, cluster).await })
    };
    eventually("the member is being brought up", DEADLINE, || {
        clusters.member_state(&"dropped".into()).is_some()
    })
    .await;
    // The run ends: its worker is aborted mid-sync and its token fires.
    adding.abort();
    let _ = adding.await;
    first_run.cancel();

    // The next run of the same provider, with the same connection, once the server answers.
    tc.heal();
    let second_run = CancellationToken::new();
    let again = Cluster::new("dropped", tc.client()).with_connection_hash("same");
    clusters.add(&second_run, again.clone()).await.unwrap();
    assert!(
        clusters
            .get(&"dropped".into())
            .unwrap()
            .same_instance(&again)
    );
    assert!(registry.get(&"dropped".into()).is_ok());
    second_run.cancel();
}

/// At most `max_syncing` members open their informers and list at a time. The others wait
/// their turn in `Starting`, and the wait does not count against their sync timeout: with one
/// turn, a healthy member added behind a hung one is engaged once the hung one's sync times
/// out, although it waited longer than its own sync timeout for its turn.
#[tokio::test]
async fn members_take_turns_to_sync_and_the_wait_is_not_timed() {
    let hung = TestCluster::start("hung").await.unwrap();
    hung.partition(Partition::Hang);
    let healthy = TestCluster::start("healthy").await.unwrap();
    create(&healthy.client(), "a", "x").await;
    let table = Engagements::new().with_max_syncing(1);
    table.index_field(&by_app()).await.unwrap();
    // Two handles on the one table: the hung member holds the only turn for 5 s; the healthy
    // one may take 2 s to sync once its turn comes.
    let slow = table.clone().with_sync_timeout(Duration::from_secs(5));
    let quick = table.clone().with_sync_timeout(Duration::from_secs(2));
    let parent = CancellationToken::new();

    let hung_cluster = Cluster::new("hung", hung.client());
    let first = tokio::spawn({
        let (slow, parent, cluster) = (slow.clone(), parent.clone(), hung_cluster.clone());
        async move { slow.add(&parent, cluster).await }
    });
    eventually("the hung member has its turn", DEADLINE, || {
        hung_cluster.cache().is_started()
    })
    .await;
    let waiting = Cluster::new("healthy", healthy.client());
    let second = tokio::spawn({
        let (quick, parent, cluster) = (quick.clone(), parent.clone(), waiting.clone());
        async move { quick.add(&parent, cluster).await }
    });
    eventually("the healthy member is starting", DEADLINE, || {
        matches!(
            table.member_state(&"healthy".into()),
            Some(MemberState::Pending)
        )
    })
    .await;
    // Its turn has not come: its cache is not started while the hung one holds the turn.
    assert!(!waiting.cache().is_started());

    let err = first.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::SyncTimeout { .. }), "{err}");
    // Waited 5 s for its turn, more than its own 2 s sync timeout, then synced and engaged.
    second.await.unwrap().unwrap();
    assert_eq!(table.names(), ["healthy"]);
    let hits = waiting
        .cache()
        .list_by_index::<ConfigMap>("app", "x")
        .unwrap();
    assert_eq!(names(&hits), ["a"]);
    parent.cancel();
}
