//! End to end across crates: kubeconfig Secrets on a host cluster (mcr-provider-kubeconfig)
//! drive a Manager (mcr-manager) whose controller reconciles ConfigMaps in every member cluster
//! (mcr-envtest, over HTTPS with real kubeconfigs). Deleting a Secret removes its cluster and
//! the controller stops working there.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::{ByteString, api::core::v1::ConfigMap, api::core::v1::Secret};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ObjectMeta, PostParams},
    runtime::controller::Action,
};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::{Context, Controller, Manager};
use mcr_provider_kubeconfig::{DEFAULT_LABEL, KubeconfigProvider, Options};
use tokio_util::sync::CancellationToken;

/// What the reconciler saw: (cluster, configmap name).
type Seen = Mutex<Vec<(String, String)>>;

async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Seen>) -> Result<Action, kube::Error> {
    let entry = (ctx.cluster_name().to_string(), cm.name_any());
    ctx.data().lock().unwrap().push(entry);
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<Seen>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn put_kubeconfig_secret(host: &TestCluster, member: &TestCluster) {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(member.name().to_string()),
            labels: Some(BTreeMap::from([(
                DEFAULT_LABEL.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "kubeconfig".to_string(),
            ByteString(member.kubeconfig_yaml().unwrap().into_bytes()),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(host.client(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

async fn create_configmap(member: &TestCluster, name: &str) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(member.client(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

fn saw(seen: &Seen, cluster: &str, name: &str) -> bool {
    seen.lock()
        .unwrap()
        .iter()
        .any(|(c, n)| c == cluster && n == name)
}

#[tokio::test]
async fn secrets_drive_the_fleet_of_a_controller() {
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(2)
        .name_prefix("member")
        .https(true)
        .start()
        .await
        .unwrap();
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    create_configmap(m1, "existing").await;

    let provider = KubeconfigProvider::new(host.client(), Options::default());
    let mgr = Manager::new(host.client(), Some(Arc::new(provider)));
    let seen: Arc<Seen> = Arc::default();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .register(reconcile, error_policy, seen.clone())
        .unwrap();
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });

    // A Secret engages its cluster; objects that existed before are reconciled.
    put_kubeconfig_secret(&host, m1).await;
    eventually("existing object in member-1", || {
        saw(&seen, "member-1", "existing")
    })
    .await;

    // A second Secret, added while running, brings a second cluster.
    put_kubeconfig_secret(&host, m2).await;
    create_configmap(m2, "later").await;
    eventually("new object in member-2", || saw(&seen, "member-2", "later")).await;
    assert!(mgr.cluster("member-2").await.is_ok());

    // Deleting the Secret removes the cluster: the manager forgets it, and work created there
    // afterwards is never reconciled.
    Api::<Secret>::namespaced(host.client(), "default")
        .delete("member-1", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while mgr.cluster("member-1").await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "member-1 still engaged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    create_configmap(m1, "after-removal").await;
    // A marker in the other cluster, created after the one in member-1: once it is reconciled,
    // the queue has moved past the point where member-1's object would have arrived.
    create_configmap(m2, "marker").await;
    eventually("marker in member-2", || saw(&seen, "member-2", "marker")).await;
    assert!(
        !saw(&seen, "member-1", "after-removal"),
        "a removed cluster was reconciled"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
}

/// `GET path` on the manager's endpoint: the whole answer, head and body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn a_secret_whose_kubeconfig_fails_shows_in_clusters_and_the_members_gauge() {
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(1)
        .name_prefix("member")
        .https(true)
        .start()
        .await
        .unwrap();
    let member = &fleet.clusters()[0];
    let provider = KubeconfigProvider::new(host.client(), Options::default());
    let mgr = Manager::builder(host.client())
        .provider(Arc::new(provider))
        .metrics_address(([127, 0, 0, 1], 0).into())
        .build();
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });
    eventually("endpoint bound", || mgr.http_addr().is_some()).await;
    let addr = mgr.http_addr().unwrap();

    put_kubeconfig_secret(&host, member).await;
    // A kubeconfig that parses but names a context it does not have; its token must not
    // show anywhere.
    let broken = "apiVersion: v1\nkind: Config\ncurrent-context: missing\nclusters: []\ncontexts: []\nusers:\n- name: u\n  user:\n    token: hunter2-do-not-show\n";
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("broken".to_string()),
            labels: Some(BTreeMap::from([(
                DEFAULT_LABEL.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "kubeconfig".to_string(),
            ByteString(broken.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(host.client(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    eventually("the good member engaged", || {
        mgr.engaged_clusters().iter().any(|n| *n == "member-1")
    })
    .await;

    // The status API, /clusters and the gauge all show the failing member with its reason.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (clusters, metrics) = loop {
        let clusters = http_get(addr, "/clusters").await;
        let metrics = http_get(addr, "/metrics").await;
        let listed = mgr.cluster_statuses().iter().any(|s| s.name == "broken");
        if listed
            && clusters.lines().any(|l| l.starts_with("broken "))
            && metrics.contains(r#"mcr_members{provider="kubeconfig",state="failed"} 1"#)
        {
            break (clusters, metrics);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the broken Secret is not reported: {clusters}\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let line = clusters.lines().find(|l| l.starts_with("broken ")).unwrap();
    assert!(line.contains("member=failed"), "{line}");
    assert!(
        line.contains("secret default/broken"),
        "the reason names the Secret: {line}"
    );
    assert!(
        line.contains("missing"),
        "the reason says what is wrong: {line}"
    );
    assert!(
        metrics.contains(r#"mcr_members{provider="kubeconfig",state="engaged"} 1"#),
        "{metrics}"
    );
    for text in [&clusters, &metrics] {
        assert!(!text.contains("hunter2"), "a credential leaked: {text}");
    }

    // Deleting the Secret removes it from every view.
    Api::<Secret>::namespaced(host.client(), "default")
        .delete("broken", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted Secret gone from the statuses", || {
        !mgr.cluster_statuses().iter().any(|s| s.name == "broken")
    })
    .await;

    stop.cancel();
    run.await.unwrap().unwrap();
}
