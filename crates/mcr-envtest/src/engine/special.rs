//! Per-type write rules of the built-ins (Secret, Namespace); CRDs live in [`super::crd`].

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::ApiError;
use super::meta::{meta_mut, name_of};
use super::registry::{Special, TypeInfo};

/// Label the real server puts on every namespace.
pub(crate) const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What kube-apiserver does while decoding a request, before it tracks field ownership (so
/// the writer owns the result): empty maps dropped, Secret `stringData` folded and `type`
/// defaulted, a Namespace's name label set.
pub(crate) fn defaults(info: &TypeInfo, obj: &mut Value) -> Result<(), ApiError> {
    omit_empty(info, obj);
    super::defaults::apply(info, obj)?;
    super::validate::check(info, obj)?;
    match info.special {
        Special::Secret => normalize_secret(obj),
        Special::Namespace => {
            name_label(obj);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The type's own rules after ownership is tracked (owned by no one): a new Namespace's
/// `kubernetes` finalizer and `Active` phase.
pub(crate) fn normalize(info: &TypeInfo, obj: &mut Value, old: Option<&Value>) {
    if info.special == Special::Namespace
        && old.is_none()
        && let Some(map) = obj.as_object_mut()
    {
        if !map.contains_key("spec") {
            map.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
        }
        map.insert("status".into(), json!({"phase": "Active"}));
    }
}

/// Drops empty maps and lists that kube-apiserver does not store (Go's `omitempty` on the
/// typed object): `metadata.labels`, `annotations`, `finalizers`, `ownerReferences`, and a
/// ConfigMap's or Secret's empty `data`, `binaryData`, `stringData`.
fn omit_empty(info: &TypeInfo, obj: &mut Value) {
    let empty = |v: &Value| {
        v.is_null()
            || v.as_object().is_some_and(Map::is_empty)
            || v.as_array().is_some_and(Vec::is_empty)
    };
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
            if meta.get(field).is_some_and(empty) {
                meta.remove(field);
            }
        }
    }
    if !info.rt.custom
        && let Some(map) = obj.as_object_mut()
    {
        // A built-in's typed fields have no `null`: a field set to null is left out.
        for (key, value) in map.iter_mut() {
            if key != "metadata" {
                drop_nulls(value);
            }
        }
        map.retain(|_, v| !v.is_null());
    }
    let data_fields: &[&str] = match (info.rt.custom, info.rt.kind.as_str()) {
        (false, "ConfigMap") => &["data", "binaryData"],
        (false, "Secret") => &["data", "stringData"],
        _ => &[],
    };
    if let Some(map) = obj.as_object_mut() {
        for field in data_fields {
            if map.get(*field).is_some_and(empty) {
                map.remove(*field);
            }
        }
    }
}

/// Removes the `null` members of every object inside `value`.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Folds `stringData` into base64 `data` (stringData wins) and defaults `type` to `Opaque`.
fn normalize_secret(obj: &mut Value) -> Result<(), ApiError> {
    let name = name_of(obj).to_string();
    let Some(map) = obj.as_object_mut() else {
        return Ok(());
    };
    if let Some(string_data) = map.remove("stringData") {
        let Value::Object(entries) = string_data else {
            return Err(ApiError::bad_request(
                "Secret.stringData must be an object of strings",
            ));
        };
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        let Some(data) = data.as_object_mut() else {
            return Ok(());
        };
        for (k, v) in entries {
            let Some(s) = v.as_str() else {
                return Err(ApiError::invalid(
                    "Secret",
                    &name,
                    format!("stringData[{k}]: Invalid value: must be a string"),
                ));
            };
            data.insert(
                k,
                Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
            );
        }
    }
    if !map.get("type").is_some_and(Value::is_string) {
        map.insert("type".into(), json!("Opaque"));
    }
    Ok(())
}

/// The name label, and on create the `kubernetes` finalizer and `Active` phase.
fn name_label(obj: &mut Value) {
    let name = name_of(obj).to_string();
    let meta = meta_mut(obj);
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(NAMESPACE_NAME_LABEL.into(), Value::String(name));
    }
}
