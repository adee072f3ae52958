//! networking/v1: `pkg/apis/networking/v1/defaults.go` of Kubernetes v1.36.

use serde_json::json;

use super::{Defaulters, Obj, child, get, or_nil, unset};

pub(super) const DEFAULTERS: Defaulters = &[
    (
        "io.k8s.api.networking.v1.NetworkPolicyPort",
        network_policy_port,
    ),
    ("io.k8s.api.networking.v1.NetworkPolicy", network_policy),
    ("io.k8s.api.networking.v1.IngressClass", ingress_class),
];

/// `SetDefaults_NetworkPolicyPort`.
fn network_policy_port(p: &mut Obj) {
    or_nil(p, "protocol", json!("TCP"));
}

/// `SetDefaults_NetworkPolicy`: `Ingress`, and `Egress` too when egress rules are given.
fn network_policy(np: &mut Obj) {
    let spec = child(np, "spec");
    if unset(spec, "policyTypes") {
        let mut types = vec![json!("Ingress")];
        if !unset(spec, "egress") {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), json!(types));
    }
}

/// `SetDefaults_IngressClass`: parameters are cluster-scoped unless they say otherwise.
fn ingress_class(ic: &mut Obj) {
    if let Some(parameters) = get(child(ic, "spec"), "parameters") {
        or_nil(parameters, "scope", json!("Cluster"));
    }
}
