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
