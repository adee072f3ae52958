//! One hung workload cluster never delays the others; it is engaged once it answers.

mod common;

use std::time::Duration;

use common::*;
use mcr_core::scope::Namespaces;
use mcr_envtest::wait::eventually;
use mcr_envtest::{Partition, TestCluster};
use mcr_provider_capi::{CapiVersion, ClusterState};

const V: CapiVersion = CapiVersion::V1Beta2;

#[tokio::test]
async fn a_hung_workload_cluster_does_not_delay_the_others() {
    init_tracing();
    let host = management().await;
    create_namespace(&host.client(), "fleet", &[]).await;
    let hung = TestCluster::start_https("hung").await.unwrap();
    hung.partition(Partition::Hang);
    create_cluster(&host, V, "fleet", "hung", true, &[]).await;
    put_secret(
        &host,
        "fleet",
        "hung",
        Some(kubeconfig_of(&hung).as_bytes()),
        &[],
    )
    .await;

    let mut options = opts(V, Namespaces::One("fleet".into()));
    options.members.sync_timeout = Duration::from_secs(2);
    let run = Running::start(&host, options);
    eventually("the hung cluster is being tried", WAIT, || {
        matches!(
            run.state("fleet", "hung"),
            Some(ClusterState::Pending | ClusterState::Failed { .. })
        )
    })
    .await;
    // Clusters that come while it hangs are engaged regardless.
    let mut healthy = Vec::new();
    for i in 0..3 {
        let w = TestCluster::start_https(format!("ok-{i}")).await.unwrap();
        let name = format!("ok-{i}");
        create_cluster(&host, V, "fleet", &name, true, &[]).await;
        put_secret(
            &host,
            "fleet",
            &name,
            Some(kubeconfig_of(&w).as_bytes()),
            &[],
        )
        .await;
        healthy.push(w);
    }
    eventually("the healthy clusters engaged", WAIT, || {
        (0..3).all(|i| run.has(&format!("fleet/ok-{i}")))
    })
    .await;
    assert!(!run.has("fleet/hung"));
    eventually("the hung cluster failed with a bounded wait", WAIT, || {
        matches!(run.state("fleet", "hung"), Some(ClusterState::Failed { ref reason, .. }) if reason.contains("fleet/hung"))
    })
    .await;

    hung.heal();
    eventually("the healed cluster engaged on retry", WAIT, || {
        run.has("fleet/hung")
    })
    .await;
    run.stop().await;
}
