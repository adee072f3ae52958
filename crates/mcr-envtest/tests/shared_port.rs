//! Many HTTPS clusters on one port, told apart by the path prefix of their server URL
//! (`FleetBuilder::shared_port`). Emulator only: on the real backend every cluster has its own
//! API server, and the option is ignored.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mcr_envtest::wait::eventually_async;
use mcr_envtest::{Error, Fleet, Partition};
use mcr_test_support::{DEADLINE, api_code, configmap};

/// A client from `kubeconfig`, with its server URL and token replaced when given.
async fn client(kubeconfig: Kubeconfig, server: Option<&str>, token: Option<&str>) -> kube::Client {
    let mut value = serde_json::to_value(&kubeconfig).unwrap();
    if let Some(server) = server {
        value["clusters"][0]["cluster"]["server"] = server.into();
    }
    if let Some(token) = token {
        value["users"][0]["user"]["token"] = token.into();
    }
    let kubeconfig: Kubeconfig = serde_json::from_value(value).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn shared_fleet(n: usize) -> Option<Fleet> {
    if !mcr_envtest::require_emulator("a shared port is the emulator's") {
        return None;
    }
    Some(
        Fleet::builder()
            .clusters(n)
            .shared_port(true)
            .start()
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn clusters_on_one_port_keep_their_own_state_and_watches() {
    let Some(fleet) = shared_fleet(3).await else {
        return;
    };
    let urls: Vec<String> = fleet.clusters().iter().map(|c| c.url().unwrap()).collect();
    let port = |url: &str| url.split("/clusters/").next().unwrap().to_string();
    assert!(urls[0].ends_with("/clusters/cluster-1"), "{}", urls[0]);
    assert_eq!(port(&urls[0]), port(&urls[1]), "one port for all: {urls:?}");
    assert_eq!(port(&urls[1]), port(&urls[2]));

    let one: Api<ConfigMap> =
        Api::namespaced(fleet.clusters()[0].https_client().await.unwrap(), "default");
    let two: Api<ConfigMap> =
        Api::namespaced(fleet.clusters()[1].https_client().await.unwrap(), "default");
    let mut watch = two
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    one.create(&PostParams::default(), &configmap("only-in-one", &[], "1"))
        .await
        .unwrap();
    two.create(&PostParams::default(), &configmap("only-in-two", &[], "1"))
        .await
        .unwrap();
    assert!(one.get("only-in-one").await.is_ok());
    assert_eq!(
        api_code(&one.get("only-in-two").await.unwrap_err()),
        Some(404)
    );
    // The watch through the prefix sees its own cluster's object, not the other's.
    let first = tokio::time::timeout(DEADLINE, async {
        loop {
            match watch.next().await {
                Some(Ok(WatchEvent::Added(cm))) => break cm.metadata.name,
                Some(Ok(_)) => continue,
                other => panic!("the watch ended: {other:?}"),
            }
        }
    })
    .await
    .expect("a watch event within the deadline");
    assert_eq!(first.as_deref(), Some("only-in-two"));
    // The same data through the in-process client.
    assert!(
        Api::<ConfigMap>::namespaced(fleet.clusters()[0].client(), "default")
            .get("only-in-one")
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_token_opens_only_its_own_cluster_and_unknown_prefixes_are_404() {
    let Some(fleet) = shared_fleet(2).await else {
        return;
    };
    let (a, b) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let b_url = b.url().unwrap();
    // a's token on b's path.
    let borrowed = client(a.kubeconfig().unwrap(), Some(&b_url), None).await;
    let err = borrowed.apiserver_version().await.unwrap_err();
    assert_eq!(api_code(&err), Some(401), "{err:?}");
    // b's own token works there.
    let own = client(a.kubeconfig().unwrap(), Some(&b_url), Some(b.token())).await;
    own.apiserver_version().await.unwrap();
    // A prefix no cluster has, and the port's root.
    let root = b_url.split("/clusters/").next().unwrap().to_string();
    for server in [format!("{root}/clusters/nobody"), root] {
        let stray = client(a.kubeconfig().unwrap(), Some(&server), None).await;
        let cms: Api<ConfigMap> = Api::namespaced(stray, "default");
        let err = cms.list(&Default::default()).await.unwrap_err();
        assert_eq!(api_code(&err), Some(404), "{server}: {err:?}");
    }
}

#[tokio::test]
async fn a_stopped_or_removed_cluster_leaves_the_others_served() {
    let Some(mut fleet) = shared_fleet(3).await else {
        return;
    };
    let one = fleet.clusters()[0].clone();
    let two = fleet.clusters()[1].clone();
    let one_client = one.https_client().await.unwrap();
    let two_client = two.https_client().await.unwrap();
    let mut watch = Api::<ConfigMap>::namespaced(one_client.clone(), "default")
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    one.stop().await;
    assert!(one_client.apiserver_version().await.is_err());
    two_client.apiserver_version().await.unwrap();
    // The stopped cluster's open watch ends.
    tokio::time::timeout(DEADLINE, async {
        while let Some(Ok(_)) = watch.next().await {}
    })
    .await
    .expect("the stopped cluster's watch to end");
    one.restart().await.unwrap();
    eventually_async("the restarted cluster to answer", DEADLINE, || async {
        one_client.apiserver_version().await.is_ok()
    })
    .await;

    one.partition(Partition::Refuse);
    let err = one_client.apiserver_version().await.unwrap_err();
    assert_eq!(api_code(&err), None, "refused like a dead server: {err:?}");
    two_client.apiserver_version().await.unwrap();
    one.heal();
    eventually_async("the healed cluster to answer", DEADLINE, || async {
        one_client.apiserver_version().await.is_ok()
    })
    .await;

    let three = fleet.remove("cluster-3").await.unwrap();
    let three_client = client(three.kubeconfig().unwrap(), None, None).await;
    drop(three);
    let err = three_client.apiserver_version().await.unwrap_err();
    assert_eq!(
        api_code(&err),
        Some(404),
        "a removed cluster's path: {err:?}"
    );
    two_client.apiserver_version().await.unwrap();

    let late = fleet.add("late").await.unwrap();
    assert!(late.url().unwrap().ends_with("/clusters/late"));
    late.https_client()
        .await
        .unwrap()
        .apiserver_version()
        .await
        .unwrap();
    assert!(matches!(
        fleet.add("not/one/segment").await,
        Err(Error::InvalidName(name)) if name == "not/one/segment"
    ));
}
