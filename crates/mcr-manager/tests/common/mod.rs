//! The manager's own test helpers, used by most of its test binaries: the ConfigMaps its
//! reconcilers read (`data.v`), the reconcile log they write, and its queue metrics. What other
//! crates' tests share (the [`Env`] of a manager over a fleet, deadlines, logs) is in
//! `mcr-test-support`, re-exported here.
#![allow(dead_code, missing_docs, unused_imports)]

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};
use mcr_manager::Manager;
pub use mcr_test_support::{DEADLINE, Env, Logs, eventually, init_tracing};

pub fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("v".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    }
}

pub async fn create_cm(client: kube::Client, name: &str, value: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm(name, value))
        .await
        .unwrap()
}

pub async fn update_cm(client: kube::Client, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut current = api.get(name).await.unwrap();
    current.data = Some(BTreeMap::from([("v".to_owned(), value.to_owned())]));
    api.replace(name, &PostParams::default(), &current)
        .await
        .unwrap();
}

pub fn value(cm: &ConfigMap) -> String {
    cm.data
        .as_ref()
        .and_then(|d| d.get("v").cloned())
        .unwrap_or_default()
}

/// What reconciles saw: `cluster/name=value`, in order.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, entry: String) {
        self.0.lock().unwrap().push(entry);
    }
    pub fn contains(&self, entry: &str) -> bool {
        self.0.lock().unwrap().iter().any(|e| e == entry)
    }
    pub fn count(&self, prefix: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.starts_with(prefix))
            .count()
    }
    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// What every test's reconciler returns.
pub type Res = Result<kube::runtime::controller::Action, mcr_core::Error>;

/// Error policy of the tests: retry soon.
pub fn retry(
    _: Arc<ConfigMap>,
    _: &mcr_core::Error,
    _: mcr_manager::Context<Log>,
) -> kube::runtime::controller::Action {
    kube::runtime::controller::Action::requeue(Duration::from_millis(20))
}

/// A reconciler that logs `cluster/name=value` and waits for the next change.
pub async fn record(cm: Arc<ConfigMap>, ctx: mcr_manager::Context<Log>) -> Res {
    use kube::ResourceExt;
    ctx.data().push(format!(
        "{}/{}={}",
        ctx.cluster_name(),
        cm.name_any(),
        value(&cm)
    ));
    Ok(kube::runtime::controller::Action::await_change())
}

/// The value of one `mcr_queue_depth` series of the default controller name.
pub fn depth(mgr: &Manager, cluster: &str) -> i64 {
    let prefix = format!(r#"mcr_queue_depth{{controller="configmap",cluster="{cluster}"}} "#);
    mgr.metrics()
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}
