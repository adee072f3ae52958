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

/// The annotation a CRD of the Kubernetes community's groups must carry.
const API_APPROVED: &str = "api-approved.kubernetes.io";

/// What the `api-approved.kubernetes.io` annotation says, with kube-apiserver's reason:
/// `GetAPIApprovalState` of apiextensions-apiserver's `pkg/apihelpers/helpers.go` (v1.36).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Approval {
    /// A URL with a scheme and a host.
    Approved,
    /// A value starting with `unapproved`.
    Bypassed,
    /// No annotation, or an empty one.
    Missing,
    /// Anything else.
    Invalid,
}

/// `IsProtectedCommunityGroup` of the same file: `k8s.io`, `kubernetes.io` and their
/// subdomains.
fn is_protected_group(group: &str) -> bool {
    ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|g| group == *g || group.strip_suffix(g).is_some_and(|p| p.ends_with('.')))
}

fn approval_annotation(crd: &Value) -> &str {
    str_at(crd, &["metadata", "annotations", API_APPROVED])
}

/// The approval state of a CRD and the reason kube-apiserver words for it.
fn approval(crd: &Value) -> (Approval, String) {
    let value = approval_annotation(crd);
    if value.is_empty() {
        return (
            Approval::Missing,
            format!(
                "protected groups must have approval annotation {API_APPROVED:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    }
    if value.starts_with("unapproved") {
        return (Approval::Bypassed, format!("not approved: {value:?}"));
    }
    // Go's `url.ParseRequestURI` with a non-empty scheme and host: `scheme://host...`.
    let is_url = value.split_once("://").is_some_and(|(scheme, rest)| {
        let mut chars = scheme.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            && !rest.is_empty()
            && !rest.starts_with(['/', '?', '#'])
            && !value.contains(char::is_whitespace)
    });
    if is_url {
        return (Approval::Approved, format!("approved in {value}"));
    }
    (
        Approval::Invalid,
        format!(
            "protected groups must have approval annotation {API_APPROVED:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
        ),
    )
}

/// `validateAPIApproval` of apiextensions-apiserver's `pkg/apis/apiextensions/validation`
/// (v1.36): a CRD of a protected group needs an approval annotation that is a URL or starts
/// with `unapproved`, unless an update leaves the approval state as it was.
fn validate_approval(crd: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    if !is_protected_group(str_at(crd, &["spec", "group"])) {
        return Ok(());
    }
    let (state, reason) = approval(crd);
    if old.is_some_and(|old| approval(old).0 == state) {
        return Ok(());
    }
    let path = format!("metadata.annotations[{API_APPROVED}]");
    match state {
        Approval::Approved | Approval::Bypassed => Ok(()),
        Approval::Missing => Err(invalid(crd, format!("{path}: Required value: {reason}"))),
        Approval::Invalid => Err(invalid(
            crd,
            format!(
                "{path}: Invalid value: {:?}: {reason}",
                approval_annotation(crd)
            ),
        )),
    }
}

/// The `KubernetesAPIApprovalPolicyConformant` condition kube-apiserver's API-approval
/// controller gives a CRD of a protected group (`calculateCondition` of
/// apiextensions-apiserver's `pkg/controller/apiapproval`, v1.36); none for other groups.
fn approval_condition(crd: &Value) -> Option<Value> {
    if !is_protected_group(str_at(crd, &["spec", "group"])) {
        return None;
    }
    let (state, message) = approval(crd);
    let (status, reason) = match state {
        Approval::Approved => ("True", "ApprovedAnnotation"),
        Approval::Bypassed => ("False", "UnapprovedAnnotation"),
        Approval::Missing => ("False", "MissingAnnotation"),
        Approval::Invalid => ("False", "InvalidAnnotation"),
    };
    Some(json!({
        "type": "KubernetesAPIApprovalPolicyConformant",
        "status": status,
        "reason": reason,
        "message": message,
    }))
}

/// Sets a condition as `SetCRDCondition` does: a new type is appended; an existing one takes
/// the new status, reason and message, and a new `lastTransitionTime` only when its status
/// changes.
fn set_condition(status: &mut Value, mut condition: Value, time: &str) {
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        return;
    };
    match conditions
        .iter_mut()
        .find(|c| c["type"] == condition["type"])
    {
        Some(existing) => {
            if existing["status"] != condition["status"]
                || str_at(existing, &["lastTransitionTime"]).is_empty()
            {
                existing["lastTransitionTime"] = json!(time);
            }
            for key in ["status", "reason", "message"] {
                existing[key] = condition[key].take();
            }
        }
        None => {
            condition["lastTransitionTime"] = json!(time);
            conditions.push(condition);
        }
    }
}

fn storage_version(crd: &Value) -> String {
    crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"].as_bool() == Some(true)))
        .map(|v| str_at(v, &["name"]).to_string())
        .unwrap_or_default()
}

/// Validates a new CRD and sets the status kube-apiserver's create gives it: its stored
/// version, and no names accepted nor conditions yet (`acceptedNames` with an empty kind and
/// plural, `conditions: null`). The answer to a create, a dry run's included, is that object;
/// [`establish`] writes what the controllers then write.
pub(crate) fn on_create(crd: &mut Value) -> Result<(), ApiError> {
    validate(crd)?;
    validate_approval(crd, None)?;
    crd["status"] = json!({
        "conditions": null,
        "acceptedNames": {"plural": "", "kind": ""},
        "storedVersions": [storage_version(crd)],
    });
    Ok(())
}

/// A stored new CRD as kube-apiserver's naming, establishing and API-approval controllers
/// leave it: names accepted and established, the approval condition of a protected group, a
/// status `Update` of `kube-apiserver` in its `managedFields`.
pub(crate) fn establish(created: &Value, schema: &super::schema::Schema) -> Value {
    let time = now();
    let mut crd = super::packed::unpacked(created).into_owned();
    let mut status = crd["status"].clone();
    status["conditions"] = json!([
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
         "message": "no conflicts found", "lastTransitionTime": time},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted", "lastTransitionTime": time},
    ]);
    if let Some(condition) = approval_condition(&crd) {
        set_condition(&mut status, condition, &time);
    }
    status["acceptedNames"] = accepted_names(&crd);
    let entry = super::managed::created_entry(
        &json!({"status": crd["status"].clone()}),
        &json!({"status": status.clone()}),
        schema,
        Some("kube-apiserver"),
        "apiextensions.k8s.io/v1",
        "status",
    );
    crd["status"] = status;
    let meta = super::meta::meta_mut(&mut crd);
    let entries = meta.entry("managedFields").or_insert_with(|| json!([]));
    if let Some(list) = entries.as_array_mut() {
        list.insert(0, entry);
    }
    crd
}

/// Validates an updated CRD (group and plural are immutable) and refreshes its status.
pub(crate) fn on_update(old: &Value, crd: &mut Value) -> Result<(), ApiError> {
    validate(crd)?;
    validate_approval(crd, Some(old))?;
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
    // The API-approval controller follows the annotation (the group is immutable).
    if let Some(condition) = approval_condition(crd) {
        set_condition(&mut crd["status"], condition, &now());
    }
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
