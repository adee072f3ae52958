//! What a cache's first informer costs: the watch's shared state, its store, its entry in the
//! cache's registry and the handle, for 20,000 caches (not started, so no watch task and no
//! request). Measured as the growth of the resident memory (Linux): at most 2,000 bytes per
//! cache in a debug build. The registry was a `HashMap`, whose smallest table holds four
//! entries (948 bytes for one informer), and each entry kept a boxed closure to reopen it
//! (120 bytes): 3,735 and 3,742 bytes in two runs then, 2,871 and 2,877 since (2026-12-04);
//! 1,837 and 1,834 once the watch stream kept kube's backoff inside its one future and the
//! sync state was a lock and a `Notify`, not a `tokio::sync::watch` channel; 1,617 and 1,623
//! since the cluster and its cache share one client and the stream shares its options.

use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::Cluster;
use mcr_test_support::rss;

#[tokio::test(flavor = "current_thread")]
async fn a_cache_s_first_informer_costs_at_most_2000_bytes() {
    const N: usize = 20_000;
    let Some(_) = rss() else {
        eprintln!("no /proc/self/status: skipped");
        return;
    };
    // Nothing listens there, and nothing is requested: the caches are never started.
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let clusters: Vec<Cluster> = (0..N)
        .map(|i| Cluster::new(format!("member-{i:05}"), client.clone()))
        .collect();
    let before = rss().unwrap();
    let informers: Vec<_> = clusters
        .iter()
        .map(|c| c.cache().informer::<ConfigMap>())
        .collect();
    let after = rss().unwrap();
    let per_cache = (after - before) as f64 / N as f64;
    println!("first informer of a cache: {per_cache:.0} bytes of RSS");
    // A second informer of the same type and options shares the first one's watch.
    let again: Vec<_> = clusters
        .iter()
        .map(|c| c.cache().informer::<ConfigMap>())
        .collect();
    let shared = (rss().unwrap() - after) as f64 / N as f64;
    println!("a second handle on it: {shared:.0} bytes");
    assert!(clusters.iter().all(|c| c.cache().watch_count(None) == 1));
    assert!(per_cache <= 2000.0, "{per_cache} bytes per cache");
    drop((informers, again));
}
