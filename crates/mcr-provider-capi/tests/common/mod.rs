//! The Cluster API provider's own test helpers, used by all of its test binaries: `Cluster`s
//! and `<cluster>-kubeconfig` Secrets as Cluster API writes them, and what these tests add to
//! a running provider. The CRD, deadlines and the running provider itself come from
//! `mcr-test-support`.
#![allow(dead_code, unused_imports)]

use std::sync::{Arc, Mutex};

use k8s_openapi::ByteString;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use mcr_core::scope::Namespaces;
use mcr_core::{Aware, Cluster, ClusterId, ClusterName};
use mcr_envtest::TestCluster;
pub use mcr_provider_capi::StatusProvider;
use mcr_provider_capi::{
    CLUSTER_NAME_LABEL, CapiProvider, CapiVersion, ClusterState, ObjectRef, Options,
};
pub use mcr_test_support::{
    WAIT, assert_watch_kept, create_namespace, init_tracing, kubeconfig_of, minted_kubeconfig,
    wait_renewals,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

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
    mcr_test_support::install_crd(&host.client(), &mcr_test_support::capi_cluster_crd()).await;
    host
}

fn clusters_api(host: &TestCluster, version: CapiVersion, ns: &str) -> Api<DynamicObject> {
    mcr_test_support::capi_clusters(&host.client(), ns, version.as_str())
}

/// The status that makes a Cluster of `version` ready (or not) by the default rules.
pub fn ready_status(version: CapiVersion, ready: bool) -> Value {
    mcr_test_support::capi_ready_status(version.as_str(), ready)
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
    let mut obj = mcr_test_support::capi_cluster(version.as_str(), name, ready);
    obj.metadata.namespace = Some(ns.into());
    obj.metadata.labels = Some(mcr_test_support::string_map(labels));
    clusters_api(host, version, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

/// Waits until a `Cluster` created now is strictly younger than `ns/name` (by
/// `creationTimestamp`, which has a one-second resolution).
pub async fn after_created(host: &TestCluster, version: CapiVersion, ns: &str, name: &str) {
    let obj = clusters_api(host, version, ns).get(name).await.unwrap();
    let created = obj
        .metadata
        .creation_timestamp
        .expect("set by the server")
        .0;
    let later = created + k8s_openapi::jiff::SignedDuration::from_secs(1);
    let what = format!("the clock is a second past the creation of {ns}/{name}");
    mcr_envtest::wait::eventually(&what, WAIT, || k8s_openapi::jiff::Timestamp::now() >= later)
        .await;
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
