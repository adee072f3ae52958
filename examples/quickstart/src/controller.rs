//! The quickstart's controller: stamp every ConfigMap with the name of the cluster it lives in.
//!
//! The effect is visible through the API (`kubectl get cm -o yaml` shows the annotation), so
//! "reconciled" can be checked from outside, not just read in a log.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use mcr_manager::{Context, Controller, Manager};
use parking_lot::Mutex;

/// The annotation the controller writes: its value is the cluster's name.
pub const ANNOTATION: &str = "mcr.example/reconciled-by";

/// The short name of a file-provider cluster: `<path>+<context>` shows as `<context>`.
pub fn short_name(cluster: &str) -> &str {
    cluster.rsplit('+').next().unwrap_or(cluster)
}

/// Which objects the controller reconciled, per cluster (short names).
#[derive(Debug, Default)]
pub struct Stats {
    seen: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl Stats {
    fn record(&self, cluster: &str, object: String) {
        let mut seen = self.seen.lock();
        seen.entry(cluster.to_owned()).or_default().insert(object);
    }

    /// How many distinct objects were reconciled in `cluster`.
    pub fn count(&self, cluster: &str) -> usize {
        let seen = self.seen.lock();
        seen.get(cluster).map_or(0, BTreeSet::len)
    }

    /// Whether `namespace/name` was reconciled in `cluster`.
    pub fn contains(&self, cluster: &str, object: &str) -> bool {
        let seen = self.seen.lock();
        seen.get(cluster).is_some_and(|s| s.contains(object))
    }
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Stats>) -> Result<Action, kube::Error> {
    let cluster = short_name(ctx.cluster_name().as_str()).to_owned();
    let namespace = cm.namespace().unwrap_or_default();
    ctx.data()
        .record(&cluster, format!("{namespace}/{}", cm.name_any()));
    if cm.annotations().get(ANNOTATION) == Some(&cluster) {
        return Ok(Action::await_change());
    }
    tracing::info!(cluster = %cluster, configmap = %cm.name_any(), "stamping");
    let api: Api<ConfigMap> = Api::namespaced(ctx.client(), &namespace);
    let patch = serde_json::json!({ "metadata": { "annotations": { ANNOTATION: cluster } } });
    api.patch(
        &cm.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(Action::await_change())
}

fn error_policy(_cm: Arc<ConfigMap>, err: &kube::Error, ctx: Context<Stats>) -> Action {
    tracing::warn!(cluster = %ctx.cluster_name(), error = %err, "reconcile failed");
    Action::requeue(Duration::from_secs(1))
}

/// Registers the controller on `mgr`; it reconciles ConfigMaps in every engaged cluster.
pub fn register(mgr: &Manager, stats: Arc<Stats>) -> Result<(), mcr_manager::Error> {
    Controller::new(mgr)
        .named("stamp-configmaps")
        .for_::<ConfigMap>()
        .register(reconcile, error_policy, stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names() {
        assert_eq!(
            short_name("/tmp/x/cluster-1.kubeconfig+cluster-1"),
            "cluster-1"
        );
        assert_eq!(short_name("plain"), "plain");
    }

    #[test]
    fn stats_count_distinct_objects() {
        let stats = Stats::default();
        stats.record("a", "default/x".into());
        stats.record("a", "default/x".into());
        stats.record("a", "default/y".into());
        assert_eq!(stats.count("a"), 2);
        assert_eq!(stats.count("b"), 0);
        assert!(stats.contains("a", "default/y"));
    }
}
