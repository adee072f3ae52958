//! apiextensions.k8s.io/v1 and apiregistration.k8s.io/v1: the `defaults.go` of
//! `k8s.io/apiextensions-apiserver` and `k8s.io/kube-aggregator` v0.36.

use serde_json::{Value, json};

use super::{Defaulters, Obj, child, or_nil, text, unset};

pub(super) const DEFAULTERS: Defaulters = &[
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
        custom_resource_definition,
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ServiceReference",
        service_reference,
    ),
    (
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.ServiceReference",
        service_reference,
    ),
];

/// `SetDefaults_CustomResourceDefinition` with `SetDefaults_CustomResourceDefinitionSpec`:
/// the singular and list kind from the kind, conversion `None`, the stored version.
fn custom_resource_definition(crd: &mut Obj) {
    let spec = child(crd, "spec");
    let names = child(spec, "names");
    let kind = text(names, "kind").to_string();
    if unset(names, "singular") {
        names.insert("singular".into(), json!(kind.to_lowercase()));
    }
    if unset(names, "listKind") && !kind.is_empty() {
        names.insert("listKind".into(), json!(format!("{kind}List")));
    }
    or_nil(spec, "conversion", json!({"strategy": "None"}));
    let storage = spec
        .get("versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| v["storage"] == json!(true))
        .and_then(|v| v.get("name"))
        .cloned();
    let status = child(crd, "status");
    if unset(status, "storedVersions")
        && let Some(name) = storage
    {
        status.insert("storedVersions".into(), json!([name]));
    }
}

/// `SetDefaults_ServiceReference` (both groups): port 443.
fn service_reference(s: &mut Obj) {
    or_nil(s, "port", json!(443));
}
