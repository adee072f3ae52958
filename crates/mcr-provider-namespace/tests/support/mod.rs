//! Helpers shared by the namespace provider's integration tests.
#![allow(dead_code, unused_imports)]

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_core::Cluster;
use mcr_envtest::TestCluster;
use mcr_provider_namespace::{NamespaceProvider, Options};
pub use mcr_test_support::init_tracing;

pub use mcr_test_support::{DEADLINE, eventually};
pub const SYNC: Duration = Duration::from_secs(30);

pub fn cm(name: &str, namespace: &str, data: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some([("app".to_string(), data.to_string())].into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("v".to_string(), data.to_string())])),
        ..Default::default()
    }
}

pub async fn create_namespace(host: &kube::Client, name: &str, labels: &[(&str, &str)]) {
    mcr_test_support::create_namespace(host, name, labels).await;
}

pub async fn create_cm(host: &kube::Client, namespace: &str, name: &str, data: &str) {
    Api::<ConfigMap>::namespaced(host.clone(), namespace)
        .create(&PostParams::default(), &cm(name, namespace, data))
        .await
        .expect("create configmap");
}

/// A host envtest cluster with a running namespace provider (the provider, its registry and
/// the run through `Deref`).
pub struct Running {
    pub env: TestCluster,
    pub host: Cluster,
    run: mcr_test_support::Running<NamespaceProvider>,
}

impl std::ops::Deref for Running {
    type Target = mcr_test_support::Running<NamespaceProvider>;

    fn deref(&self) -> &Self::Target {
        &self.run
    }
}

impl Running {
    pub fn start(env: TestCluster, opts: Options) -> Running {
        let host = Cluster::new(mcr_core::ClusterName::host(), env.client());
        let run = mcr_test_support::Running::spawn(NamespaceProvider::new(host.clone(), opts));
        Running { env, host, run }
    }

    pub async fn stop(self) {
        self.run.stop().await;
    }
}

pub fn test_opts() -> Options {
    Options {
        sync_timeout: SYNC,
        retry_delay: Duration::from_millis(100),
        ..Options::default()
    }
}
