//! The Gardener provider against an emulated garden whose Shoots are HTTPS clusters with
//! expiring client certificates.

mod common;

use std::time::Duration;

use common::{DEADLINE, options};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use mcr_core::{ClusterName, Engagements, Provider, ProviderRunnable};
use mcr_envtest::TestCluster;
use mcr_envtest::garden::Garden;
use mcr_envtest::wait::{eventually, eventually_async};
use mcr_provider_gardener::{Address, GardenerProvider, KubeconfigKind, Options};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn start(provider: &GardenerProvider) -> (Engagements, CancellationToken) {
    let registry = Engagements::new();
    let token = CancellationToken::new();
    let (p, t, r) = (provider.clone(), token.clone(), registry.clone());
    tokio::spawn(async move { p.start(t, r).await });
    (registry, token)
}

fn names(provider: &GardenerProvider) -> Vec<String> {
    let mut names: Vec<String> = provider
        .cluster_names()
        .iter()
        .map(|n| n.as_str().to_string())
        .collect();
    names.sort();
    names
}

async fn list_ok(client: &kube::Client) -> bool {
    let api: Api<Namespace> = Api::all(client.clone());
    api.list(&ListParams::default()).await.is_ok()
}

async fn create_cm(client: &kube::Client, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
}

#[tokio::test]
async fn shoots_engage_and_renew_in_place_without_relist() {
    if !mcr_envtest::require_emulator("the garden is emulated") {
        return;
    }
    let garden = Garden::start(Duration::from_secs(4)).await.unwrap();
    let a = TestCluster::start_https("shoot-a").await.unwrap();
    let b = TestCluster::start_https("shoot-b").await.unwrap();
    garden.add_shoot("garden-dev", "a", &a).await.unwrap();
    garden.add_shoot("garden-dev", "b", &b).await.unwrap();
    let provider = GardenerProvider::new(
        garden.cluster().client(),
        options(Duration::from_secs(3600)),
    );
    let (registry, token) = start(&provider);
    // Engaged (the registry), then active in the provider once synced.
    eventually("both shoots to engage", DEADLINE, || {
        registry.names().len() == 2 && names(&provider) == ["garden-dev/a", "garden-dev/b"]
    })
    .await;

    let name = ClusterName::from("garden-dev/a");
    let cluster = provider.get(&name).await.unwrap();
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    let lists = a.request_count("list", "configmaps");
    let admin = a.https_client().await.unwrap();
    let mut failed = 0;
    let mut written = 0;
    while cluster.credentials().unwrap().status().renewals < 3 {
        written += 1;
        let cm = format!("cm-{written}");
        create_cm(&admin, &cm).await;
        if !list_ok(&cluster.client()).await {
            failed += 1;
        }
        eventually("the write in the informer", DEADLINE, || {
            informer.get(Some("default"), &cm).is_some()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(written < 1000, "no renewal happened");
    }
    assert_eq!(failed, 0, "no request failed for expired credentials");
    // Every connection cut: the watch comes back with the current certificate.
    a.stop().await;
    a.restart().await.unwrap();
    create_cm(&admin, "after-restart").await;
    eventually("the event after the reconnect", DEADLINE, || {
        informer.get(Some("default"), "after-restart").is_some()
    })
    .await;
    assert_eq!(a.request_count("list", "configmaps"), lists, "no relist");
    let same = provider.get(&name).await.unwrap();
    assert!(
        same.same_instance(&cluster),
        "renewed in place, not replaced"
    );
    assert!(
        garden.kubeconfig_requests() >= 5,
        "two engagements and three renewals"
    );
    assert!(
        garden.kubeconfig_requests() >= 5
            && garden
                .cluster()
                .request_count("create", "shoots/adminkubeconfig")
                >= 5
    );
    token.cancel();
}

#[tokio::test]
async fn readiness_hibernation_deletion_and_scope() {
    if !mcr_envtest::require_emulator("the garden is emulated") {
        return;
    }
    let garden = Garden::start(Duration::from_secs(600)).await.unwrap();
    let members: Vec<TestCluster> = futures::future::try_join_all(
        ["ready", "creating", "elsewhere"].map(TestCluster::start_https),
    )
    .await
    .unwrap();
    garden
        .add_shoot("garden-dev", "ready", &members[0])
        .await
        .unwrap();
    garden
        .add_shoot("garden-dev", "creating", &members[1])
        .await
        .unwrap();
    garden
        .set_status(
            "garden-dev",
            "creating",
            json!({"lastOperation": {"type": "Create", "state": "Processing"}}),
        )
        .await
        .unwrap();
    garden
        .add_shoot("garden-other", "elsewhere", &members[2])
        .await
        .unwrap();

    let provider =
        GardenerProvider::new(garden.cluster().client(), options(Duration::from_secs(600)));
    let (registry, token) = start(&provider);
    eventually("the ready shoot to engage", DEADLINE, || {
        registry.names().len() == 1
    })
    .await;
    assert_eq!(
        names(&provider),
        ["garden-dev/ready"],
        "not creating, not out of scope"
    );

    garden
        .set_status(
            "garden-dev",
            "creating",
            json!({"lastOperation": {"type": "Create", "state": "Succeeded"}}),
        )
        .await
        .unwrap();
    eventually("the created shoot to engage", DEADLINE, || {
        names(&provider) == ["garden-dev/creating", "garden-dev/ready"]
    })
    .await;

    garden
        .set_status("garden-dev", "ready", json!({"hibernated": true}))
        .await
        .unwrap();
    eventually("the hibernated shoot to disengage", DEADLINE, || {
        names(&provider) == ["garden-dev/creating"]
    })
    .await;

    garden.delete_shoot("garden-dev", "creating").await.unwrap();
    eventually("the deleted shoot to disengage", DEADLINE, || {
        provider.cluster_names().is_empty() && registry.names().is_empty()
    })
    .await;
    token.cancel();
}

#[tokio::test]
async fn viewer_kubeconfig_internal_address_and_hibernated_option() {
    if !mcr_envtest::require_emulator("the garden is emulated") {
        return;
    }
    let garden = Garden::start(Duration::from_secs(600)).await.unwrap();
    let member = TestCluster::start_https("sleepy").await.unwrap();
    garden
        .add_shoot("garden-dev", "sleepy", &member)
        .await
        .unwrap();
    garden
        .set_status("garden-dev", "sleepy", json!({"hibernated": true}))
        .await
        .unwrap();
    let provider = GardenerProvider::new(
        garden.cluster().client(),
        Options {
            kubeconfig: KubeconfigKind::Viewer,
            address: Address::Named("internal".into()),
            engage_hibernated: true,
            ..options(Duration::from_secs(600))
        },
    );
    let (registry, token) = start(&provider);
    eventually("the hibernated shoot to engage", DEADLINE, || {
        registry.names().len() == 1
    })
    .await;
    let cluster = provider.get(&"garden-dev/sleepy".into()).await.unwrap();
    assert!(list_ok(&cluster.client()).await);
    assert_eq!(
        garden
            .cluster()
            .request_count("create", "shoots/viewerkubeconfig"),
        1
    );
    assert_eq!(
        garden
            .cluster()
            .request_count("create", "shoots/adminkubeconfig"),
        0
    );
    token.cancel();
}

#[tokio::test]
async fn renewal_failing_past_expiry_reports_unhealthy_then_recovers() {
    if !mcr_envtest::require_emulator("the garden is emulated") {
        return;
    }
    let garden = Garden::start(Duration::from_secs(3)).await.unwrap();
    let member = TestCluster::start_https("lapsing").await.unwrap();
    garden
        .add_shoot("garden-dev", "lapsing", &member)
        .await
        .unwrap();
    let provider = GardenerProvider::new(
        garden.cluster().client(),
        options(Duration::from_secs(3600)),
    );
    let (registry, token) = start(&provider);
    eventually("the shoot to engage", DEADLINE, || {
        registry.names().len() == 1
    })
    .await;
    let cluster = provider.get(&"garden-dev/lapsing".into()).await.unwrap();
    garden.set_failing(true);
    eventually("the credentials to expire", DEADLINE, || {
        let s = cluster.credentials().unwrap().status();
        s.is_expired() && s.is_renewal_failing()
    })
    .await;
    // NotAfter has whole seconds: the server refuses within the second after it.
    let client = cluster.client();
    eventually_async(
        "the server to refuse the lapsed certificate",
        DEADLINE,
        || {
            let client = client.clone();
            async move { !list_ok(&client).await }
        },
    )
    .await;
    garden.set_failing(false);
    eventually("renewal to recover", DEADLINE, || {
        let s = cluster.credentials().unwrap().status();
        !s.is_expired() && !s.is_renewal_failing()
    })
    .await;
    assert!(list_ok(&cluster.client()).await, "healthy again");
    assert!(
        provider
            .get(&"garden-dev/lapsing".into())
            .await
            .unwrap()
            .same_instance(&cluster)
    );
    token.cancel();
}
