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

async fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    read_until_closed(&mut s).await.expect("answered")
}

#[tokio::test]
async fn one_unsynced_member_does_not_make_the_pod_unready_and_is_reported() {
    use mcr_core::{Aware, Cluster, ClusterName, providers::clusters::ClustersProvider};
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let good = TestCluster::start("good").await.unwrap();
    let stuck = TestCluster::start("stuck").await.unwrap();
    let provider = std::sync::Arc::new(ClustersProvider::new());
    provider
        .add(Cluster::new("good", good.client()))
        .await
        .unwrap();
    let mgr = Manager::builder(host.client())
        .provider(provider.clone())
        .metrics_address(([127, 0, 0, 1], 0).into())
        .build();
    let log = Log::default();
    mcr_manager::Controller::new(&mgr)
        .for_::<k8s_openapi::api::core::v1::ConfigMap>()
        .register(record, retry, std::sync::Arc::new(log))
        .unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, t) = (mgr.clone(), token.clone());
        async move { mgr.run_until(t).await.unwrap() }
    });
    eventually("endpoint bound", DEADLINE, || mgr.http_addr().is_some()).await;
    let addr = mgr.http_addr().unwrap();
    // A member whose list requests hang (like one lacking a CRD or RBAC) never syncs.
    stuck.partition(mcr_envtest::Partition::Hang);
    let engagement = CancellationToken::new();
    let cluster = Cluster::new("stuck", stuck.client());
    cluster.cache().start(engagement.child_token());
    mgr.engage(engagement.clone(), ClusterName::new("stuck"), cluster)
        .unwrap();
    eventually("the stuck member is reported unsynced", DEADLINE, || {
        mgr.unsynced_clusters() == [ClusterName::new("stuck")]
    })
    .await;

    let ready = get(addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let clusters = get(addr, "/clusters").await;
    assert!(clusters.contains("\nstuck unsynced\n"), "{clusters}");
    let metrics = get(addr, "/metrics").await;
    assert!(
        metrics.contains(r#"mcr_cluster_synced{cluster="stuck"} 0"#),
        "{metrics}"
    );

    stuck.heal();
    engagement.cancel();
    token.cancel();
    run.await.unwrap();
}

#[tokio::test]
async fn a_cluster_name_with_a_newline_cannot_forge_status_lines() {
    use mcr_core::{Aware, Cluster, ClusterName};
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start("member").await.unwrap();
    let mgr = Manager::builder(host.client())
        .metrics_address(([127, 0, 0, 1], 0).into())
        .build();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, t) = (mgr.clone(), token.clone());
        async move { mgr.run_until(t).await.unwrap() }
    });
    eventually("endpoint bound", DEADLINE, || mgr.http_addr().is_some()).await;
    let addr = mgr.http_addr().unwrap();
    // A provider reading names from outside (a file name, a kubeconfig context) could be
    // handed this one.
    let evil = ClusterName::new("evil\nforged-member synced");
    let engaged = mgr.engage(
        CancellationToken::new(),
        evil.clone(),
        Cluster::new(evil.clone(), member.client()),
    );
    let clusters = get(addr, "/clusters").await;
    let body = clusters.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert!(
        !body.lines().any(|l| l.starts_with("forged-member")),
        "a forged line in /clusters: {clusters}"
    );
    let err = engaged.expect_err("a name with a control character is refused");
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "the error repeats the newline: {msg}");
    assert!(msg.contains(r"evil\nforged-member"), "{msg}");
    token.cancel();
    run.await.unwrap();
}

/// A runnable that tracks members of its own (as `mcr-webhook`'s member configurations do):
/// what it reports here is what the manager must show.
struct Tracker(std::sync::Mutex<Vec<mcr_core::MemberStatus>>);

impl mcr_manager::Runnable for Tracker {
    fn name(&self) -> &str {
        "tracker"
    }

    fn start(
        self: std::sync::Arc<Self>,
        token: CancellationToken,
    ) -> mcr_core::BoxFuture<'static, Result<(), mcr_manager::BoxError>> {
        Box::pin(async move {
            token.cancelled().await;
            Ok(())
        })
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn member_statuses(&self) -> Vec<mcr_core::MemberStatus> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn a_runnables_member_statuses_are_reported_with_the_providers() {
    use mcr_core::{Cluster, MemberState, MemberStatus, providers::clusters::ClustersProvider};
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start("member-1").await.unwrap();
    let provider = std::sync::Arc::new(ClustersProvider::new());
    provider
        .add(Cluster::new("member-1", member.client()))
        .await
        .unwrap();
    let mgr = Manager::builder(host.client())
        .provider(provider)
        .metrics_address(([127, 0, 0, 1], 0).into())
        .build();
    // member-1 is engaged, and the tracker still works on it; "gone" left the provider, and
    // the tracker's cleanup there keeps failing.
    let failed = MemberState::Failed {
        reason: "member left the fleet; removing: unreachable".into(),
        retry_in: Some(Duration::from_secs(4)),
    };
    let tracker = std::sync::Arc::new(Tracker(std::sync::Mutex::new(vec![
        MemberStatus::new("tracker", "member-1".into(), MemberState::Pending),
        MemberStatus::new("tracker", "gone".into(), failed.clone()),
    ])));
    mgr.add(tracker.clone()).unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, t) = (mgr.clone(), token.clone());
        async move { mgr.run_until(t).await.unwrap() }
    });
    eventually("endpoint bound and member-1 engaged", DEADLINE, || {
        mgr.http_addr().is_some() && mgr.fleet().names().len() == 1
    })
    .await;
    let addr = mgr.http_addr().unwrap();

    let statuses = mgr.member_statuses();
    assert!(
        statuses.contains(&MemberStatus::new("tracker", "gone".into(), failed.clone())),
        "the runnable's failing member is not in member_statuses: {statuses:?}"
    );
    assert!(
        statuses.contains(&MemberStatus::new(
            "tracker",
            "member-1".into(),
            MemberState::Pending
        )),
        "{statuses:?}"
    );
    let gone = mgr
        .cluster_statuses()
        .into_iter()
        .find(|s| s.name == "gone")
        .expect("the failing member is listed in cluster_statuses");
    assert!(!gone.synced && !gone.is_healthy(), "{gone:?}");
    assert_eq!(gone.member, Some(failed));
    let clusters = get(addr, "/clusters").await;
    assert!(
        clusters.contains(
            "\ngone unsynced member=failed retry_in=4s reason=\"member left the fleet; removing: unreachable\"\n"
        ),
        "{clusters}"
    );
    // An engaged member the runnable still works on shows it, and stays healthy.
    assert!(
        clusters
            .lines()
            .any(|l| l.starts_with("member-1 ") && l.ends_with(" member=pending")),
        "{clusters}"
    );
    let metrics = get(addr, "/metrics").await;
    assert!(
        metrics.contains(r#"mcr_members{provider="tracker",state="failed"} 1"#)
            && metrics.contains(r#"mcr_members{provider="tracker",state="pending"} 1"#),
        "{metrics}"
    );

    // Once the runnable reports nothing, the member is gone from every view.
    tracker.0.lock().unwrap().clear();
    assert!(!mgr.cluster_statuses().iter().any(|s| s.name == "gone"));
    token.cancel();
    run.await.unwrap();
}
