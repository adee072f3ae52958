//! The metrics/health endpoint bounds slow clients and the number of connections.

mod common;

use std::{net::SocketAddr, time::Duration};

use common::*;
use mcr_envtest::TestCluster;
use mcr_manager::Manager;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

/// A running manager with the endpoint on a free port (default HTTP settings).
async fn serve(host: &TestCluster) -> (SocketAddr, CancellationToken, JoinHandle<()>) {
    let mgr = Manager::builder(host.client())
        .metrics_address(([127, 0, 0, 1], 0).into())
        .build();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, t) = (mgr.clone(), token.clone());
        async move { mgr.run_until(t).await.unwrap() }
    });
    eventually("endpoint bound", DEADLINE, || mgr.http_addr().is_some()).await;
    (mgr.http_addr().unwrap(), token, run)
}

/// Reads until the server closes the connection; `None` if it is still open after `DEADLINE`.
async fn read_until_closed(stream: &mut TcpStream) -> Option<String> {
    let mut out = Vec::new();
    match tokio::time::timeout(DEADLINE, stream.read_to_end(&mut out)).await {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let (addr, token, run) = serve(&host).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let silent = TcpStream::connect(addr).await;
    let mut silent = silent.unwrap();
    assert!(
        read_until_closed(&mut slow).await.is_some(),
        "a half-sent request head kept its connection open"
    );
    assert!(
        read_until_closed(&mut silent).await.is_some(),
        "a silent client kept its connection open"
    );
    token.cancel();
    run.await.unwrap();
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_for_a_free_slot() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let (addr, token, run) = serve(&host).await;
    // Hold every slot with connections that sent half a request head.
    let mut held = Vec::new();
    for _ in 0..mcr_manager::HttpOptions::default().max_connections {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    let mut probe = TcpStream::connect(addr).await.unwrap();
    probe
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(300), probe.read(&mut buf)).await;
    assert!(early.is_err(), "a connection beyond the cap was served");
    held.clear(); // the client goes away: its slot frees
    let answer = read_until_closed(&mut probe).await.expect("probe answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    token.cancel();
    run.await.unwrap();
}
