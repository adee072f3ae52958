//! The same controller on mcr, across every cluster of a directory of kubeconfigs.
//! Compare with `single.rs`: the reconciler is the same.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use mcr_manager::{Context, Controller, Manager};
use mcr_provider_file::{FileProvider, Options};

use crate::{ANNOTATION, Error, SELECTOR};

/// What the reconciler needs.
pub struct Data {}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, Error> {
    let client = ctx.client();
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

fn error_policy(_cm: Arc<ConfigMap>, _err: &Error, _ctx: Context<Data>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// Runs the controller until the process ends.
pub async fn run(client: Client, dir: std::path::PathBuf) -> anyhow::Result<()> {
    let data = Arc::new(Data {});
    let provider = FileProvider::new(Options {
        dirs: vec![dir],
        ..Options::default()
    });
    let mgr = Manager::new(client, Some(Arc::new(provider)));
    Controller::new(&mgr)
        .for_with::<ConfigMap>((), watcher::Config::default().labels(SELECTOR).into())
        .register(reconcile, error_policy, data)?;
    mgr.run().await?;
    Ok(())
}
