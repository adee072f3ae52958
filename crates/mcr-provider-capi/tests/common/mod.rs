//! Helpers shared by the Cluster API provider's tests: a management cluster serving a minimal
//! `clusters.cluster.x-k8s.io` CRD (v1beta1 and v1beta2), HTTPS workload clusters whose
//! kubeconfigs go into `<cluster>-kubeconfig` Secrets, and a running provider.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use mcr_core::scope::Namespaces;
use mcr_core::{Aware, Cluster, ClusterId, ClusterName, Engagements};
use mcr_envtest::TestCluster;
pub use mcr_provider_capi::StatusProvider;
use mcr_provider_capi::{
    CLUSTER_NAME_LABEL, CapiProvider, CapiVersion, ClusterState, ObjectRef, Options,
};
pub use mcr_test_support::{
    assert_watch_kept, init_tracing, kubeconfig_of, minted_kubeconfig, wait_renewals,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const DEADLINE: Duration = Duration::from_secs(60);

/// Test options: short backoff and timeouts.
pub fn opts(version: CapiVersion, namespaces: Namespaces) -> Options {
    Options {
        version,
        namespaces,
        members: mcr_test_support::fast_members(),
        ..Options::default()
    }
}

/// A management cluster with the Cluster API `Cluster` CRD installed (both versions served,
/// v1beta2 stored; the emulator does no conversion, so each test writes the fields of the
/// version it reads).
pub async fn management() -> TestCluster {
    let host = TestCluster::start("management").await.unwrap();
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusters.cluster.x-k8s.io"},
        "spec": {
            "group": "cluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster", "listKind": "ClusterList"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema},
                {"name": "v1beta2", "served": true, "storage": true, "schema": schema},
            ],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(host.client())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    for version in [CapiVersion::V1Beta1, CapiVersion::V1Beta2] {
        let api: Api<DynamicObject> = Api::all_with(host.client(), &version.api_resource());
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while api.list(&Default::default()).await.is_err() {
            assert!(tokio::time::Instant::now() < deadline, "CRD never served");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    host
}

pub async fn create_namespace(host: &TestCluster, name: &str) {
    mcr_test_support::create_namespace(&host.client(), name, &[]).await;
}

fn clusters_api(host: &TestCluster, version: CapiVersion, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(host.client(), ns, &version.api_resource())
}

/// The status that makes a Cluster of `version` ready (or not) by the default rules.
pub fn ready_status(version: CapiVersion, ready: bool) -> Value {
    match version {
        CapiVersion::V1Beta2 => json!({"initialization": {"controlPlaneInitialized": ready}}),
        CapiVersion::V1Beta1 => {
            json!({"phase": if ready { "Provisioned" } else { "Provisioning" }, "controlPlaneReady": ready})
        }
    }
}

/// Creates a `Cluster` with the given labels and readiness.
pub async fn create_cluster(
    host: &TestCluster,
    version: CapiVersion,
    ns: &str,
    name: &str,
    ready: bool,
    labels: &[(&str, &str)],
) {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("cluster.x-k8s.io/{}", version.as_str()),
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"paused": false},
        "status": ready_status(version, ready),
    }))
    .unwrap();
    clusters_api(host, version, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

/// Merge-patches a `Cluster`.
pub async fn patch_cluster(
    host: &TestCluster,
    version: CapiVersion,
    ns: &str,
    name: &str,
    patch: Value,
) {
    clusters_api(host, version, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

pub async fn set_ready(
    host: &TestCluster,
    version: CapiVersion,
    ns: &str,
    name: &str,
    ready: bool,
) {
    let patch = json!({"status": ready_status(version, ready)});
    patch_cluster(host, version, ns, name, patch).await;
}

pub async fn delete_cluster(host: &TestCluster, version: CapiVersion, ns: &str, name: &str) {
    clusters_api(host, version, ns)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

/// Creates or replaces the kubeconfig Secret of Cluster `cluster`: key `value` holds `data`
/// (left out when `None`), labelled as Cluster API labels it. Returns its resourceVersion.
pub async fn put_secret(
    host: &TestCluster,
    ns: &str,
    cluster: &str,
    data: Option<&[u8]>,
    annotations: &[(&str, &str)],
) -> String {
    let name = format!("{cluster}-kubeconfig");
    mcr_test_support::apply_secret(&host.client(), ns, &name, |secret| {
        secret.metadata.labels = Some(mcr_test_support::string_map(&[(
            CLUSTER_NAME_LABEL,
            cluster,
        )]));
        secret.metadata.annotations = Some(mcr_test_support::string_map(annotations));
        secret.type_ = Some("cluster.x-k8s.io/secret".into());
        secret.data = Some(
            data.map(|d| ("value".to_string(), ByteString(d.to_vec())))
                .into_iter()
                .collect(),
        );
    })
    .await
}

/// An Aware sink: a `Registry` plus the log of every engagement (name, instance).
#[derive(Default)]
pub struct Recorder {
    pub log: Mutex<Vec<(String, ClusterId)>>,
}

impl Aware for Recorder {
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        self.log
            .lock()
            .unwrap()
            .push((name.to_string(), cluster.id()));
        let _ = token;
        Ok(())
    }
}

/// The provider under test, running against a [`Recorder`].
pub type Running = mcr_test_support::Running<CapiProvider, Recorder>;

/// What these tests add to [`Running`].
pub trait CapiRun {
    /// A provider on `host` with `opts`, started against a [`Recorder`].
    fn start(host: &TestCluster, opts: Options) -> Running;
    /// Every instance engaged under `name`, in order.
    fn engagements(&self, name: &str) -> Vec<ClusterId>;
    /// What the provider made of the `Cluster` `ns/name`.
    fn state(&self, ns: &str, name: &str) -> Option<ClusterState>;
}

impl CapiRun for Running {
    fn start(host: &TestCluster, opts: Options) -> Running {
        let recorder = Arc::new(Recorder::default());
        let provider = CapiProvider::new(host.client(), opts);
        Running::spawn_with(provider, recorder)
    }

    fn engagements(&self, name: &str) -> Vec<ClusterId> {
        let log = self.aware.log.lock().unwrap();
        log.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, id)| *id)
            .collect()
    }

    fn state(&self, ns: &str, name: &str) -> Option<ClusterState> {
        self.provider
            .status(&ObjectRef::new(ns, name))
            .map(|s| s.state)
    }
}
