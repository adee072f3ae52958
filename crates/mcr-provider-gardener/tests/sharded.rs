//! A sharded Gardener provider: a Shoot another replica owns is reported owned elsewhere and
//! costs no kubeconfig request; a Shoot given away is stopped at once and its credentials are
//! no longer renewed; each comes up here once this replica owns it.

mod common;

use std::time::Duration;

use common::{DEADLINE, options};
use mcr_core::{Engagements, MemberState, Provider, ProviderRunnable};
use mcr_envtest::TestCluster;
use mcr_envtest::garden::Garden;
use mcr_envtest::wait::{POLL_INTERVAL, eventually};
use mcr_provider_gardener::GardenerProvider;
use mcr_test_support::{OTHER_REPLICA, Owned, init_tracing};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The provider's members and where each stands (`engaged`, `elsewhere`, ...).
fn states(provider: &GardenerProvider) -> Vec<(String, MemberState)> {
    provider
        .member_statuses()
        .into_iter()
        .map(|s| (s.name.to_string(), s.state))
        .collect()
}

/// Waits (bounded) until the provider's members stand as `want` says; the panic shows where
/// they stand.
async fn wait_states(provider: &GardenerProvider, want: &[(&str, MemberState)]) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let now = states(provider);
        if now
            .iter()
            .map(|(n, s)| (n.as_str(), s))
            .eq(want.iter().map(|(n, s)| (*n, s)))
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "members never stood as {want:?}; they stand as {now:?}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

fn elsewhere() -> MemberState {
    MemberState::Elsewhere {
        owner: Some(OTHER_REPLICA.into()),
    }
}

#[tokio::test]
async fn shoots_owned_elsewhere_cost_no_kubeconfig_request_and_one_given_away_stops_at_once() {
    if !mcr_envtest::require_emulator("the garden is emulated") {
        return;
    }
    init_tracing();
    // Every certificate lasts 2 s: renewed after about one, unless no longer renewed.
    let garden = Garden::start(Duration::from_secs(2)).await.unwrap();
    let a = TestCluster::start_https("shoot-a").await.unwrap();
    let b = TestCluster::start_https("shoot-b").await.unwrap();
    garden.add_shoot("garden-dev", "a", &a).await.unwrap();
    garden.add_shoot("garden-dev", "b", &b).await.unwrap();
    let owned = Owned::nothing();
    let table = Engagements::new();
    assert!(table.coordinate(owned.clone()).is_ok());
    let provider = GardenerProvider::new(
        garden.cluster().client(),
        options(Duration::from_secs(3600)),
    );
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (provider, token, table) = (provider.clone(), token.clone(), table.clone());
        async move { provider.start(token, table).await }
    });

    wait_states(
        &provider,
        &[("garden-dev/a", elsewhere()), ("garden-dev/b", elsewhere())],
    )
    .await;
    // The Shoot's events are handled again (it leaves, and comes back): still nothing asked.
    garden
        .set_status("garden-dev", "b", json!({"hibernated": true}))
        .await
        .unwrap();
    wait_states(&provider, &[("garden-dev/a", elsewhere())]).await;
    garden
        .set_status("garden-dev", "b", json!({"hibernated": false}))
        .await
        .unwrap();
    wait_states(
        &provider,
        &[("garden-dev/a", elsewhere()), ("garden-dev/b", elsewhere())],
    )
    .await;
    assert_eq!(garden.kubeconfig_requests(), 0, "no kubeconfig requested");
    assert_eq!(
        a.requests().total() + b.requests().total(),
        0,
        "no shoot asked"
    );

    // Owned here: engaged, renewed in place; b still costs nothing.
    owned.set(&["garden-dev/a"]);
    wait_states(
        &provider,
        &[
            ("garden-dev/a", MemberState::Engaged),
            ("garden-dev/b", elsewhere()),
        ],
    )
    .await;
    let cluster_a = provider.get(&"garden-dev/a".into()).await.unwrap();
    let credentials = cluster_a.credentials().expect("renewable").clone();
    eventually("a's credentials renewed", DEADLINE, || {
        credentials.status().renewals >= 1
    })
    .await;
    assert_eq!(b.requests().total(), 0, "no request to b");

    // Given away: stopped at once (the handoff converges every member before it hands over),
    // and its credentials are renewed no more: they lapse.
    let a_token = mcr_test_support::active_token(&table, "garden-dev/a").expect("a runs");
    drop(cluster_a);
    owned.set_unannounced(&[]);
    table.release_unowned();
    assert!(a_token.is_cancelled(), "the given-away Shoot is stopped");
    assert_eq!(
        states(&provider),
        [
            ("garden-dev/a".to_string(), elsewhere()),
            ("garden-dev/b".to_string(), elsewhere())
        ]
    );
    eventually(
        "a's credentials to lapse, no longer renewed",
        DEADLINE,
        || credentials.status().is_expired(),
    )
    .await;

    // Owned here again: each comes up.
    owned.all();
    wait_states(
        &provider,
        &[
            ("garden-dev/a", MemberState::Engaged),
            ("garden-dev/b", MemberState::Engaged),
        ],
    )
    .await;

    token.cancel();
    task.await.unwrap().unwrap();
    assert!(
        provider.member_statuses().is_empty(),
        "every member removed"
    );
}
