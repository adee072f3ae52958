//! The kinds that are posted and answered, never stored: the access and token reviews, and
//! the `bindings` resource (a Pod's node assignment).
//!
//! The emulator has no authentication or authorization: every access review is allowed, a
//! rules review lists everything, a self review names the cluster's administrator, and a
//! token review authenticates the service-account tokens this process issued (`TokenRequest`)
//! and nothing else.

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
        // What kube-apiserver's authorizer says to a member of `system:masters`.
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            json!({"allowed": true})
        }
        "SelfSubjectRulesReview" => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        "SelfSubjectReview" => json!({
            "userInfo": {"username": USER, "groups": GROUPS},
        }),
        "TokenReview" => {
            let audiences: Vec<String> = body["spec"]["audiences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            subresource::review_token(
                body["spec"]["token"].as_str().unwrap_or_default(),
                &audiences,
            )
        }
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
    if let Some(meta) = meta.as_object_mut()
        && info.rt.namespaced
    {
        meta.insert("namespace".into(), json!(ns));
    }
    map.remove("status");
    // Decoded, defaulted and tracked like any create (the writer owns what it sent), then
    // answered.
    super::special::defaults(info, &mut out, opts)?;
    let empty = super::managed::empty_object(&info.rt);
    super::update::record_update(store, info, &empty, &mut out, None, None, opts);
    if let Some(map) = out.as_object_mut() {
        map.insert("status".into(), status);
    }
    Ok(out)
}
