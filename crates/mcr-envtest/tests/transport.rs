//! HTTPS, bearer tokens, kubeconfigs, fleets and faults.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mcr_envtest::wait::eventually_async;
use mcr_envtest::{ErrorRule, Fleet, Partition, TestCluster};
use mcr_test_support::{DEADLINE, api_code, configmap};

async fn client_from(kubeconfig: Kubeconfig) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn with_token(mut kubeconfig: Kubeconfig, token: Option<&str>) -> Kubeconfig {
    let yaml = serde_json::to_value(&kubeconfig.auth_infos[0]).unwrap();
    let mut user = yaml;
    match token {
        Some(t) => user["user"]["token"] = t.into(),
        None => {
            user["user"].as_object_mut().unwrap().remove("token");
        }
    }
    kubeconfig.auth_infos[0] = serde_json::from_value(user).unwrap();
    kubeconfig
}

#[tokio::test]
async fn https_with_token_and_kubeconfig() {
    let cluster = TestCluster::start_https("secure").await.unwrap();
    let url = cluster.url().unwrap();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let kc = cluster.kubeconfig().unwrap();
    assert_eq!(kc.current_context.as_deref(), Some("secure"));
    assert_eq!(
        kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
        Some(url.as_str())
    );
    assert!(
        !format!("{cluster:?}").contains(cluster.token()),
        "Debug must not leak the token"
    );

    let cms: Api<ConfigMap> = Api::namespaced(cluster.https_client().await.unwrap(), "default");
    cms.create(&PostParams::default(), &configmap("over-tls", &[], "1"))
        .await
        .unwrap();
    assert_eq!(
        cms.get("over-tls").await.unwrap().data.unwrap()["value"],
        "1"
    );
    // Same data through the in-process client.
    let local: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    assert!(local.get("over-tls").await.is_ok());

    // A wrong token is 401; no credential is `system:anonymous`, whom RBAC lets read only
    // public info such as `/version`.
    for (token, code) in [(Some("wrong"), 401), (None, 403)] {
        let client = client_from(with_token(kc.clone(), token)).await;
        let err = Api::<ConfigMap>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap_err();
        assert_eq!(api_code(&err), Some(code), "token {token:?}: {err:?}");
        if token.is_none() {
            assert!(client.apiserver_version().await.is_ok());
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secure.kubeconfig");
    cluster.write_kubeconfig(&path).unwrap();
    let client = client_from(Kubeconfig::read_from(&path).unwrap()).await;
    assert!(
        Api::<ConfigMap>::namespaced(client, "default")
            .get("over-tls")
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn another_clusters_ca_fails_tls() {
    let a = TestCluster::start_https("a").await.unwrap();
    let b = TestCluster::start_https("b").await.unwrap();
    let mut kc = a.kubeconfig().unwrap();
    let b_ca = b.kubeconfig().unwrap().clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .certificate_authority_data
        .clone();
    kc.clusters[0]
        .cluster
        .as_mut()
        .unwrap()
        .certificate_authority_data = b_ca;
    let client = client_from(kc).await;
    let err = client.apiserver_version().await.unwrap_err();
    assert_eq!(api_code(&err), None, "expected a TLS failure, got {err:?}");
    assert!(
        a.https_client()
            .await
            .unwrap()
            .apiserver_version()
            .await
            .is_ok()
    );
    // On the real backend every cluster is served over HTTPS.
    if !mcr_envtest::backend().is_real() {
        assert!(
            TestCluster::start("plain")
                .await
                .unwrap()
                .https_client()
                .await
                .is_err()
        );
    }
}

#[tokio::test]
async fn https_stop_and_restart_keep_port_and_data() {
    let cluster = TestCluster::start_https("restart").await.unwrap();
    let url = cluster.url().unwrap();
    let client = cluster.https_client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &configmap("kept", &[], "1"))
        .await
        .unwrap();

    cluster.stop().await;
    assert!(cms.get("kept").await.is_err());
    assert!(
        cluster
            .https_client()
            .await
            .unwrap()
            .apiserver_version()
            .await
            .is_err()
    );

    cluster.restart().await.unwrap();
    assert_eq!(cluster.url().unwrap(), url);
    // The old client's pooled connection was cut; a fresh request reconnects.
    eventually_async("the restarted cluster to answer", DEADLINE, || async {
        cms.get("kept").await.is_ok()
    })
    .await;
}

#[tokio::test]
async fn https_partition_refuse_and_heal() {
    let cluster = TestCluster::start_https("refuse").await.unwrap();
    let client = cluster.https_client().await.unwrap();
    cluster.partition(Partition::Refuse);
    let err = client.apiserver_version().await.unwrap_err();
    assert_eq!(api_code(&err), None, "{err:?}");
    cluster.heal();
    eventually_async("the healed cluster to answer", DEADLINE, || async {
        client.apiserver_version().await.is_ok()
    })
    .await;
}

#[tokio::test]
async fn in_process_stop_ends_watches_and_refuses() {
    let cluster = TestCluster::start("stop").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    cms.create(&PostParams::default(), &configmap("kept", &[], "1"))
        .await
        .unwrap();
    let mut events = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    // A real server may send a bookmark before the object.
    let first = loop {
        match events.next().await.unwrap().unwrap() {
            WatchEvent::Bookmark(_) => continue,
            event => break event,
        }
    };
    assert!(matches!(first, WatchEvent::Added(_)), "{first:?}");

    cluster.stop().await;
    let ended = tokio::time::timeout(mcr_test_support::DEADLINE, async {
        while let Some(Ok(_)) = events.next().await {}
    });
    ended
        .await
        .expect("the watch must end when the cluster stops");

    let err = cms.get("kept").await.unwrap_err();
    let text = format!("{err:?}");
    assert!(
        text.contains("ConnectionRefused") || text.contains("refused"),
        "{text}"
    );

    cluster.restart().await.unwrap();
    assert!(cms.get("kept").await.is_ok());
}

#[tokio::test]
async fn partition_hang_holds_requests_until_heal() {
    let cluster = TestCluster::start("hang").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    cms.create(&PostParams::default(), &configmap("x", &[], "1"))
        .await
        .unwrap();
    cluster.partition(Partition::Hang);
    let pending = tokio::spawn({
        let cms = cms.clone();
        async move { cms.get("x").await.is_ok() }
    });
    // A hung request cannot finish; give it a moment to prove it does not.
    let early = tokio::time::timeout(Duration::from_millis(200), async {
        while !pending.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(
        early.await.is_err(),
        "a request finished during a Hang partition"
    );
    cluster.heal();
    assert!(
        pending.await.unwrap(),
        "the held request completes after heal"
    );

    cluster.partition(Partition::Refuse);
    assert!(cms.get("x").await.is_err());
    cluster.clear_faults();
    assert!(cms.get("x").await.is_ok());
}

#[tokio::test]
async fn injected_errors_and_latency() {
    if !mcr_envtest::require_emulator("needs error injection and request counters") {
        return;
    }
    let cluster = TestCluster::start("errors").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    cms.create(&PostParams::default(), &configmap("x", &[], "1"))
        .await
        .unwrap();

    cluster.inject_error(
        ErrorRule::new(503)
            .verb("get")
            .resource("configmaps")
            .times(2),
    );
    assert_eq!(api_code(&cms.get("x").await.unwrap_err()), Some(503));
    assert!(
        cms.list(&ListParams::default()).await.is_ok(),
        "other verbs are untouched"
    );
    assert_eq!(api_code(&cms.get("x").await.unwrap_err()), Some(503));
    assert!(cms.get("x").await.is_ok(), "the rule was used up");

    cluster.inject_error(ErrorRule::new(500));
    assert_eq!(
        api_code(&cms.list(&ListParams::default()).await.unwrap_err()),
        Some(500)
    );
    cluster.set_latency(Some(Duration::from_millis(5)));
    cluster.clear_faults();
    assert!(cms.list(&ListParams::default()).await.is_ok());
    cluster.set_latency(Some(Duration::from_millis(5)));
    assert!(
        cms.get("x").await.is_ok(),
        "latency delays but does not fail"
    );

    let counts = cluster.requests();
    assert_eq!(counts.get("get", "configmaps"), 4);
    assert_eq!(counts.total(), counts.iter().map(|(_, n)| n).sum::<u64>());
    cluster.reset_request_counts();
    assert_eq!(cluster.requests().total(), 0);
}

#[tokio::test]
async fn fleet_with_kubeconfig_dir() {
    let dir = tempfile::tempdir().unwrap();
    let mut fleet = Fleet::builder()
        .clusters(2)
        .name_prefix("member")
        .kubeconfig_dir(dir.path())
        .start()
        .await
        .unwrap();
    assert_eq!(fleet.names(), ["member-1", "member-2"]);
    for name in fleet.names() {
        let kc = Kubeconfig::read_from(dir.path().join(format!("{name}.kubeconfig"))).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some(name.as_str()));
        assert!(client_from(kc).await.apiserver_version().await.is_ok());
    }
    let late = fleet.add("late").await.unwrap();
    assert!(dir.path().join("late.kubeconfig").exists());
    assert!(late.https_client().await.is_ok());
    assert!(
        fleet.add("late").await.is_err(),
        "duplicate names are refused"
    );

    let removed = fleet.remove("member-1").await.unwrap();
    assert!(!dir.path().join("member-1.kubeconfig").exists());
    assert!(
        removed.client().apiserver_version().await.is_err(),
        "a removed cluster is stopped"
    );
    assert_eq!(fleet.names(), ["member-2", "late"]);
    assert!(fleet.remove("nope").await.is_none());

    if fleet.backend().is_real() {
        return; // Real clusters are always served over HTTPS; the rest checks in-process ones.
    }
    let plain = Fleet::start(3).await.unwrap();
    assert_eq!(plain.names(), ["cluster-1", "cluster-2", "cluster-3"]);
    assert!(plain.get("cluster-2").unwrap().url().is_none());
    assert!(
        plain.write_kubeconfigs(dir.path()).is_err(),
        "in-process clusters have no kubeconfig"
    );
}
