//! admissionregistration/v1: `pkg/apis/admissionregistration/v1/defaults.go` of Kubernetes
//! v1.36.

use serde_json::json;

use super::{Defaulters, Obj, or_nil};

pub(super) const DEFAULTERS: Defaulters = &[
    (
        "io.k8s.api.admissionregistration.v1.ValidatingWebhook",
        webhook,
    ),
    (
        "io.k8s.api.admissionregistration.v1.MutatingWebhook",
        mutating_webhook,
    ),
    (
        "io.k8s.api.admissionregistration.v1.RuleWithOperations",
        rule,
    ),
    (
        "io.k8s.api.admissionregistration.v1.NamedRuleWithOperations",
        rule,
    ),
    (
        "io.k8s.api.admissionregistration.v1.ServiceReference",
        service_reference,
    ),
    (
        "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicySpec",
        policy_spec,
    ),
    (
        "io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicySpec",
        policy_spec,
    ),
    (
        "io.k8s.api.admissionregistration.v1.MatchResources",
        match_resources,
    ),
];

/// `SetDefaults_ValidatingWebhook`.
fn webhook(w: &mut Obj) {
    or_nil(w, "failurePolicy", json!("Fail"));
    or_nil(w, "matchPolicy", json!("Equivalent"));
    or_nil(w, "namespaceSelector", json!({}));
    or_nil(w, "objectSelector", json!({}));
    or_nil(w, "timeoutSeconds", json!(10));
}

/// `SetDefaults_MutatingWebhook`.
fn mutating_webhook(w: &mut Obj) {
    webhook(w);
    or_nil(w, "reinvocationPolicy", json!("Never"));
}

/// `SetDefaults_Rule` (a `Rule` is embedded in these types, whose scope it defaults).
fn rule(r: &mut Obj) {
    or_nil(r, "scope", json!("*"));
}

/// `SetDefaults_ServiceReference`.
fn service_reference(s: &mut Obj) {
    or_nil(s, "port", json!(443));
}

/// `SetDefaults_ValidatingAdmissionPolicySpec`, `SetDefaults_MutatingAdmissionPolicySpec`.
fn policy_spec(s: &mut Obj) {
    or_nil(s, "failurePolicy", json!("Fail"));
}

/// `SetDefaults_MatchResources`.
fn match_resources(m: &mut Obj) {
    or_nil(m, "matchPolicy", json!("Equivalent"));
    or_nil(m, "namespaceSelector", json!({}));
    or_nil(m, "objectSelector", json!({}));
}
