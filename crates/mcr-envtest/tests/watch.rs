//! kube-runtime watchers and reflectors against in-process clusters.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use mcr_envtest::wait::eventually_async;
use mcr_envtest::{ErrorRule, TestCluster};
use mcr_test_support::{DEADLINE, configmap};

/// Retries a failed watch after 50 ms (kube's default backoff starts at 800 ms).
struct QuickBackoff;

impl Iterator for QuickBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<Self::Item> {
        Some(std::time::Duration::from_millis(50))
    }
}

impl kube::runtime::utils::Backoff for QuickBackoff {
    fn reset(&mut self) {}
}

/// Runs a reflector over ConfigMaps in `default` in the background.
fn reflect(
    cluster: &TestCluster,
    config: watcher::Config,
) -> (Store<ConfigMap>, tokio::task::JoinHandle<()>) {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config).backoff(QuickBackoff));
    let task = tokio::spawn(async move {
        stream.for_each(|_| async {}).await;
    });
    (reader, task)
}

fn names(store: &Store<ConfigMap>) -> Vec<String> {
    let mut names: Vec<String> = store
        .state()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    names.sort();
    names
}

async fn wait_for_names(store: &Store<ConfigMap>, expected: &[&str]) {
    eventually_async(&format!("store to hold {expected:?}"), DEADLINE, || async {
        names(store) == expected
    })
    .await;
}

async fn survives_timeout_and_410(config: watcher::Config, streaming: bool) {
    if !mcr_envtest::require_emulator("needs request counters, error injection and compaction") {
        return;
    }
    let cluster = TestCluster::start("watch").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    cms.create(&PostParams::default(), &configmap("a", &[], "1"))
        .await
        .unwrap();
    let (store, task) = reflect(&cluster, config.timeout(1));
    wait_for_names(&store, &["a"]).await;

    // The server ends each watch after one second; the watcher must come back.
    eventually_async("a re-watch after the watch timeout", DEADLINE, || async {
        cluster.request_count("watch", "configmaps") >= 2
    })
    .await;
    cms.create(&PostParams::default(), &configmap("b", &[], "1"))
        .await
        .unwrap();
    wait_for_names(&store, &["a", "b"]).await;

    // Keep the watch down, change things, forget history, let it come back: 410, relist.
    cluster.inject_error(ErrorRule::new(500).verb("watch"));
    let failed_from = cluster.request_count("watch", "configmaps");
    // A watch request counted after the rule exists has failed, so the old watch is over.
    eventually_async("a failed watch attempt", DEADLINE, || async {
        cluster.request_count("watch", "configmaps") > failed_from
    })
    .await;
    let lists_before = cluster.request_count("list", "configmaps");
    cms.create(&PostParams::default(), &configmap("c", &[], "1"))
        .await
        .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    cluster.compact();
    cluster.clear_faults();
    wait_for_names(&store, &["b", "c"]).await;
    if !streaming {
        assert!(
            cluster.request_count("list", "configmaps") > lists_before,
            "410 must force a relist"
        );
    }
    task.abort();
}

#[tokio::test]
async fn list_watch_survives_timeout_and_410() {
    survives_timeout_and_410(watcher::Config::default(), false).await;
}

#[tokio::test]
async fn streaming_list_survives_timeout_and_410() {
    survives_timeout_and_410(watcher::Config::default().streaming_lists(), true).await;
}

#[tokio::test]
async fn streaming_list_uses_no_list_requests() {
    let cluster = TestCluster::start("streaming").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    cms.create(&PostParams::default(), &configmap("a", &[], "1"))
        .await
        .unwrap();
    let (store, task) = reflect(&cluster, watcher::Config::default().streaming_lists());
    store.wait_until_ready().await.unwrap();
    wait_for_names(&store, &["a"]).await;
    if let Some(counts) = mcr_test_support::request_counts(&cluster) {
        assert_eq!(counts.get("list", "configmaps"), 0);
        assert_eq!(counts.get("watch", "configmaps"), 1);
    }
    task.abort();
}

