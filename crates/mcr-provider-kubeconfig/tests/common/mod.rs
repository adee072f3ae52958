//! Helpers shared by the kubeconfig provider's integration tests: a host (management) cluster
//! holding the Secrets, and HTTPS member clusters whose kubeconfigs go into them.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use mcr_core::{ClusterId, ClusterName, FieldIndex, ProviderRunnable, Registry};
use mcr_envtest::{Fleet, TestCluster};
use mcr_provider_kubeconfig::{
    DEFAULT_LABEL, KubeconfigProvider, Namespaces, Options, SecretRef, SecretState,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub fn opts(namespaces: Namespaces) -> Options {
    Options {
        namespaces,
        sync_timeout: Duration::from_secs(10),
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        ..Options::default()
    }
}

pub struct Running {
    pub provider: KubeconfigProvider,
    pub registry: Registry,
    pub token: CancellationToken,
    pub task: JoinHandle<Result<(), mcr_core::Error>>,
}

impl Running {
    pub fn start(host: &TestCluster, opts: Options) -> Running {
        let provider = KubeconfigProvider::new(host.client(), opts);
        Running::start_provider(provider)
    }

    pub fn start_provider(provider: KubeconfigProvider) -> Running {
        let registry = Registry::new();
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (provider, token, aware) =
                (provider.clone(), token.clone(), Arc::new(registry.clone()));
            async move { provider.start(token, aware).await }
        });
        Running {
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

    pub fn id(&self, name: &str) -> Option<ClusterId> {
        self.registry
            .get(&ClusterName::new(name))
            .ok()
            .map(|c| c.id())
    }

    pub fn state(&self, ns: &str, name: &str) -> Option<SecretState> {
        self.provider
            .status(&SecretRef::new(ns, name))
            .map(|s| s.state)
    }

    pub async fn stop(self) {
        self.token.cancel();
        self.task.await.unwrap().unwrap();
        assert!(self.provider.names().is_empty(), "clusters removed on stop");
    }
}

pub async fn https_fleet(n: usize) -> Fleet {
    Fleet::builder()
        .clusters(n)
        .name_prefix("member")
        .https(true)
        .start()
        .await
        .unwrap()
}

pub fn kubeconfig_of(tc: &TestCluster) -> String {
    tc.kubeconfig_yaml()
        .expect("https cluster has a kubeconfig")
}

pub async fn create_namespace(host: &TestCluster, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(host.client())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
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
    let api = Api::<Secret>::namespaced(host.client(), ns);
    let mut secret = api.get_opt(name).await.unwrap().unwrap_or_default();
    secret.metadata.name = Some(name.into());
    secret.metadata.labels = Some(BTreeMap::from([(
        DEFAULT_LABEL.to_string(),
        label.to_string(),
    )]));
    secret.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let mut map = BTreeMap::new();
    map.insert("unrelated".to_string(), ByteString(b"x".to_vec()));
    if let Some(d) = data {
        map.insert("kubeconfig".to_string(), ByteString(d.to_vec()));
    }
    secret.data = Some(map);
    let stored = if secret.metadata.resource_version.is_some() {
        api.replace(name, &PostParams::default(), &secret)
            .await
            .unwrap()
    } else {
        api.create(&PostParams::default(), &secret).await.unwrap()
    };
    stored.metadata.resource_version.unwrap()
}

pub async fn delete_secret(host: &TestCluster, ns: &str, name: &str) {
    Api::<Secret>::namespaced(host.client(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

pub fn configmap(name: &str, animal: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("animal".to_string(), animal.to_string())])),
        ..Default::default()
    }
}

pub fn animal_index(name: &str) -> FieldIndex {
    FieldIndex::new::<ConfigMap>(name, |cm: &ConfigMap| {
        cm.data
            .as_ref()
            .and_then(|d| d.get("animal"))
            .cloned()
            .into_iter()
            .collect()
    })
}
