//! The Cluster Inventory provider's own test helpers, used by all of its test binaries: a hub
//! serving the ClusterProfile CRD, profiles and kubeconfig Secrets labelled as the API defines
//! them, and what these tests add to a running provider. Deadlines, CRD installation and the
//! running provider itself come from `mcr-test-support`.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use mcr_envtest::TestCluster;
pub use mcr_provider_cluster_inventory::StatusProvider;
use mcr_provider_cluster_inventory::{
    ClusterInventoryProvider, ClusterProfile, Options, ProfileRef, ProfileState, SECRET_DATA_KEY,
    SECRET_LABEL_CONSUMER, SECRET_LABEL_PROFILE,
};
pub use mcr_test_support::{DEADLINE, delete_secret, init_tracing, kubeconfig_of};
use serde_json::{Value, json};

pub const CONSUMER: &str = "test-consumer";

/// Test timings: short retries, bounded syncs.
pub fn fast(opts: Options) -> Options {
    Options {
        members: mcr_test_support::fast_members(),
        ..opts
    }
}

/// A hub with the ClusterProfile CRD served.
pub async fn hub() -> TestCluster {
    let hub = TestCluster::start("hub").await.unwrap();
    let crd: CustomResourceDefinition =
        serde_json::from_str(include_str!("../../testdata/clusterprofiles-crd.json")).unwrap();
    mcr_test_support::install_crd(&hub.client(), &crd).await;
    hub
}

pub fn profiles(hub: &TestCluster, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(hub.client(), ns, &ClusterProfile::api_resource())
}

/// A status with condition ControlPlaneHealthy = `healthy`, plus `extra` fields merged in.
pub fn status(healthy: bool, extra: Value) -> Value {
    let mut s = json!({"conditions": [{
        "type": "ControlPlaneHealthy",
        "status": if healthy { "True" } else { "False" },
        "reason": "Test", "message": "set by the test",
    }]});
    if let (Some(s), Value::Object(extra)) = (s.as_object_mut(), extra) {
        s.extend(extra);
    }
    s
}

/// Creates or replaces a profile (status included: the test CRD has no status subresource).
/// Returns its resourceVersion.
pub async fn put_profile(hub: &TestCluster, ns: &str, name: &str, status: Value) -> String {
    put_profile_with(hub, ns, name, status, json!({})).await
}

pub async fn put_profile_with(
    hub: &TestCluster,
    ns: &str,
    name: &str,
    status: Value,
    metadata: Value,
) -> String {
    let api = profiles(hub, ns);
    let mut obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"displayName": name, "clusterManager": {"name": "test"}},
        "status": status,
    }))
    .unwrap();
    if let Value::Object(extra) = metadata {
        let mut meta = serde_json::to_value(&obj.metadata).unwrap();
        meta.as_object_mut().unwrap().extend(extra);
        obj.metadata = serde_json::from_value(meta).unwrap();
    }
    let stored = match api.get_opt(name).await.unwrap() {
        Some(existing) => {
            obj.metadata.resource_version = existing.metadata.resource_version;
            api.replace(name, &PostParams::default(), &obj)
                .await
                .unwrap()
        }
        None => api.create(&PostParams::default(), &obj).await.unwrap(),
    };
    stored.metadata.resource_version.unwrap()
}

pub async fn delete_profile(hub: &TestCluster, ns: &str, name: &str) {
    profiles(hub, ns)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

/// Creates or replaces a kubeconfig Secret labelled for `profile` and `consumer`.
pub async fn put_secret(
    hub: &TestCluster,
    ns: &str,
    name: &str,
    consumer: &str,
    profile: &str,
    kubeconfig: Option<&str>,
) {
    mcr_test_support::apply_secret(&hub.client(), ns, name, |secret| {
        secret.metadata.labels = Some(mcr_test_support::string_map(&[
            (SECRET_LABEL_CONSUMER, consumer),
            (SECRET_LABEL_PROFILE, profile),
        ]));
        secret.data = kubeconfig.map(|kc| {
            BTreeMap::from([(
                SECRET_DATA_KEY.to_string(),
                ByteString(kc.as_bytes().to_vec()),
            )])
        });
    })
    .await;
}

/// The provider under test, running.
pub type Running = mcr_test_support::Running<ClusterInventoryProvider>;

/// What these tests add to [`Running`].
pub trait InventoryRun {
    /// A provider on `hub` with `opts`, started.
    fn start(hub: &TestCluster, opts: Options) -> Running;
    /// What the provider made of the profile `ns/name`.
    fn state(&self, ns: &str, name: &str) -> Option<ProfileState>;
    /// Whether the provider has processed profile version `rv` and reached a settled state.
    fn settled_at(&self, ns: &str, name: &str, rv: &str) -> bool;
}

impl InventoryRun for Running {
    fn start(hub: &TestCluster, opts: Options) -> Running {
        Running::spawn(ClusterInventoryProvider::new(hub.client(), opts).unwrap())
    }

    fn state(&self, ns: &str, name: &str) -> Option<ProfileState> {
        self.provider
            .status(&ProfileRef::new(ns, name))
            .map(|s| s.state)
    }

    fn settled_at(&self, ns: &str, name: &str, rv: &str) -> bool {
        self.provider
            .status(&ProfileRef::new(ns, name))
            .is_some_and(|s| {
                s.resource_version.as_deref() == Some(rv)
                    && !matches!(s.state, ProfileState::Pending)
            })
    }
}
