//! Cluster-name ownership does not depend on arrival order: when Secrets in two watched
//! namespaces claim one name, the oldest (`creationTimestamp`, then namespace) owns it, after
//! every restart, whichever namespace is listed first.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use mcr_core::ClusterName;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use mcr_provider_kubeconfig::{Namespaces, SecretRef, SecretState};

use common::*;

/// Creates `ns/x` pointing at `kubeconfig`, strictly younger (by `creationTimestamp`, which has
/// a one-second resolution) than `older` if given: re-created until its timestamp is later.
async fn create_claim(host: &TestCluster, ns: &str, kubeconfig: &str, older: Option<&str>) {
    create_claim_of(host, ns, Some(kubeconfig), older).await;
}

/// [`create_claim`], with the data key left out when `kubeconfig` is `None`.
async fn create_claim_of(
    host: &TestCluster,
    ns: &str,
    kubeconfig: Option<&str>,
    older: Option<&str>,
) {
    let api = Api::<Secret>::namespaced(host.client(), ns);
    let created = |s: Secret| s.metadata.creation_timestamp.expect("set by the server");
    let older = match older {
        Some(o) => Some(created(
            Api::<Secret>::namespaced(host.client(), o)
                .get("x")
                .await
                .unwrap(),
        )),
        None => None,
    };
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        put_secret(host, ns, "x", "true", kubeconfig.map(str::as_bytes), &[]).await;
        let mine = created(api.get("x").await.unwrap());
        if older.as_ref().is_none_or(|o| *o < mine) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "clock does not move"
        );
        api.delete("x", &DeleteParams::default()).await.unwrap();
        eventually_async("deleted", DEADLINE, || async {
            api.get_opt("x").await.unwrap().is_none()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Which member `x` points at, read through the engaged cluster's own client.
async fn marker_of_x<A>(
    run: &mcr_test_support::Running<mcr_provider_kubeconfig::KubeconfigProvider, A>,
) -> Option<String> {
    let cluster = run.registry.get(&ClusterName::new("x")).ok()?;
    let cm = Api::<ConfigMap>::namespaced(cluster.client(), "default")
        .get_opt("marker")
        .await
        .ok()??;
    cm.data?.get("animal").cloned()
}

async fn oldest_wins(older_ns: &str, younger_ns: &str) {
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (old_member, young_member) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    for (member, animal) in [(old_member, "old"), (young_member, "young")] {
        Api::<ConfigMap>::namespaced(member.client(), "default")
            .create(&PostParams::default(), &animal_configmap("marker", animal))
            .await
            .unwrap();
    }
    create_namespace(&host.client(), "ns-a", &[]).await;
    create_namespace(&host.client(), "ns-b", &[]).await;
    create_claim(&host, older_ns, &kubeconfig_of(old_member), None).await;
    create_claim(
        &host,
        younger_ns,
        &kubeconfig_of(young_member),
        Some(older_ns),
    )
    .await;

    let scopes = [
        Namespaces::AllExcept(vec![]),
        Namespaces::List(vec!["ns-a".into(), "ns-b".into()]),
        Namespaces::List(vec!["ns-b".into(), "ns-a".into()]),
        Namespaces::AllExcept(vec![]),
    ];
    for scope in scopes {
        // A restart: a fresh provider lists both Secrets again.
        let run = Running::start(&host, opts(scope.clone()));
        eventually_async(
            &format!("{older_ns}/x owns x under {scope:?}"),
            DEADLINE,
            || async {
                matches!(run.state(older_ns, "x"), Some(SecretState::Engaged { .. }))
                    && run.state(younger_ns, "x")
                        == Some(SecretState::Conflict {
                            owner: SecretRef::new(older_ns, "x"),
                        })
                    && marker_of_x(&run).await.as_deref() == Some("old")
            },
        )
        .await;
        run.stop().await;
    }
}

#[tokio::test]
async fn oldest_secret_owns_the_name_when_it_sorts_last() {
    init_tracing();
    oldest_wins("ns-b", "ns-a").await;
}

#[tokio::test]
async fn oldest_secret_owns_the_name_when_it_sorts_first() {
    init_tracing();
    oldest_wins("ns-a", "ns-b").await;
}

fn state<A>(
    run: &mcr_test_support::Running<mcr_provider_kubeconfig::KubeconfigProvider, A>,
    ns: &str,
) -> Option<SecretState> {
    run.provider
        .status(&SecretRef::new(ns, "x"))
        .map(|s| s.state)
}

/// A subscriber that keeps every cluster engaged under a name, in order.
#[derive(Default)]
struct Recorder {
    engaged: std::sync::Mutex<Vec<(ClusterName, mcr_core::Cluster)>>,
}

impl mcr_core::Aware for Recorder {
    fn engage(
        &self,
        token: tokio_util::sync::CancellationToken,
        name: ClusterName,
        cluster: mcr_core::Cluster,
    ) -> Result<(), mcr_core::Error> {
        let entry = (name.clone(), cluster.clone());
        self.engaged.lock().unwrap().push(entry);
        let _ = token;
        Ok(())
    }
}

/// During the initial list, the younger Secret's namespace lists first and the owner's later:
/// the name waits for the whole initial list, so the younger Secret's member is never engaged
/// under it, not even for a moment.
#[tokio::test]
async fn a_younger_secret_is_never_engaged_before_the_older_is_listed() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (old_member, young_member) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    for (member, animal) in [(old_member, "old"), (young_member, "young")] {
        Api::<ConfigMap>::namespaced(member.client(), "default")
            .create(&PostParams::default(), &animal_configmap("marker", animal))
            .await
            .unwrap();
    }
    create_namespace(&host.client(), "ns-a", &[]).await;
    create_namespace(&host.client(), "ns-b", &[]).await;
    create_claim(&host, "ns-b", &kubeconfig_of(old_member), None).await;
    create_claim(&host, "ns-a", &kubeconfig_of(young_member), Some("ns-b")).await;

    let recorder = std::sync::Arc::new(Recorder::default());
    // The owner's namespace lists last: held until something was engaged, or for 5 s.
    let client = mcr_test_support::listing_last(
        host.client(),
        "/api/v1/namespaces/ns-b/secrets".into(),
        Duration::from_secs(5),
        {
            let recorder = recorder.clone();
            move || !recorder.engaged.lock().unwrap().is_empty()
        },
    );
    let provider = mcr_provider_kubeconfig::KubeconfigProvider::new(
        client,
        opts(Namespaces::List(vec!["ns-a".into(), "ns-b".into()])),
    );
    let run = mcr_test_support::Running::spawn_with(provider, recorder.clone());
    eventually_async("ns-b/x owns x", DEADLINE, || async {
        matches!(state(&run, "ns-b"), Some(SecretState::Engaged { .. }))
            && state(&run, "ns-a")
                == Some(SecretState::Conflict {
                    owner: SecretRef::new("ns-b", "x"),
                })
            && marker_of_x(&run).await.as_deref() == Some("old")
    })
    .await;
    let engaged: Vec<(ClusterName, mcr_core::Cluster)> = recorder.engaged.lock().unwrap().clone();
    for (name, cluster) in engaged {
        assert_eq!(name.as_str(), "x");
        let cm = Api::<ConfigMap>::namespaced(cluster.client(), "default")
            .get("marker")
            .await
            .unwrap();
        let animal = cm.data.unwrap()["animal"].clone();
        assert_eq!(
            animal, "old",
            "only the oldest Secret's member is ever engaged as x"
        );
    }
    run.stop().await;
}

/// The owner of a name goes away and the next claimant has no kubeconfig: the cluster the
/// owner's kubeconfig brought up is removed (it was engaged from a Secret that no longer
/// exists), not kept under a name the remaining Secret owns without saying how to reach it.
#[tokio::test]
async fn a_name_passing_to_a_secret_without_kubeconfig_stops_the_previous_cluster() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    create_namespace(&host.client(), "ns-a", &[]).await;
    create_namespace(&host.client(), "ns-b", &[]).await;
    create_claim(&host, "ns-a", &kubeconfig_of(&fleet.clusters()[0]), None).await;
    create_claim_of(&host, "ns-b", None, Some("ns-a")).await;
    let run = Running::start(
        &host,
        opts(Namespaces::List(vec!["ns-a".into(), "ns-b".into()])),
    );
    eventually_async("ns-a/x engaged as x", DEADLINE, || async {
        matches!(state(&run, "ns-a"), Some(SecretState::Engaged { .. }))
    })
    .await;
    let token = mcr_test_support::active_token(&run.registry, "x").unwrap();

    delete_secret(&host.client(), "ns-a", "x").await;
    eventually_async("ns-b/x owns x, without a kubeconfig", DEADLINE, || async {
        state(&run, "ns-b") == Some(SecretState::MissingKey) && state(&run, "ns-a").is_none()
    })
    .await;
    tokio::time::timeout(DEADLINE, token.cancelled())
        .await
        .expect("the cluster of the deleted Secret is stopped");
    assert!(run.names().is_empty(), "{:?}", run.names());
    run.stop().await;
}
