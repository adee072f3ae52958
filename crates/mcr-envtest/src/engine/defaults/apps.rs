//! apps/v1: `pkg/apis/apps/v1/defaults.go` of Kubernetes v1.36, and the conversion of
//! `pkg/apis/apps/v1/conversion.go` that names the kind of a StatefulSet's claim templates.

use serde_json::json;

use super::{Defaulters, Obj, child, get, items, or_nil, or_unset, text};

pub(super) const DEFAULTERS: Defaulters = &[
    ("io.k8s.api.apps.v1.Deployment", deployment),
    ("io.k8s.api.apps.v1.DaemonSet", daemon_set),
    ("io.k8s.api.apps.v1.StatefulSet", stateful_set),
    ("io.k8s.api.apps.v1.ReplicaSet", replica_set),
];

/// `SetDefaults_Deployment`.
fn deployment(d: &mut Obj) {
    let spec = child(d, "spec");
    or_nil(spec, "replicas", json!(1));
    let strategy = child(spec, "strategy");
    or_unset(strategy, "type", json!("RollingUpdate"));
    if text(strategy, "type") == "RollingUpdate" {
        let rolling = child(strategy, "rollingUpdate");
        or_nil(rolling, "maxUnavailable", json!("25%"));
        or_nil(rolling, "maxSurge", json!("25%"));
    }
    or_nil(spec, "revisionHistoryLimit", json!(10));
    or_nil(spec, "progressDeadlineSeconds", json!(600));
}

/// `SetDefaults_DaemonSet`.
fn daemon_set(d: &mut Obj) {
    let spec = child(d, "spec");
    let strategy = child(spec, "updateStrategy");
    or_unset(strategy, "type", json!("RollingUpdate"));
    if text(strategy, "type") == "RollingUpdate" {
        let rolling = child(strategy, "rollingUpdate");
        or_nil(rolling, "maxUnavailable", json!(1));
        or_nil(rolling, "maxSurge", json!(0));
    }
    or_nil(spec, "revisionHistoryLimit", json!(10));
}

/// `SetDefaults_StatefulSet` (the `MaxUnavailableStatefulSet` gate is off in v1.36).
fn stateful_set(s: &mut Obj) {
    let spec = child(s, "spec");
    or_unset(spec, "podManagementPolicy", json!("OrderedReady"));
    let strategy = child(spec, "updateStrategy");
    if super::unset(strategy, "type") {
        strategy.insert("type".into(), json!("RollingUpdate"));
        or_nil(strategy, "rollingUpdate", json!({}));
    }
    if text(strategy, "type") == "RollingUpdate"
        && let Some(rolling) = get(strategy, "rollingUpdate")
    {
        or_nil(rolling, "partition", json!(0));
    }
    let retention = child(spec, "persistentVolumeClaimRetentionPolicy");
    or_unset(retention, "whenDeleted", json!("Retain"));
    or_unset(retention, "whenScaled", json!("Retain"));
    or_nil(spec, "replicas", json!(1));
    or_nil(spec, "revisionHistoryLimit", json!(10));
    // `Convert_apps_StatefulSetSpec_To_v1_StatefulSetSpec`: claim templates read back with
    // their apiVersion and kind.
    for claim in items(spec, "volumeClaimTemplates") {
        claim.insert("apiVersion".into(), json!("v1"));
        claim.insert("kind".into(), json!("PersistentVolumeClaim"));
    }
}

/// `SetDefaults_ReplicaSet`.
fn replica_set(r: &mut Obj) {
    or_nil(child(r, "spec"), "replicas", json!(1));
}
