//! Member clients close idle pooled connections: a burst of concurrent requests opens several
//! connections, and they do not stay open for the life of the member.
#![cfg(target_os = "linux")]

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use mcr_core::credentials;
use mcr_core::kubeconfig::{ClientOptions, Policy};
use mcr_envtest::TestCluster;
use support::{DEADLINE, eventually};

/// Established connections this process holds *to* `port` (client side), read from
/// `/proc/net/tcp` (the emulator serves 127.0.0.1 in this process: its own sockets have `port`
/// as their local port and are not counted).
fn connections_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote_port = fields
                .get(2)
                .and_then(|addr| addr.rsplit(':').next())
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            remote_port == Some(port) && fields.get(3) == Some(&"01")
        })
        .count()
}

#[tokio::test]
async fn idle_pooled_connections_are_closed() {
    let tc = TestCluster::start_https("pool").await.unwrap();
    let port: u16 = tc
        .url()
        .unwrap()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap();
    let kc = tc.kubeconfig().unwrap();
    let opts = ClientOptions {
        pool_idle_timeout: Some(Duration::from_secs(1)),
        ..ClientOptions::default()
    };
    let cluster = credentials::cluster_for_context("m", &kc, None, &opts, &Policy::default())
        .await
        .unwrap();
    // Slow answers make the requests overlap, so the pool opens one connection each.
    tc.set_latency(Some(Duration::from_millis(300)));
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let params = ListParams::default();
    let burst = (0..6).map(|_| api.list(&params));
    for result in futures::future::join_all(burst).await {
        result.unwrap();
    }
    tc.set_latency(None);
    let open = connections_to(port);
    assert!(open > 1, "the burst used several connections ({open})");
    eventually(
        "idle connections closed after the pool idle timeout",
        DEADLINE,
        || connections_to(port) == 0,
    )
    .await;
    // The member still works: a new connection is opened on demand.
    api.list(&ListParams::default()).await.unwrap();
}
