//! A sharded namespace provider: a namespace another replica owns is reported owned
//! elsewhere and costs no informer; a namespace given away is stopped at once, and comes back
//! as a new instance when this replica owns it again.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::{
    Aware, Cluster, ClusterName, Engagements, Error, MemberState, Provider, ProviderRunnable,
};
use mcr_envtest::TestCluster;
use mcr_provider_namespace::NamespaceProvider;
use mcr_test_support::{OTHER_REPLICA, Owned};
use parking_lot::Mutex;
use support::{DEADLINE, create_namespace, eventually, init_tracing, test_opts};
use tokio_util::sync::CancellationToken;

/// A subscriber that opens a ConfigMap informer on every cluster it is engaged with, as a
/// controller does, and records the names.
#[derive(Default)]
struct Opens {
    engaged: Mutex<Vec<String>>,
}

impl Aware for Opens {
    fn engage(
        &self,
        _: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), Error> {
        cluster.cache().informer::<ConfigMap>();
        self.engaged.lock().push(name.to_string());
        Ok(())
    }
}

/// The provider's members and where each stands (`engaged`, `elsewhere`, ...).
fn states(provider: &NamespaceProvider) -> Vec<(String, &'static str)> {
    provider
        .member_statuses()
        .into_iter()
        .map(|s| (s.name.to_string(), s.state.as_str()))
        .collect()
}

/// Waits (bounded) until the provider's members stand as `want` says; the panic shows where
/// they stand.
async fn wait_states(provider: &NamespaceProvider, want: &[(&str, &str)]) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let now = states(provider);
        if now
            .iter()
            .map(|(n, s)| (n.as_str(), *s))
            .eq(want.iter().copied())
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "members never stood as {want:?}; they stand as {now:?}"
        );
        tokio::time::sleep(mcr_envtest::wait::POLL_INTERVAL).await;
    }
}

#[tokio::test]
async fn namespaces_owned_elsewhere_cost_nothing_and_one_given_away_stops_at_once() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    create_namespace(&host, "team-a", &[]).await;
    create_namespace(&host, "team-b", &[]).await;
    let owned = Owned::new(&["team-a"]);
    let table = Engagements::new();
    assert!(table.coordinate(owned.clone()).is_ok());
    let opens = Arc::new(Opens::default());
    table.subscribe(opens.clone());
    let provider =
        NamespaceProvider::new(Cluster::new(ClusterName::host(), host.clone()), test_opts());
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (provider, token, table) = (provider.clone(), token.clone(), table.clone());
        async move { provider.start(token, table).await }
    });

    wait_states(
        &provider,
        &[
            ("default", "elsewhere"),
            ("team-a", "engaged"),
            ("team-b", "elsewhere"),
        ],
    )
    .await;
    let team_b = provider
        .member_statuses()
        .into_iter()
        .find(|s| s.name == "team-b")
        .unwrap();
    assert_eq!(
        team_b.state,
        MemberState::Elsewhere {
            owner: Some(OTHER_REPLICA.into())
        }
    );
    // Only the owned namespace reached the subscribers: no informer of another replica's.
    assert_eq!(*opens.engaged.lock(), ["team-a"]);
    let err = provider.get(&"team-b".into()).await.unwrap_err();
    assert!(matches!(err, Error::NotOwned { .. }), "{err}");

    // Given away: stopped at once (the handoff converges every member before it hands over).
    let team_a = provider.get(&"team-a".into()).await.unwrap();
    let a_token = mcr_test_support::active_token(&table, "team-a").expect("team-a runs");
    let informer = team_a.cache().informer::<ConfigMap>();
    owned.set_unannounced(&[]);
    table.release_unowned();
    assert!(
        a_token.is_cancelled(),
        "the given-away namespace is stopped"
    );
    let now: Vec<(String, &str)> = states(&provider);
    assert!(now.iter().all(|(_, s)| *s == "elsewhere"), "{now:?}");
    eventually("its informer stops", DEADLINE, || informer.is_stopped()).await;

    // Owned again: a new instance of each.
    owned.set(&["team-a", "team-b"]);
    eventually("team-a and team-b engaged here", DEADLINE, || {
        provider.names() == ["team-a", "team-b"]
    })
    .await;
    let again = provider.get(&"team-a".into()).await.unwrap();
    assert!(!again.same_instance(&team_a), "a new instance");
    let mut engaged = opens.engaged.lock().clone();
    engaged.sort();
    assert_eq!(engaged, ["team-a", "team-a", "team-b"]);

    token.cancel();
    task.await.unwrap().unwrap();
    assert!(
        provider.member_statuses().is_empty(),
        "every member removed"
    );
}
