//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};

/// Generous deadline for anything that should happen "soon".
pub const DEADLINE: Duration = Duration::from_secs(30);

pub use mcr_envtest::wait::eventually;

pub fn cm(name: &str, app: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some([("app".to_string(), app.to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn app_of(cm: &ConfigMap) -> Vec<String> {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app").cloned())
        .into_iter()
        .collect()
}

pub async fn create(client: &kube::Client, name: &str, app: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &cm(name, app))
        .await
        .expect("create configmap");
}

pub async fn relabel(client: &kube::Client, name: &str, app: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let patch = serde_json::json!({ "metadata": { "labels": { "app": app } } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
}

pub async fn delete(client: &kube::Client, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete configmap");
}

/// Sorted names, leaving out `kube-system` (where a real API server keeps ConfigMaps of its own).
pub fn names<K: kube::Resource>(objs: &[std::sync::Arc<K>]) -> Vec<String> {
    let mut v: Vec<String> = objs
        .iter()
        .filter(|o| o.meta().namespace.as_deref() != Some("kube-system"))
        .filter_map(|o| o.meta().name.clone())
        .collect();
    v.sort();
    v
}
