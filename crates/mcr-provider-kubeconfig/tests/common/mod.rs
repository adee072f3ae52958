//! Helpers shared by the kubeconfig provider's integration tests: a host (management) cluster
//! holding the Secrets, and HTTPS member clusters whose kubeconfigs go into them.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta};
use mcr_core::FieldIndex;
use mcr_envtest::TestCluster;
pub use mcr_provider_kubeconfig::StatusProvider;
use mcr_provider_kubeconfig::{
    DEFAULT_LABEL, KubeconfigProvider, Namespaces, Options, SecretRef, SecretState,
};
pub use mcr_test_support::{
    animal_index, assert_watch_kept, configmap, https_fleet, init_tracing, kubeconfig_of,
    minted_kubeconfig, wait_renewals,
};

pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn opts(namespaces: Namespaces) -> Options {
    Options {
        namespaces,
        members: mcr_test_support::fast_members(),
        ..Options::default()
    }
}

/// The provider under test, running.
pub type Running = mcr_test_support::Running<KubeconfigProvider>;

/// What these tests add to [`Running`].
pub trait KubeconfigRun {
    /// A provider on `host` with `opts`, started.
    fn start(host: &TestCluster, opts: Options) -> Running;
    /// `provider`, started.
    fn start_provider(provider: KubeconfigProvider) -> Running;
    /// What the provider made of the Secret `ns/name`.
    fn state(&self, ns: &str, name: &str) -> Option<SecretState>;
}

impl KubeconfigRun for Running {
    fn start(host: &TestCluster, opts: Options) -> Running {
        Running::spawn(KubeconfigProvider::new(host.client(), opts))
    }

    fn start_provider(provider: KubeconfigProvider) -> Running {
        Running::spawn(provider)
    }

    fn state(&self, ns: &str, name: &str) -> Option<SecretState> {
        self.provider
            .status(&SecretRef::new(ns, name))
            .map(|s| s.state)
    }
}

pub async fn create_namespace(host: &TestCluster, name: &str) {
    mcr_test_support::create_namespace(&host.client(), name, &[]).await;
}

/// Creates or replaces a Secret; `data` None leaves the key out. Returns its resourceVersion.
pub async fn put_secret(
    host: &TestCluster,
    ns: &str,
    name: &str,
    label: &str,
    data: Option<&[u8]>,
    annotations: &[(&str, &str)],
) -> String {
    mcr_test_support::apply_secret(&host.client(), ns, name, |secret| {
        secret.metadata.labels = Some(BTreeMap::from([(
            DEFAULT_LABEL.to_string(),
            label.to_string(),
        )]));
        secret.metadata.annotations = Some(mcr_test_support::string_map(annotations));
        let mut map = BTreeMap::new();
        map.insert("unrelated".to_string(), ByteString(b"x".to_vec()));
        if let Some(d) = data {
            map.insert("kubeconfig".to_string(), ByteString(d.to_vec()));
        }
        secret.data = Some(map);
    })
    .await
}

pub async fn delete_secret(host: &TestCluster, ns: &str, name: &str) {
    Api::<Secret>::namespaced(host.client(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}
