//! Validation kube-apiserver applies to every object or to common kinds, answered with 422:
//! label keys and values, annotation keys, and ConfigMap and Secret data keys.

use serde_json::{Map, Value};

use super::ApiError;
use super::meta::{is_dns_subdomain, name_of};
use super::registry::TypeInfo;

const QUALIFIED_NAME_MSG: &str = "a qualified name is an optional DNS subdomain prefix and '/', then 1 to 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a label value is empty or at most 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character";
const DATA_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// The shape of a label value (also the name part of a qualified name).
fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    s.is_empty()
        || (b.len() <= 63
            && b.iter().all(inner)
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// A label or annotation key: `[prefix/]name`.
fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    !name.is_empty() && is_label_value(name) && prefix.is_none_or(is_dns_subdomain)
}

/// A ConfigMap or Secret data key.
fn is_data_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Checks an object before it is stored; the 422 lists every invalid field.
pub(crate) fn check(info: &TypeInfo, obj: &Value) -> Result<(), ApiError> {
    let mut causes: Vec<String> = Vec::new();
    let meta = &obj["metadata"];
    for (k, v) in meta["labels"].as_object().into_iter().flatten() {
        if !is_qualified_name(k) {
            causes.push(format!(
                "metadata.labels: Invalid value: {k:?}: {QUALIFIED_NAME_MSG}"
            ));
        }
        match v.as_str() {
            Some(s) if is_label_value(s) => {}
            _ => causes.push(format!(
                "metadata.labels: Invalid value: {v}: {LABEL_VALUE_MSG}"
            )),
        }
    }
    for k in meta["annotations"]
        .as_object()
        .into_iter()
        .flat_map(Map::keys)
    {
        if !is_qualified_name(&k.to_ascii_lowercase()) {
            causes.push(format!(
                "metadata.annotations: Invalid value: {k:?}: {QUALIFIED_NAME_MSG}"
            ));
        }
    }
    if !info.rt.custom && matches!(info.rt.kind.as_str(), "ConfigMap" | "Secret") {
        let mut seen: Vec<&str> = Vec::new();
        for field in ["data", "binaryData"] {
            for k in obj[field].as_object().into_iter().flat_map(Map::keys) {
                if !is_data_key(k) {
                    causes.push(format!(
                        "{field}[{k}]: Invalid value: {k:?}: {DATA_KEY_MSG}"
                    ));
                } else if seen.contains(&k.as_str()) {
                    causes.push(format!(
                        "data[{k}]: Invalid value: {k:?}: duplicate of key {k:?} in binaryData"
                    ));
                }
                seen.push(k);
            }
        }
    }
    if !info.rt.custom {
        by_kind(&info.rt.kind, obj, &mut causes);
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_all(&info.rt.kind, name_of(obj), causes).in_group(&info.rt.group))
}

/// The checks of single kinds that clients commonly run into.
fn by_kind(kind: &str, obj: &Value, causes: &mut Vec<String>) {
    let spec = &obj["spec"];
    match kind {
        "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet" => {
            let labels = &spec["template"]["metadata"]["labels"];
            let selects = spec["selector"]["matchLabels"]
                .as_object()
                .into_iter()
                .flatten()
                .all(|(k, v)| labels.get(k) == Some(v));
            if !selects {
                causes.push(format!(
                    "spec.template.metadata.labels: Invalid value: {labels}: `selector` does not match template `labels`"
                ));
            }
        }
        "Job" => {
            let policy = spec["template"]["spec"]["restartPolicy"].as_str();
            if !matches!(policy, Some("OnFailure" | "Never")) {
                causes.push(
                    "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"".into(),
                );
            }
        }
        "Service" => {
            let external = spec["type"] == "ExternalName" || spec["clusterIP"] == "None";
            if !external && spec["ports"].as_array().is_none_or(Vec::is_empty) {
                causes.push("spec.ports: Required value".into());
            }
        }
        "PersistentVolumeClaim" if spec["accessModes"].as_array().is_none_or(Vec::is_empty) => {
            causes.push(
                "spec.accessModes: Required value: at least 1 access mode is required".into(),
            );
        }
        "Pod" => {
            for (i, c) in spec["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if c["image"].as_str().is_none_or(str::is_empty) {
                    causes.push(format!("spec.containers[{i}].image: Required value"));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert!(is_qualified_name("app"));
        assert!(is_qualified_name("example.com/app_1.x"));
        assert!(!is_qualified_name("-app"));
        assert!(!is_qualified_name("Example_.com/app"));
        assert!(!is_qualified_name("a/"));
        assert!(is_label_value(""));
        assert!(!is_label_value("bad value!"));
        assert!(!is_label_value(&"x".repeat(64)));
        assert!(is_data_key("config.yaml"));
        assert!(!is_data_key("a/b"));
        assert!(!is_data_key(".."));
    }
}
