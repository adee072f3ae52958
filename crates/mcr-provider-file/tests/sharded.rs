//! The file provider in a sharded replica: a cluster that comes home is built from its file.

use std::time::Duration;

use mcr_core::members::MemberProvider;
use mcr_core::{Engagements, MemberState, ProviderRunnable};
use mcr_envtest::wait::eventually;
use mcr_provider_file::{FileProvider, Options};
use mcr_test_support::{DEADLINE, Owned};
use tokio_util::sync::CancellationToken;

/// A cluster that comes home is built from its file as it is then. A file that became invalid
/// while another replica owned the cluster fails the attempt with the file's error (reported,
/// not retried), and the fix of the file brings the cluster up.
#[tokio::test]
async fn a_cluster_coming_home_is_built_from_its_file_as_it_is_then() {
    mcr_test_support::init_tracing();
    let cluster = mcr_envtest::TestCluster::start_https("a").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.kubeconfig");
    let good = cluster.kubeconfig_yaml().unwrap();
    std::fs::write(&file, &good).unwrap();
    let switch = Owned::nothing();
    let table = Engagements::new();
    let _ = table.coordinate(switch.clone());
    let provider = FileProvider::new(Options {
        files: vec![file.clone()],
        debounce: Duration::from_millis(20),
        ..Options::default()
    });
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (provider, token, table) = (provider.clone(), token.clone(), table.clone());
        async move { provider.start(token, table).await }
    });
    let state = || {
        provider
            .members()
            .member_statuses()
            .into_iter()
            .map(|s| s.state)
            .next()
    };
    eventually("parked", DEADLINE, || {
        matches!(state(), Some(MemberState::Elsewhere { .. }))
    })
    .await;

    std::fs::write(&file, "clusters: [").unwrap();
    let report = provider.run_once(&token).await;
    assert_eq!(report.invalid_files.len(), 1, "{report:?}");
    switch.all();
    eventually("the attempt fails on the invalid file", DEADLINE, || {
        matches!(state(), Some(MemberState::Failed { reason, retry_in: None }) if reason.contains("a.kubeconfig"))
    })
    .await;
    assert!(table.names().is_empty());

    std::fs::write(&file, &good).unwrap();
    eventually("engaged once the file is fixed", DEADLINE, || {
        table.names().len() == 1
    })
    .await;
    token.cancel();
    run.await.unwrap().unwrap();
}
