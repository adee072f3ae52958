//! The garden helper: Shoots and the adminkubeconfig subresource (GEP-16).

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use mcr_envtest::TestCluster;
use mcr_envtest::garden::Garden;
use mcr_test_support::api_code;
use serde_json::{Value, json};

fn shoots(garden: &Garden, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("core.gardener.cloud", "v1beta1", "Shoot"),
        "shoots",
    );
    Api::namespaced_with(garden.cluster().client(), ns, &ar)
}

async fn request(
    garden: &Garden,
    ns: &str,
    name: &str,
    seconds: u64,
) -> Result<Value, kube::Error> {
    let body = json!({
        "apiVersion": "authentication.gardener.cloud/v1alpha1",
        "kind": "AdminKubeconfigRequest",
        "spec": {"expirationSeconds": seconds},
    });
    shoots(garden, ns)
        .create_subresource("adminkubeconfig", name, &PostParams::default(), &body)
        .await
}

#[tokio::test]
async fn admin_kubeconfig_is_minted_for_the_shoot_and_capped() {
    if !mcr_envtest::require_emulator("the garden is emulated") {
        return;
    }
    let garden = Garden::start(Duration::from_secs(120)).await.unwrap();
    let member = TestCluster::start_https("shoot-a").await.unwrap();
    garden.add_shoot("garden-dev", "a", &member).await.unwrap();

    let shoot = shoots(&garden, "garden-dev").get("a").await.unwrap();
    assert_eq!(
        shoot.data["status"]["lastOperation"]["state"],
        json!("Succeeded")
    );
    assert_eq!(
        shoot.data["status"]["advertisedAddresses"][0]["url"],
        json!(member.url().unwrap())
    );

    let answer = request(&garden, "garden-dev", "a", 3600).await.unwrap();
    assert_eq!(answer["spec"]["expirationSeconds"], json!(120), "capped");
    let expires: jiff::Timestamp = answer["status"]["expirationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let left = expires.duration_since(jiff::Timestamp::now());
    assert!(left.as_secs() <= 120 && left.as_secs() > 60, "{left:?}");
    let yaml = base64::engine::general_purpose::STANDARD
        .decode(answer["status"]["kubeconfig"].as_str().unwrap())
        .unwrap();
    let kc = Kubeconfig::from_yaml(std::str::from_utf8(&yaml).unwrap()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let namespaces: Api<Namespace> = Api::all(client);
    namespaces.list(&ListParams::default()).await.unwrap();
    assert_eq!(garden.kubeconfig_requests(), 1);
    assert_eq!(
        garden
            .cluster()
            .request_count("create", "shoots/adminkubeconfig"),
        1
    );
}

#[tokio::test]
async fn unknown_shoots_and_failures_are_api_errors() {
    if !mcr_envtest::require_emulator("the garden is emulated") {
        return;
    }
    let garden = Garden::start(Duration::from_secs(120)).await.unwrap();
    let member = TestCluster::start_https("shoot-b").await.unwrap();
    garden.add_shoot("garden-dev", "b", &member).await.unwrap();
    let err = request(&garden, "garden-dev", "nope", 600)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(404));
    garden.set_failing(true);
    let err = request(&garden, "garden-dev", "b", 600).await.unwrap_err();
    assert_eq!(api_code(&err), Some(503));
    garden.set_failing(false);
    request(&garden, "garden-dev", "b", 600).await.unwrap();
}
