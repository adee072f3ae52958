//! The kubeconfig provider's own test helpers, used by all of its test binaries: its options,
//! kubeconfig Secrets labelled as it reads them, and what these tests add to a running
//! provider. Deadlines, clusters, objects and the running provider itself come from
//! `mcr-test-support`, re-exported here.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use mcr_envtest::TestCluster;
pub use mcr_provider_kubeconfig::StatusProvider;
use mcr_provider_kubeconfig::{
    DEFAULT_LABEL, KubeconfigProvider, Namespaces, Options, SecretRef, SecretState,
};
pub use mcr_test_support::{DEADLINE, create_namespace, delete_secret};
pub use mcr_test_support::{
    animal_configmap, animal_index, assert_watch_kept, https_fleet, init_tracing, kubeconfig_of,
    minted_kubeconfig, wait_renewals,
};

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
