//! CustomResourceDefinitions: validation, status, and serving / unserving their types.

use serde_json::{Value, json};

use super::meta::{name_of, now};
use super::registry::{ALL_VERBS, Special, TypeInfo};
use super::state::Store;
use super::{ApiError, ResourceType};

const KIND: &str = "CustomResourceDefinition";

fn invalid(crd: &Value, message: impl Into<String>) -> ApiError {
    ApiError::invalid(KIND, name_of(crd), message)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The storage key of the resource a CRD defines.
pub(crate) fn res_of(crd: &Value) -> std::sync::Arc<str> {
    TypeInfo::res_key(
        str_at(crd, &["spec", "group"]),
        str_at(crd, &["spec", "names", "plural"]),
    )
}

fn validate(crd: &Value) -> Result<(), ApiError> {
    let group = str_at(crd, &["spec", "group"]);
    let plural = str_at(crd, &["spec", "names", "plural"]);
    if group.is_empty() {
        return Err(invalid(crd, "spec.group: Required value"));
    }
    if plural.is_empty() {
        return Err(invalid(crd, "spec.names.plural: Required value"));
    }
    if str_at(crd, &["spec", "names", "kind"]).is_empty() {
        return Err(invalid(crd, "spec.names.kind: Required value"));
    }
    let expected = format!("{plural}.{group}");
    if name_of(crd) != expected {
        return Err(invalid(
            crd,
            format!(
                "metadata.name: Invalid value: {:?}: must be spec.names.plural+\".\"+spec.group",
                name_of(crd)
            ),
        ));
    }
    match str_at(crd, &["spec", "scope"]) {
        "Namespaced" | "Cluster" => {}
        other => {
            return Err(invalid(
                crd,
                format!(
                    "spec.scope: Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            ));
        }
    }
    let versions = crd["spec"]["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(invalid(
            crd,
            "spec.versions: Invalid value: must have exactly one version marked as storage version",
        ));
    }
    if versions.iter().any(|v| str_at(v, &["name"]).is_empty()) {
        return Err(invalid(crd, "spec.versions[].name: Required value"));
    }
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        return Err(invalid(
            crd,
            "spec.versions: Invalid value: must have exactly one version marked as storage version",
        ));
    }
    Ok(())
}

fn accepted_names(crd: &Value) -> Value {
    let names = &crd["spec"]["names"];
    let kind = str_at(names, &["kind"]);
    let mut accepted = names.clone();
    if str_at(names, &["singular"]).is_empty() {
        accepted["singular"] = json!(kind.to_lowercase());
    }
    if str_at(names, &["listKind"]).is_empty() {
        accepted["listKind"] = json!(format!("{kind}List"));
    }
    accepted
}

fn storage_version(crd: &Value) -> String {
    crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"].as_bool() == Some(true)))
        .map(|v| str_at(v, &["name"]).to_string())
        .unwrap_or_default()
}

/// Validates a new CRD and sets its status: names accepted and established, as
/// kube-apiserver's naming and establishing controllers write them (a status `Update` of
/// `kube-apiserver`, in the object's `managedFields`), and its stored version.
pub(crate) fn on_create(crd: &mut Value, schema: &super::schema::Schema) -> Result<(), ApiError> {
    validate(crd)?;
    let time = now();
    let controllers = json!({"status": {
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": time},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": time},
        ],
        "acceptedNames": accepted_names(crd),
    }});
    let entry = super::managed::created_entry(
        &controllers,
        schema,
        Some("kube-apiserver"),
        "apiextensions.k8s.io/v1",
        "status",
    );
    let mut status = controllers["status"].clone();
    status["storedVersions"] = json!([storage_version(crd)]);
    crd["status"] = status;
    let meta = super::meta::meta_mut(crd);
    let entries = meta.entry("managedFields").or_insert_with(|| json!([]));
    if let Some(list) = entries.as_array_mut() {
        list.insert(0, entry);
    }
    Ok(())
}

/// Validates an updated CRD (group and plural are immutable) and refreshes its status.
pub(crate) fn on_update(old: &Value, crd: &mut Value) -> Result<(), ApiError> {
    validate(crd)?;
    for path in [&["spec", "group"][..], &["spec", "names", "plural"][..]] {
        if str_at(old, path) != str_at(crd, path) {
            return Err(invalid(
                crd,
                format!(
                    "{}: Invalid value: {:?}: field is immutable",
                    path.join("."),
                    str_at(crd, path)
                ),
            ));
        }
    }
    if !crd["status"].is_object() {
        crd["status"] = json!({});
    }
    crd["status"]["acceptedNames"] = accepted_names(crd);
    let storage = storage_version(crd);
    let stored = crd["status"]["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !stored.iter().any(|v| v.as_str() == Some(storage.as_str())) {
        let mut stored = stored;
        stored.push(json!(storage));
        crd["status"]["storedVersions"] = Value::Array(stored);
    }
    Ok(())
}

/// The types a CRD serves: one per served version.
fn types_of(crd: &Value) -> Vec<TypeInfo> {
    let spec = &crd["spec"];
    let names = accepted_names(crd);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let group = str_at(spec, &["group"]);
    let plural = str_at(&names, &["plural"]);
    spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|v| v["served"].as_bool() != Some(false))
        .map(|v| TypeInfo {
            rt: ResourceType {
                group: group.to_string(),
                version: str_at(v, &["name"]).to_string(),
                kind: str_at(&names, &["kind"]).to_string(),
                plural: plural.to_string(),
                singular: str_at(&names, &["singular"]).to_string(),
                namespaced: str_at(spec, &["scope"]) == "Namespaced",
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                status_subresource: v["subresources"]["status"].is_object(),
                subresources: match (
                    v["subresources"]["status"].is_object(),
                    v["subresources"]["scale"].is_object(),
                ) {
                    (true, true) => &["status", "scale"],
                    (true, false) => &["status"],
                    (false, true) => &["scale"],
                    (false, false) => &[],
                },
                verbs: ALL_VERBS,
                custom: true,
            },
            res: TypeInfo::res_key(group, plural),
            generation: super::registry::Generation::Spec,
            special: Special::None,
            schema: super::schema::custom(v.pointer("/schema/openAPIV3Schema")),
            selectable: v["selectableFields"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f["jsonPath"].as_str())
                .map(|p| p.trim_start_matches('.').to_string())
                .collect(),
        })
        .collect()
}

/// Starts (or updates) serving the versions of a stored CRD.
pub(crate) fn serve(store: &mut Store, crd: &Value) {
    store.registry.replace_resource(&res_of(crd), types_of(crd));
}

/// The `openAPIV3Schema` a custom type's version has in its stored CRD.
pub(crate) fn version_schema(store: &Store, rt: &super::ResourceType) -> Option<Value> {
    let crd = store.peek(
        "customresourcedefinitions.apiextensions.k8s.io",
        &(String::new(), format!("{}.{}", rt.plural, rt.group)),
    )?;
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == rt.version.as_str())?
        .pointer("/schema/openAPIV3Schema")
        .cloned()
}
