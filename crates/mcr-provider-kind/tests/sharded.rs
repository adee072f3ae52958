//! A sharded kind provider: a kind cluster another replica owns is reported owned elsewhere
//! and costs no `kind get kubeconfig`; a cluster given away is stopped at once and no longer
//! refreshed; both come up here once this replica owns them.

mod common;

use common::{FakeKind, WAIT, init_tracing};
use mcr_core::{Engagements, MemberState, Provider, ProviderRunnable};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_kind::KindProvider;
use mcr_test_support::{OTHER_REPLICA, Owned};
use tokio_util::sync::CancellationToken;

/// Where the provider's member `name` stands.
fn state(provider: &KindProvider, name: &str) -> Option<MemberState> {
    provider
        .member_statuses()
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.state)
}

#[tokio::test]
async fn clusters_owned_elsewhere_cost_no_kind_call_and_one_given_away_stops_at_once() {
    init_tracing();
    let kind = FakeKind::new();
    let a = TestCluster::start_https("a").await.unwrap();
    let b = TestCluster::start_https("b").await.unwrap();
    let c = TestCluster::start_https("c").await.unwrap();
    kind.set("fleet-a", &a);
    kind.set("fleet-b", &b);
    kind.set("fleet-c", &c);
    let owned = Owned::new(&["fleet-a", "fleet-c"]);
    let table = Engagements::new();
    assert!(table.coordinate(owned.clone()).is_ok());
    let provider = KindProvider::new(kind.options());
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (provider, token, table) = (provider.clone(), token.clone(), table.clone());
        async move { provider.start(token, table).await }
    });

    eventually("fleet-a and fleet-c engaged here", WAIT, || {
        provider.names() == ["fleet-a", "fleet-c"]
    })
    .await;
    // Several lists and refreshes later, fleet-b has cost nothing and stands owned elsewhere.
    let (lists, refreshes) = (
        kind.count("get clusters"),
        kind.count("get kubeconfig --name fleet-a"),
    );
    eventually("three lists and two refreshes", WAIT, || {
        kind.count("get clusters") >= lists + 3
            && kind.count("get kubeconfig --name fleet-a") >= refreshes + 2
    })
    .await;
    assert_eq!(
        state(&provider, "fleet-b"),
        Some(MemberState::Elsewhere {
            owner: Some(OTHER_REPLICA.into())
        })
    );
    assert_eq!(kind.count("get kubeconfig --name fleet-b"), 0);

    // Given away: stopped at once (the handoff converges every member before it hands over).
    let a_token = mcr_test_support::active_token(&table, "fleet-a").expect("fleet-a runs");
    let c_refreshes = kind.count("get kubeconfig --name fleet-c");
    owned.set_unannounced(&["fleet-c"]);
    table.release_unowned();
    assert!(a_token.is_cancelled(), "the given-away cluster is stopped");
    assert!(
        matches!(
            state(&provider, "fleet-a"),
            Some(MemberState::Elsewhere { .. })
        ),
        "{:?}",
        state(&provider, "fleet-a")
    );
    // No longer refreshed: a refresh pass that began after the release (the one of fleet-c's
    // second refresh since) asks only for fleet-c, and so does every pass after it.
    eventually("two refreshes of fleet-c", WAIT, || {
        kind.count("get kubeconfig --name fleet-c") >= c_refreshes + 2
    })
    .await;
    let a_fetches = kind.count("get kubeconfig --name fleet-a");
    eventually("two more refreshes of fleet-c", WAIT, || {
        kind.count("get kubeconfig --name fleet-c") >= c_refreshes + 4
    })
    .await;
    assert_eq!(kind.count("get kubeconfig --name fleet-a"), a_fetches);

    // Owned here again, each comes up.
    owned.all();
    eventually("every cluster engaged here", WAIT, || {
        provider.names() == ["fleet-a", "fleet-b", "fleet-c"]
    })
    .await;
    assert!(kind.count("get kubeconfig --name fleet-b") >= 1);

    token.cancel();
    task.await.unwrap().unwrap();
    assert!(
        provider.member_statuses().is_empty(),
        "every member removed"
    );
}
