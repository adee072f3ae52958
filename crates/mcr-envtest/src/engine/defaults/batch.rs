//! batch/v1: `pkg/apis/batch/v1/defaults.go` of Kubernetes v1.36 (the
//! `JobPodReplacementPolicy` gate is on).

use serde_json::{Value, json};

use super::{Defaulters, Obj, child, nil, or_nil, or_unset, unset};

pub(super) const DEFAULTERS: Defaulters = &[
    ("io.k8s.api.batch.v1.Job", job),
    ("io.k8s.api.batch.v1.CronJob", cron_job),
    (
        "io.k8s.api.batch.v1.PodFailurePolicyOnPodConditionsPattern",
        condition_pattern,
    ),
];

/// `SetDefaults_Job`.
fn job(j: &mut Obj) {
    let spec = child(j, "spec");
    if nil(spec, "completions") && nil(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    or_nil(spec, "parallelism", json!(1));
    if nil(spec, "backoffLimit") {
        let limit = if nil(spec, "backoffLimitPerIndex") {
            6
        } else {
            i64::from(i32::MAX)
        };
        spec.insert("backoffLimit".into(), json!(limit));
    }
    let labels = spec
        .get("template")
        .and_then(|t| t.pointer("/metadata/labels"))
        .filter(|l| l.is_object())
        .cloned();
    or_nil(spec, "completionMode", json!("NonIndexed"));
    or_nil(spec, "suspend", json!(false));
    if nil(spec, "podReplacementPolicy") {
        let policy = if nil(spec, "podFailurePolicy") {
            "TerminatingOrFailed"
        } else {
            "Failed"
        };
        spec.insert("podReplacementPolicy".into(), json!(policy));
    }
    or_nil(spec, "manualSelector", json!(false));
    if let Some(labels) = labels {
        let meta = child(j, "metadata");
        if unset(meta, "labels") {
            meta.insert("labels".into(), labels);
        }
    }
}

/// `SetDefaults_CronJob`.
fn cron_job(c: &mut Obj) {
    let spec = child(c, "spec");
    or_unset(spec, "concurrencyPolicy", json!("Allow"));
    or_nil(spec, "suspend", json!(false));
    or_nil(spec, "successfulJobsHistoryLimit", json!(3));
    or_nil(spec, "failedJobsHistoryLimit", json!(1));
}

/// `SetDefaults_PodFailurePolicyOnPodConditionsPattern`.
fn condition_pattern(p: &mut Obj) {
    or_unset(p, "status", Value::String("True".into()));
}
