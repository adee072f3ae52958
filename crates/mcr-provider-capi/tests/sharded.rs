//! On a sharded manager (a coordinator on the table), a `Cluster` whose workload cluster
//! another replica owns costs nothing here (its kubeconfig Secret is not read, its server sees
//! no request) and is reported as owned elsewhere, never as failed; a cluster given to another
//! replica is stopped at once.

mod common;

use common::*;
use mcr_core::scope::Namespaces;
use mcr_core::{MemberState, Provider};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_capi::{CapiVersion, ClusterState};
use mcr_test_support::{OTHER_REPLICA, Owned};

const V: CapiVersion = CapiVersion::V1Beta2;

#[tokio::test]
async fn a_cluster_owned_elsewhere_costs_no_request_and_one_given_away_stops_at_once() {
    init_tracing();
    let host = management().await;
    create_namespace(&host.client(), "fleet", &[]).await;
    let wa = TestCluster::start_https("wa").await.unwrap();
    let wb = TestCluster::start_https("wb").await.unwrap();
    let run = Running::start(&host, opts(V, Namespaces::One("fleet".into())));
    let owned = Owned::new(&["fleet/a"]);
    assert!(run.registry.coordinate(owned.clone()).is_ok());
    for (name, workload) in [("a", &wa), ("b", &wb)] {
        put_secret(
            &host,
            "fleet",
            name,
            Some(kubeconfig_of(workload).as_bytes()),
            &[],
        )
        .await;
    }
    // Request counters are emulator-only.
    let counters = !mcr_envtest::backend().is_real();
    let secret_gets = || counters.then(|| host.request_count("get", "secrets"));
    let gets_before = secret_gets();
    for name in ["a", "b"] {
        create_cluster(&host, V, "fleet", name, true, &[]).await;
    }
    let elsewhere = ClusterState::Elsewhere {
        owner: Some(OTHER_REPLICA.into()),
    };
    eventually("a engaged, b owned elsewhere", WAIT, || {
        matches!(run.state("fleet", "a"), Some(ClusterState::Engaged { .. }))
            && run.state("fleet", "b") == Some(elsewhere.clone())
    })
    .await;
    let statuses = run.provider.member_statuses();
    let b = statuses.iter().find(|s| s.name.as_str() == "fleet/b");
    assert!(
        matches!(b.map(|s| &s.state), Some(MemberState::Elsewhere { .. })),
        "{statuses:?}"
    );
    if counters {
        assert_eq!(
            secret_gets()
                .zip(gets_before)
                .map(|(now, before)| now - before),
            Some(1),
            "only a's kubeconfig Secret was read"
        );
        assert_eq!(wb.requests().total(), 0, "{:?}", wb.requests());
    }

    // a goes to the other replica and b comes here: a's token fires, b comes up.
    let a_token = mcr_test_support::active_token(&run.registry, "fleet/a").unwrap();
    owned.set(&["fleet/b"]);
    tokio::time::timeout(WAIT, a_token.cancelled())
        .await
        .expect("the cluster given away is stopped");
    eventually("b engaged, a owned elsewhere", WAIT, || {
        matches!(run.state("fleet", "b"), Some(ClusterState::Engaged { .. }))
            && run.state("fleet", "a") == Some(elsewhere.clone())
    })
    .await;
    assert_eq!(run.names(), ["fleet/b"]);
    if counters {
        assert!(wb.requests().total() > 0, "b's server is used once owned");
    }
    run.stop().await;
}
