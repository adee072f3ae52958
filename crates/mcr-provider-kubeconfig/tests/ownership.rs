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
        put_secret(host, ns, "x", "true", Some(kubeconfig.as_bytes()), &[]).await;
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
async fn marker_of_x(run: &Running) -> Option<String> {
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
            .create(&PostParams::default(), &configmap("marker", animal))
            .await
            .unwrap();
    }
    create_namespace(&host, "ns-a").await;
    create_namespace(&host, "ns-b").await;
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
