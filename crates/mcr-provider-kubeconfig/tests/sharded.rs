//! On a sharded manager (a coordinator on the table), a Secret whose cluster another replica
//! owns costs nothing here and is reported as owned elsewhere, never as failed; a cluster
//! given to another replica is stopped at once.

mod common;

use mcr_core::{MemberState, Provider};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kubeconfig::{Namespaces, SecretState};
use mcr_test_support::{OTHER_REPLICA, Owned};

use common::*;

#[tokio::test]
async fn a_cluster_owned_elsewhere_costs_no_request_and_one_given_away_stops_at_once() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (ma, mb) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let run = Running::start(&host, opts(Namespaces::default()));
    let owned = Owned::new(&["a"]);
    assert!(run.registry.coordinate(owned.clone()).is_ok());
    for (name, member) in [("a", ma), ("b", mb)] {
        let kc = kubeconfig_of(member);
        put_secret(&host, "default", name, "true", Some(kc.as_bytes()), &[]).await;
    }
    let elsewhere = SecretState::Elsewhere {
        owner: Some(OTHER_REPLICA.into()),
    };
    eventually("a engaged, b owned elsewhere", DEADLINE, || {
        matches!(run.state("default", "a"), Some(SecretState::Engaged { .. }))
            && run.state("default", "b") == Some(elsewhere.clone())
    })
    .await;
    let statuses = run.provider.member_statuses();
    let b = statuses.iter().find(|s| s.name.as_str() == "b").unwrap();
    assert!(
        matches!(b.state, MemberState::Elsewhere { .. }),
        "{statuses:?}"
    );
    // No client was built for b: its server never saw a request (emulator counters).
    let counters = !mcr_envtest::backend().is_real();
    if counters {
        assert_eq!(mb.requests().total(), 0, "{:?}", mb.requests());
    }

    // a goes to the other replica and b comes here: a's token fires, b comes up.
    let a_token = mcr_test_support::active_token(&run.registry, "a").unwrap();
    owned.set(&["b"]);
    tokio::time::timeout(DEADLINE, a_token.cancelled())
        .await
        .expect("the cluster given away is stopped");
    eventually("b engaged, a owned elsewhere", DEADLINE, || {
        matches!(run.state("default", "b"), Some(SecretState::Engaged { .. }))
            && run.state("default", "a") == Some(elsewhere.clone())
    })
    .await;
    assert_eq!(run.names(), ["b"]);
    if counters {
        assert!(mb.requests().total() > 0, "b's server is used once owned");
    }
    run.stop().await;
}
