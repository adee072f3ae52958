//! Helpers shared by the namespace provider's integration tests.
#![allow(dead_code)]

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_core::{Cluster, ProviderRunnable, Registry};
use mcr_envtest::TestCluster;
use mcr_provider_namespace::{NamespaceProvider, Options};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const DEADLINE: Duration = Duration::from_secs(30);

pub use mcr_envtest::wait::eventually;
pub const SYNC: Duration = Duration::from_secs(30);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

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
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

pub async fn create_cm(host: &kube::Client, namespace: &str, name: &str, data: &str) {
    Api::<ConfigMap>::namespaced(host.clone(), namespace)
        .create(&PostParams::default(), &cm(name, namespace, data))
        .await
        .expect("create configmap");
}

/// A host envtest cluster with a running namespace provider.
pub struct Running {
    pub env: TestCluster,
    pub host: Cluster,
    pub provider: NamespaceProvider,
    pub registry: Registry,
    pub token: CancellationToken,
    pub task: JoinHandle<Result<(), mcr_core::Error>>,
}

impl Running {
    pub fn start(env: TestCluster, opts: Options) -> Running {
        let host = Cluster::new(mcr_core::ClusterName::host(), env.client());
        let provider = NamespaceProvider::new(host.clone(), opts);
        let registry = Registry::new();
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (provider, token, aware) =
                (provider.clone(), token.clone(), Arc::new(registry.clone()));
            async move { provider.start(token, aware).await }
        });
        Running {
            env,
            host,
            provider,
            registry,
            token,
            task,
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.registry
            .names()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }

    pub async fn wait_for(&self, name: &str) -> Cluster {
        eventually(&format!("cluster {name} engaged"), DEADLINE, || {
            self.registry.get(&name.into()).is_ok()
        })
        .await;
        self.registry.get(&name.into()).expect("engaged")
    }

    pub async fn stop(self) {
        self.token.cancel();
        self.task.await.expect("join").expect("provider result");
    }
}

pub fn test_opts() -> Options {
    Options {
        sync_timeout: SYNC,
        retry_delay: Duration::from_millis(100),
        ..Options::default()
    }
}
