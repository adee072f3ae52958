//! The kinds that are posted and answered, never stored: the access and token reviews, and
//! the `bindings` resource (a Pod's node assignment).
//!
//! The emulator has no authentication or authorization: every access review is allowed, a
//! rules review lists everything, a self review names the cluster's administrator, and a
//! token review does not authenticate (nothing checks tokens).

use serde_json::{Value, json};

use super::registry::TypeInfo;
use super::state::{ObjKey, Store};
use super::{ApiError, WriteOptions, subresource};

/// The user every request acts as (there is no authentication).
pub(crate) const USER: &str = "mcr-envtest-admin";
/// The groups of [`USER`].
pub(crate) const GROUPS: [&str; 2] = ["system:masters", "system:authenticated"];

/// Answers a posted review (or performs a binding); returns the object to send back.
pub(crate) fn answer(
    store: &mut Store,
    info: &TypeInfo,
    ns: &str,
    body: Value,
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let kind = info.rt.kind.as_str();
    if kind == "Binding" {
        let pod_name = body["metadata"]["name"].as_str().unwrap_or_default();
        let key: ObjKey = (ns.to_string(), pod_name.to_string());
        let Some(pod) = store.get("pods", &key) else {
            return Err(ApiError::not_found("", "pods", pod_name));
        };
        let Some(pods) = store.registry.any_version("pods") else {
            return Err(ApiError::path_not_found());
        };
        subresource::bind(store, &pods, &pod, &body, opts)?;
        return Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        );
    }
    let status = match kind {
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => json!({
            "allowed": true,
            "reason": "mcr-envtest does not authorize: every request is allowed",
        }),
        "SelfSubjectRulesReview" => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        "SelfSubjectReview" => json!({
            "userInfo": {"username": USER, "groups": GROUPS},
        }),
        "TokenReview" => json!({
            "authenticated": false,
            "user": {},
            "error": "mcr-envtest does not authenticate tokens",
        }),
        _ => return Err(ApiError::path_not_found()),
    };
    let mut out = body;
    let Some(map) = out.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    map.insert("apiVersion".into(), json!(info.rt.api_version()));
    map.insert("kind".into(), json!(kind));
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("creationTimestamp".into(), Value::Null);
        if info.rt.namespaced {
            meta.insert("namespace".into(), json!(ns));
        }
    }
    map.entry("spec").or_insert_with(|| json!({}));
    map.insert("status".into(), status);
    Ok(out)
}
