//! Member clients close idle pooled connections: a burst of concurrent requests opens several
//! connections, and they do not stay open for the life of the member. Over HTTP/2
//! (`ClientOptions::http2`) one connection carries a member's watch and requests together,
//! and survives credentials renewed in place.
#![cfg(target_os = "linux")]

mod support;

use std::time::{Duration, SystemTime};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use mcr_core::credentials::{self, Credentials};
use mcr_core::kubeconfig::{ClientOptions, Policy};
use mcr_envtest::{Fleet, TestCluster};
use support::{DEADLINE, create, eventually};
use tokio_util::sync::CancellationToken;

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

/// The port of an emulated cluster's HTTPS URL.
fn port_of(tc: &TestCluster) -> u16 {
    tc.url()
        .unwrap()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap()
}

#[tokio::test]
async fn idle_pooled_connections_are_closed() {
    let tc = TestCluster::start_https("pool").await.unwrap();
    let port = port_of(&tc);
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

/// A member built from `kc`'s current context with `ClientOptions::http2`.
async fn over_http2(kc: &kube::config::Kubeconfig) -> mcr_core::Cluster {
    let opts = ClientOptions {
        http2: true,
        ..ClientOptions::default()
    };
    credentials::cluster_for_context("m", kc, None, &opts, &Policy::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn over_http2_one_connection_carries_a_watch_and_a_burst() {
    let tc = TestCluster::start_https("pool-h2").await.unwrap();
    let port = port_of(&tc);
    let kc = tc.kubeconfig().unwrap();
    let cluster = over_http2(&kc).await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    // The same overlapping burst that opens several HTTP/1.1 connections (above), while the
    // watch is open.
    tc.set_latency(Some(Duration::from_millis(300)));
    let params = ListParams::default();
    let burst = (0..6).map(|_| api.list(&params));
    for result in futures::future::join_all(burst).await {
        result.unwrap();
    }
    tc.set_latency(None);
    assert_eq!(
        connections_to(port),
        1,
        "over HTTP/2 the watch and the burst share one connection"
    );
    // The watch still delivers on it.
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "over-h2"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let seen = tokio::time::timeout(DEADLINE, async {
        while let Some(event) = watch.try_next().await.unwrap() {
            if let WatchEvent::Added(cm) = event
                && cm.metadata.name.as_deref() == Some("over-h2")
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        seen,
        Ok(true),
        "the watch saw the ConfigMap created over HTTP/2"
    );
    assert_eq!(connections_to(port), 1);
}

/// Both backends (`MCR_ENVTEST=real`: kube-apiserver takes `h2` by ALPN as well): a member
/// client with `http2` is answered over HTTP/2, one without over HTTP/1.1.
#[tokio::test]
async fn http2_is_negotiated_only_when_asked_for() {
    let fleet = Fleet::builder()
        .clusters(1)
        .name_prefix("h2")
        .https(true)
        .start()
        .await
        .unwrap();
    let kc = fleet.clusters()[0].kubeconfig().unwrap();
    for (http2, expected) in [
        (true, http::Version::HTTP_2),
        (false, http::Version::HTTP_11),
    ] {
        let opts = ClientOptions {
            http2,
            ..ClientOptions::default()
        };
        let cluster = credentials::cluster_for_context("m", &kc, None, &opts, &Policy::default())
            .await
            .unwrap();
        let request = http::Request::get("/version")
            .body(kube::client::Body::empty())
            .unwrap();
        let answer = cluster.client().send(request).await.unwrap();
        assert!(answer.status().is_success(), "{}", answer.status());
        assert_eq!(answer.version(), expected, "http2: {http2}");
        // A list works over it too.
        let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
        api.list(&ListParams::default()).await.unwrap();
    }
}

/// A request's HTTP version over `client` (`GET /version`).
async fn version_of(client: &kube::Client) -> http::Version {
    let request = http::Request::get("/version")
        .body(kube::client::Body::empty())
        .unwrap();
    let answer = client.send(request).await.unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    answer.version()
}

/// Credentials renewed in place over HTTP/2 (`CredentialHandle::replace`, what every renewal
/// calls): the running watch stays on the connection it was opened on (no relist, no new
/// watch), new requests carry the current certificate on a new HTTP/2 connection (answered
/// after the first certificate expired), and each retired pool's connection closes once it
/// carries nothing. After a restart the watch and the requests share one connection again.
#[tokio::test]
async fn over_http2_a_renewal_keeps_the_watch_and_closes_the_retired_connections() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let tc = TestCluster::start_https("renew-h2").await.unwrap();
    let port = port_of(&tc);
    let (yaml, first_expires) = tc
        .client_certificate_kubeconfig("controller", &["system:masters"], Duration::from_secs(2))
        .unwrap();
    let kc = mcr_core::kubeconfig::parse(yaml.as_bytes()).unwrap();
    let cluster = over_http2(&kc).await;
    let client = cluster.client();
    let token = CancellationToken::new();
    cluster.cache().start(token.child_token());
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    // The watch starts after the list that synced the informer.
    eventually("the informer's watch to start", DEADLINE, || {
        tc.request_count("watch", "configmaps") == 1
    })
    .await;
    let lists = tc.request_count("list", "configmaps");
    let watches = tc.request_count("watch", "configmaps");
    assert_eq!(version_of(&client).await, http::Version::HTTP_2);

    // Three renewals: each installs a new pool, whose first request opens a new connection.
    for _ in 0..3 {
        let cert = tc
            .client_certificate("controller", &["system:masters"], Duration::from_secs(600))
            .unwrap();
        let fresh =
            Credentials::client_certificate(cert.cert_pem.as_bytes(), cert.key_pem.as_bytes())
                .unwrap();
        cluster.credentials().unwrap().replace(fresh);
        assert_eq!(version_of(&client).await, http::Version::HTTP_2);
    }
    eventually("the first certificate to expire", DEADLINE, || {
        SystemTime::now() > first_expires + Duration::from_secs(1)
    })
    .await;

    // The emulator refuses the first certificate on every new request now: this write is
    // answered because it carries the current one, and the watch opened with the first one
    // still delivers it.
    create(&client, "after-renewals", "h2").await;
    eventually(
        "the watch opened before the renewals to deliver",
        DEADLINE,
        || informer.get(Some("default"), "after-renewals").is_some(),
    )
    .await;
    assert_eq!(
        tc.request_count("watch", "configmaps"),
        watches,
        "watch kept"
    );
    assert_eq!(tc.request_count("list", "configmaps"), lists, "no relist");
    eventually(
        "the retired pools' connections to close (the watch's and the current pool's remain)",
        DEADLINE,
        || connections_to(port) == 2,
    )
    .await;

    // Every connection cut: the watch resumes (no relist) on the current pool's connection.
    tc.stop().await;
    tc.restart().await.unwrap();
    create(&client, "after-restart", "h2").await;
    eventually("the resumed watch to deliver", DEADLINE, || {
        informer.get(Some("default"), "after-restart").is_some()
    })
    .await;
    assert!(
        tc.request_count("watch", "configmaps") > watches,
        "watch resumed"
    );
    assert_eq!(tc.request_count("list", "configmaps"), lists, "no relist");
    assert_eq!(version_of(&client).await, http::Version::HTTP_2);
    eventually(
        "the watch and the requests to share one connection",
        DEADLINE,
        || connections_to(port) == 1,
    )
    .await;
    token.cancel();
}
