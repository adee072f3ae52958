//! What a cluster another replica owns costs a sharded replica running the file provider:
//! every replica reads every file, so this is paid once per cluster of the fleet. Alone in its
//! test binary, so that no other test's memory is counted.

use std::path::Path;
use std::time::Duration;

use mcr_core::members::MemberProvider;
use mcr_core::{Engagements, MemberState, ProviderRunnable};
use mcr_envtest::wait::eventually;
use mcr_provider_file::{FileProvider, Options};
use mcr_test_support::{DEADLINE, Owned, rss};
use tokio_util::sync::CancellationToken;

/// A kubeconfig as `mcr-envtest` writes one: a CA certificate (its base64 is about 1 KiB) and
/// a token, all entries named after the cluster.
fn kubeconfig(name: &str) -> String {
    let ca = "QUJD".repeat(256);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: https://127.0.0.1:6443/clusters/{name}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {:064x}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\ncurrent-context: {name}\n",
        name.len()
    )
}

fn write_fleet(dir: &Path, n: usize) {
    for i in 0..n {
        let name = format!("member-{i:05}");
        std::fs::write(dir.join(format!("{name}.kubeconfig")), kubeconfig(&name)).unwrap();
    }
}

/// A cluster another replica owns keeps neither a worker nor its parsed kubeconfig on this
/// one (its credentials stay on disk until it comes home): at most 4 KiB of resident memory per
/// cluster over 4,000 files, the pass that read them included (debug build, 2026-11-28: 3,245
/// bytes; 7,473 while each kept its parsed kubeconfig).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_owned_elsewhere_costs_a_replica_at_most_4_kib() {
    const N: usize = 4_000;
    let Some(_) = rss() else {
        eprintln!("no /proc/self/status: skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_fleet(dir.path(), N);
    let table = Engagements::new();
    let _ = table.coordinate(Owned::nothing());
    let provider = FileProvider::new(Options {
        dirs: vec![dir.path().to_path_buf()],
        debounce: Duration::from_millis(20),
        ..Options::default()
    });
    let token = CancellationToken::new();
    let before = rss().unwrap();
    let run = tokio::spawn({
        let (provider, token, table) = (provider.clone(), token.clone(), table.clone());
        async move { provider.start(token, table).await }
    });
    eventually("every cluster parked as owned elsewhere", DEADLINE, || {
        let statuses = provider.members().member_statuses();
        statuses.len() == N
            && statuses
                .iter()
                .all(|s| matches!(s.state, MemberState::Elsewhere { .. }))
    })
    .await;
    let per_cluster = (rss().unwrap() - before) as f64 / N as f64;
    println!("per cluster owned elsewhere: {per_cluster:.0} bytes of RSS");
    assert!(table.names().is_empty());
    assert!(per_cluster <= 4096.0, "{per_cluster:.0} bytes per cluster");
    token.cancel();
    run.await.unwrap().unwrap();
}
