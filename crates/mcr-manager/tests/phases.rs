//! Engagement runs in phases: a provider's `Clusters::add` engages the cluster (the
//! controllers open their informers), waits for those informers to sync, then activates it. So
//! when `add` returns, the controller's cache of the new member is listed, not still empty.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::Cluster;
use mcr_envtest::TestCluster;
use mcr_manager::Controller;

#[tokio::test]
async fn add_returns_once_the_controllers_informers_have_synced() {
    let env = Env::start(1).await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    create_cm(env.member("cluster-1").client(), "first", "1").await;
    eventually("the manager runs", DEADLINE, || {
        log.contains("cluster-1/first=1")
    })
    .await;

    let late = TestCluster::start("late").await.unwrap();
    create_cm(late.client(), "present", "1").await;
    let cluster = Cluster::new("late", late.client());
    env.provider.add(cluster.clone()).await.unwrap();
    // Phase 1 opened the controller's informer, phase 2 waited for its list.
    let cache = cluster.cache();
    assert!(
        cache.informer_count() >= 1,
        "the controller's informer is open"
    );
    assert!(cache.is_synced());
    let cms = cache.informer::<ConfigMap>();
    assert!(cms.is_synced());
    assert!(cms.get(Some("default"), "present").is_some());
    // Phase 3: active everywhere.
    assert!(
        mcr_core::Provider::get(&*env.provider, &"late".into())
            .await
            .is_ok()
    );
    eventually("the late member reconciled", DEADLINE, || {
        log.contains("late/present=1")
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}