/// A tiny linear congruential generator: reproducible pseudo-random choices, no extra crate.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

#[tokio::test]
async fn reflector_matches_server_after_random_writes() {
    let cluster = TestCluster::start("reflector").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let (store, task) = reflect(&cluster, watcher::Config::default());
    store.wait_until_ready().await.unwrap();

    let mut rng = Lcg(0x5eed);
    for step in 0..300 {
        let name = format!("cm-{}", rng.next(12));
        let value = step.to_string();
        match rng.next(3) {
            0 => {
                let _ = cms
                    .create(&PostParams::default(), &configmap(&name, &[], &value))
                    .await;
            }
            1 => {
                if let Ok(mut cm) = cms.get(&name).await {
                    cm.data = Some([("value".to_string(), value)].into());
                    cms.replace(&name, &PostParams::default(), &cm)
                        .await
                        .unwrap();
                }
            }
            _ => {
                let _ = cms.delete(&name, &DeleteParams::default()).await;
            }
        }
    }

    let server: BTreeMap<String, Option<String>> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| (c.metadata.name.unwrap(), c.metadata.resource_version))
        .collect();
    assert!(!server.is_empty());
    eventually_async("reflector store to equal the server", DEADLINE, || async {
        let local: BTreeMap<String, Option<String>> = store
            .state()
            .iter()
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    c.metadata.resource_version.clone(),
                )
            })
            .collect();
        local == server
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn one_watcher_makes_exactly_one_watch_request() {
    let cluster = TestCluster::start("counting").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let (store, task) = reflect(&cluster, watcher::Config::default());
    store.wait_until_ready().await.unwrap();
    // The watch resumes from the list's resourceVersion, so `seen` shows up either way; the
    // emulator can also check the request was made before the write.
    if mcr_test_support::request_counts(&cluster).is_some() {
        eventually_async("the watch request", DEADLINE, || async {
            cluster.request_count("watch", "configmaps") >= 1
        })
        .await;
    }
    cms.create(&PostParams::default(), &configmap("seen", &[], "1"))
        .await
        .unwrap();
    wait_for_names(&store, &["seen"]).await;
    if let Some(counts) = mcr_test_support::request_counts(&cluster) {
        assert_eq!(counts.get("watch", "configmaps"), 1);
        assert_eq!(counts.get("list", "configmaps"), 1);
    }
    task.abort();
}

/// `timeoutSeconds` beyond int64 is a 400 on both backends (the real server parses int64).
#[tokio::test]
async fn a_timeout_seconds_beyond_int64_is_a_bad_request() {
    let cluster = TestCluster::start("huge-timeout").await.unwrap();
    let request = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds={}",
        u64::MAX
    ))
    .body(Vec::new())
    .unwrap();
    match cluster.client().request_events::<ConfigMap>(request).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 400, "{status:?}"),
        Err(other) => panic!("expected a 400 Status, got {other:?}"),
        Ok(_) => panic!("expected a 400 Status, got a watch"),
    }
}

/// The emulator's deadline arithmetic does not overflow on the largest valid `timeoutSeconds`:
/// the watch simply has no deadline. (What a real server does with it is its own business.)
#[tokio::test]
async fn a_huge_timeout_seconds_means_no_deadline() {
    if !mcr_envtest::require_emulator("checks the emulator's deadline arithmetic") {
        return;
    }
    let cluster = TestCluster::start("huge-timeout").await.unwrap();
    let client = cluster.client();
    let request = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds={}",
        i64::MAX
    ))
    .body(Vec::new())
    .unwrap();
    let mut events = client
        .request_events::<ConfigMap>(request)
        .await
        .unwrap()
        .boxed();
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &configmap("late", &[], "1"))
        .await
        .unwrap();
    let event = tokio::time::timeout(DEADLINE, events.next())
        .await
        .expect("an event within the deadline");
    match event {
        Some(Ok(kube::api::WatchEvent::Added(cm))) => {
            assert_eq!(cm.metadata.name.as_deref(), Some("late"));
        }
        other => panic!("expected the ADDED event, got {other:?}"),
    }
}
