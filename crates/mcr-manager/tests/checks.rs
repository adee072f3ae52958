//! User health and readiness checks and extra handlers on the manager's HTTP endpoint.

mod common;

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::*;
use mcr_envtest::TestCluster;
use mcr_manager::{HttpOptions, Manager};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_util::sync::CancellationToken;

/// One request over a fresh connection: the status line and the body.
async fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(DEADLINE, s.read_to_end(&mut out))
        .await
        .expect("the endpoint answered")
        .unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.lines().next().unwrap_or_default().to_owned();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

#[tokio::test]
async fn named_checks_are_bounded_and_failing_ones_are_named() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let healthy = Arc::new(AtomicBool::new(true));
    let flag = healthy.clone();
    let mgr = Manager::builder(host.client())
        .metrics_address(([127, 0, 0, 1], 0).into())
        .http_options(HttpOptions::default().check_timeout(Duration::from_millis(300)))
        .health_check("worker", move || {
            let ok = flag.load(Ordering::SeqCst);
            async move {
                if ok {
                    Ok(())
                } else {
                    Err("the worker loop stopped")
                }
            }
        })
        .ready_check("cache-warm", || async { Ok::<(), String>(()) })
        .ready_check("hangs", || async {
            std::future::pending::<()>().await;
            Ok::<(), String>(())
        })
        .http_handler("/version", |req| async move {
            http::Response::new(format!("v1 for {}\n", req.uri.path()))
        })
        .http_handler("/metrics", |_| async {
            http::Response::new("stolen".to_owned())
        })
        .build();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, t) = (mgr.clone(), token.clone());
        async move { mgr.run_until(t).await.unwrap() }
    });
    eventually("endpoint bound", DEADLINE, || mgr.http_addr().is_some()).await;
    let addr = mgr.http_addr().unwrap();

    assert_eq!(
        get(addr, "/healthz").await,
        ("HTTP/1.1 200 OK".into(), "ok\n".into())
    );
    healthy.store(false, Ordering::SeqCst);
    let (status, body) = get(addr, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert_eq!(
        body,
        "not healthy:\ncheck \"worker\" failed: the worker loop stopped\n"
    );

    // The hanging check fails at its bound; the passing one is not named.
    eventually("the host synced", DEADLINE, || mgr.is_ready()).await;
    let (status, body) = get(addr, "/readyz").await;
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert_eq!(
        body,
        "not ready:\ncheck \"hangs\" did not answer within 300ms\n"
    );

    assert_eq!(
        get(addr, "/version").await,
        ("HTTP/1.1 200 OK".into(), "v1 for /version\n".into())
    );
    // The manager's own paths stay its own.
    let (_, metrics) = get(addr, "/metrics").await;
    assert!(metrics.contains("# EOF"), "{metrics}");
    assert_eq!(get(addr, "/nothing").await.0, "HTTP/1.1 404 Not Found");
    token.cancel();
    run.await.unwrap();
}
