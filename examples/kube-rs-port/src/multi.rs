//! The same controller on mcr, across every cluster of a fleet (the `Manager` holds the host
//! client and the provider). Compare with `single.rs`: the reconciler is the same; `Data` is
//! built once per cluster, so `ctx.client` is the object's own cluster.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use mcr_manager::{Action, Context, Controller, Manager};

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
pub async fn run(mgr: Manager) -> anyhow::Result<()> {
    let data = |cluster: &Context| Data {
        client: cluster.client(),
    };
    Controller::new(&mgr)
        .for_with::<ConfigMap>(watcher::Config::default().labels(SELECTOR).into())
        .run(reconcile, error_policy, data)
        .for_each(|_| async {})
        .await;
    Ok(())
}
