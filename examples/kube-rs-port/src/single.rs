//! A single-cluster controller, written the kube-runtime way.
//! Compare with `multi.rs`: the reconciler is the same.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use crate::{ANNOTATION, Error, SELECTOR};

/// What the reconciler needs.
pub struct Data {
    client: Client,
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Data>) -> Result<Action, Error> {
    let client = ctx.client.clone();
    let api: Api<ConfigMap> = Api::namespaced(client, &cm.namespace().unwrap_or_default());
    if !cm.annotations().contains_key(ANNOTATION) {
        let patch = serde_json::json!({ "metadata": { "annotations": { ANNOTATION: "true" } } });
        api.patch(
            &cm.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn error_policy(_cm: Arc<ConfigMap>, _err: &Error, _ctx: Arc<Data>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// Runs the controller until the process ends.
pub async fn run(client: Client) -> anyhow::Result<()> {
    let data = Arc::new(Data {
        client: client.clone(),
    });
    let configmaps = Api::<ConfigMap>::all(client);
    Controller::new(configmaps, watcher::Config::default().labels(SELECTOR))
        .run(reconcile, error_policy, data)
        .for_each(|_| async {})
        .await;
    Ok(())
}
