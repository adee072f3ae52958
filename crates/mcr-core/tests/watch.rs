//! The informers' list-then-watch loop against API servers: metadata-only requests, a watch
//! refused with `410 Gone`, streaming lists, resuming without a relist.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{ResourceExt, runtime::watcher};
use mcr_core::{Cluster, InformerOptions};
use mcr_envtest::{ErrorRule, TestCluster};
use support::*;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn metadata_informers_list_and_watch_metadata_only() {
    let tc = TestCluster::start("meta").await.unwrap();
    create(&tc.client(), "a", "x").await;
    let token = CancellationToken::new();
    let cluster = Cluster::new("meta", tc.client());
    cluster.cache().start(token.clone());
    let meta = cluster
        .cache()
        .metadata_informer::<ConfigMap>((), InformerOptions::default());
    meta.wait_for_sync(DEADLINE).await.unwrap();
    assert_eq!(names(&meta.list()), ["a"]);

    // What a watch delivers says what the server sent: `PartialObjectMetadata`, not the
    // whole ConfigMap decoded down to its metadata.
    relabel(&tc.client(), "a", "y").await;
    create(&tc.client(), "b", "x").await;
    eventually("both objects watched", DEADLINE, || {
        meta.get(Some("default"), "b").is_some()
            && meta
                .get(Some("default"), "a")
                .is_some_and(|a| a.labels().get("app").map(String::as_str) == Some("y"))
    })
    .await;
    for name in ["a", "b"] {
        let object = meta.get(Some("default"), name).unwrap();
        let kind = object
            .types
            .as_ref()
            .map(|t| (t.api_version.as_str(), t.kind.as_str()));
        assert_eq!(
            kind,
            Some(("meta.k8s.io/v1", "PartialObjectMetadata")),
            "{name}: the server sent more than metadata"
        );
    }
    token.cancel();
}

#[tokio::test]
async fn a_watch_refused_with_gone_starts_over_with_a_list() {
    if !mcr_envtest::require_emulator("injects a 410 on the watch request") {
        return;
    }
    let tc = TestCluster::start("gone").await.unwrap();
    create(&tc.client(), "a", "x").await;
    tc.inject_error(
        ErrorRule::new(410)
            .verb("watch")
            .resource("configmaps")
            .times(1),
    );
    let token = CancellationToken::new();
    let cluster = Cluster::new("gone", tc.client());
    cluster.cache().start(token.clone());
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    // The resource version the list gave is gone: listing again is the only way forward
    // (retrying the watch at the same version would be refused forever on a real server).
    eventually("a second list after the 410", DEADLINE, || {
        tc.request_count("list", "configmaps") >= 2
    })
    .await;
    create(&tc.client(), "b", "x").await;
    eventually("watching again", DEADLINE, || {
        informer.get(Some("default"), "b").is_some()
    })
    .await;
    assert_eq!(names(&informer.list()), ["a", "b"]);
    token.cancel();
}

#[tokio::test]
async fn streaming_list_informers_sync_without_a_list() {
    let tc = TestCluster::start("stream").await.unwrap();
    create(&tc.client(), "a", "x").await;
    create(&tc.client(), "b", "x").await;
    let token = CancellationToken::new();
    let cluster = Cluster::new("stream", tc.client());
    cluster.cache().start(token.clone());
    let opts = InformerOptions::from(watcher::Config::default().streaming_lists());
    let informer = cluster.cache().informer_with::<ConfigMap>((), opts);
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert_eq!(names(&informer.list()), ["a", "b"]);
    delete(&tc.client(), "a").await;
    create(&tc.client(), "c", "x").await;
    eventually("changes after the initial events", DEADLINE, || {
        names(&informer.list()) == ["b", "c"]
    })
    .await;
    if !mcr_envtest::backend().is_real() {
        assert_eq!(tc.request_count("list", "configmaps"), 0);
    }
    token.cancel();
}

#[tokio::test]
async fn a_closed_watch_resumes_without_a_list() {
    if !mcr_envtest::require_emulator("closes watches and counts lists") {
        return;
    }
    let tc = TestCluster::start("resume").await.unwrap();
    create(&tc.client(), "a", "x").await;
    let token = CancellationToken::new();
    let cluster = Cluster::new("resume", tc.client());
    cluster.cache().start(token.clone());
    let opts = InformerOptions::from(watcher::Config::default().timeout(1));
    let informer = cluster.cache().informer_with::<ConfigMap>((), opts);
    informer.wait_for_sync(DEADLINE).await.unwrap();
    // The server ends each watch after 1 s; the informer watches again from where it was.
    eventually("three watches", DEADLINE, || {
        tc.request_count("watch", "configmaps") >= 3
    })
    .await;
    create(&tc.client(), "b", "x").await;
    eventually("still watching", DEADLINE, || {
        informer.get(Some("default"), "b").is_some()
    })
    .await;
    assert_eq!(tc.request_count("list", "configmaps"), 1);
    token.cancel();
}

#[tokio::test]
async fn an_unanswered_list_is_given_up_and_retried() {
    // Simulation seed 825: a host list lost on the way (the request never answered) held the
    // namespace provider's watch for the rest of the run, so a namespace unlabelled later never
    // left the fleet. A list page, like the opening of a watch, is given up once kube-apiserver's
    // own request timeout (60 s) has passed with a margin, and reported like any failure.
    use futures::StreamExt;
    let tc = TestCluster::start("lost").await.unwrap();
    // One client, its connection open: only the request is lost, not the connect.
    let client = tc.client();
    create(&client, "a", "x").await;
    tc.partition(mcr_envtest::Partition::Hang);
    let api: kube::Api<ConfigMap> = kube::Api::default_namespaced(client);
    let mut events = mcr_core::watch(api, watcher::Config::default());
    assert!(matches!(
        events.next().await,
        Some(Ok(watcher::Event::Init))
    ));
    // Virtual time from here: the hung request is idle, so the clock runs ahead to the next
    // timer. Without a bound, that is this test's own limit.
    tokio::time::pause();
    let next = tokio::time::timeout(std::time::Duration::from_secs(600), events.next()).await;
    let err = match next {
        Ok(Some(Err(err))) => err,
        Ok(other) => panic!("expected the list to fail, got {other:?}"),
        Err(_) => panic!("the unanswered list was still waited on after 600 s"),
    };
    assert!(
        err.to_string().contains("no answer within 65s"),
        "unexpected error: {err}"
    );
    // Answered again: the next list goes through.
    tokio::time::resume();
    tc.heal();
    let mut listed = Vec::new();
    while let Some(event) = tokio::time::timeout(DEADLINE, events.next()).await.unwrap() {
        match event {
            Ok(watcher::Event::InitApply(cm)) => listed.push(cm.name_any()),
            Ok(watcher::Event::InitDone) => break,
            _ => {}
        }
    }
    assert_eq!(listed, ["a"]);
}
