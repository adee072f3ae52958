//! The controller every provider example runs: it stamps each ConfigMap labelled
//! [`LABEL`]`=true` with the annotation [`ANNOTATION`]`: <cluster>`, so a look at any member
//! shows which cluster name mcr gave it.
//!
//! ```no_run
//! # fn f(mgr: &mcr_manager::Manager) -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use example_support::stamp::{LABEL, error_policy, reconcile};
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use mcr_manager::{Controller, WatchOptions};
//!
//! Controller::new(mgr)
//!     .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=true")))
//!     .register(reconcile, error_policy, Arc::new(()))?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use mcr_manager::Context;

/// Only ConfigMaps with this label are touched.
pub const LABEL: &str = "mcr.example/demo";
/// The annotation the controller writes: its value is the cluster's name.
pub const ANNOTATION: &str = "mcr.example/reconciled-by";

/// Writes the cluster's name into [`ANNOTATION`] unless it is there already. Inside a
/// namespace provider's cluster the object's namespace reads `default`.
pub async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
    stamp(&cm, &ctx, ctx.cluster_name().as_str()).await
}

/// Writes `value` into [`ANNOTATION`] of `cm`, in its cluster, unless it is there already.
pub async fn stamp<T>(
    cm: &ConfigMap,
    ctx: &Context<T>,
    value: &str,
) -> Result<Action, kube::Error> {
    if cm.annotations().get(ANNOTATION).map(String::as_str) == Some(value) {
        return Ok(Action::await_change());
    }
    tracing::info!(cluster = %ctx.cluster_name(), configmap = %cm.name_any(), value, "stamping");
    let api: Api<ConfigMap> = Api::namespaced(ctx.client(), &cm.namespace().unwrap_or_default());
    let patch = serde_json::json!({ "metadata": { "annotations": { ANNOTATION: value } } });
    api.patch(
        &cm.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(Action::await_change())
}

/// Logs the failure and retries in two seconds.
pub fn error_policy(_: Arc<ConfigMap>, err: &kube::Error, ctx: Context<()>) -> Action {
    tracing::warn!(cluster = %ctx.cluster_name(), error = %err, "reconcile failed");
    Action::requeue(Duration::from_secs(2))
}
