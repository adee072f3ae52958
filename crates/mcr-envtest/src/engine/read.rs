//! Reads: `get` and `list` with selectors, `resourceVersion` semantics and consistent pages.

use base64::Engine as _;
use serde_json::{Value, json};

use super::registry::{Special, TypeInfo, present, scope};
use super::schema::Schema;
use super::selector::Selectors;
use super::state::{ObjKey, Store};
use super::{ApiError, Engine, ListParams, ResourceType};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    B64.encode(json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [key.0, key.1]}).to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjKey), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let raw = B64
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad("not base64"))?;
    let value: Value = serde_json::from_slice(&raw).map_err(|_| bad("not JSON"))?;
    let rv = value["rv"]
        .as_u64()
        .ok_or_else(|| bad("no resource version"))?;
    let ns = value["start"][0]
        .as_str()
        .ok_or_else(|| bad("no start key"))?;
    let name = value["start"][1]
        .as_str()
        .ok_or_else(|| bad("no start key"))?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

/// Parses a `resourceVersion` parameter; `None` for unset, empty or `"0"` (meaning "current").
pub(crate) fn parse_rv(rv: Option<&str>) -> Result<Option<u64>, ApiError> {
    match rv {
        None | Some("") | Some("0") => Ok(None),
        Some(s) => s.parse::<u64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {s:?}: must be a non-negative integer"
            ))
        }),
    }
}

/// Builds the `<Kind>List` for a request; also returns the resourceVersion it reflects.
pub(crate) fn collect_list(
    store: &Store,
    info: &TypeInfo,
    namespace: Option<&str>,
    params: &ListParams,
) -> Result<(Value, u64), ApiError> {
    let rt = &info.rt;
    if !rt.namespaced && namespace.is_some() {
        return Err(ApiError::path_not_found());
    }
    let selectors = Selectors::parse(
        params.label_selector.as_deref(),
        params.field_selector.as_deref(),
        &info.field_labels(),
    )?;
    let token = params.continue_token.as_deref().filter(|t| !t.is_empty());
    let (at, start_after) = match token {
        Some(token) => {
            if params
                .resource_version
                .as_deref()
                .is_some_and(|rv| !rv.is_empty())
            {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let (rv, key) = decode_continue(token)?;
            (rv, Some(key))
        }
        None => {
            let requested = parse_rv(params.resource_version.as_deref())?;
            match (requested, params.resource_version_match.as_deref()) {
                (Some(rv), Some("Exact")) if rv > store.rv => {
                    return Err(ApiError::new(
                        504,
                        "Timeout",
                        format!("Too large resource version: {rv}, current: {}", store.rv),
                    ));
                }
                (Some(rv), Some("Exact")) => (rv, None),
                _ => (store.rv, None),
            }
        }
    };
    let Some(snapshot) = store.snapshot(&info.res, namespace, at) else {
        return Err(if token.is_some() {
            ApiError::gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            )
        } else {
            ApiError::gone(format!(
                "too old resource version: {at} ({})",
                store.compacted
            ))
        });
    };
    let limit = params
        .limit
        .filter(|l| *l > 0)
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let mut items = Vec::new();
    let defaults = read_defaults(info);
    let mut last_key: Option<&ObjKey> = None;
    let mut remaining = 0usize;
    let candidates = snapshot
        .iter()
        .filter(|(k, _)| start_after.as_ref().is_none_or(|s| *k > s));
    for (key, obj) in candidates {
        if !selectors.matches(obj) {
            continue;
        }
        if limit.is_some_and(|l| items.len() >= l) {
            remaining += 1;
            continue;
        }
        items.push(served(obj, rt, defaults));
        last_key = Some(key);
    }
    let mut metadata = json!({"resourceVersion": at.to_string()});
    if remaining > 0
        && let Some(key) = last_key
    {
        metadata["continue"] = json!(encode_continue(at, key));
        if selectors.is_empty() {
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    let list = json!({
        "apiVersion": rt.api_version(),
        "kind": format!("{}List", rt.kind),
        "metadata": metadata,
        "items": items,
    });
    Ok((list, at))
}

/// The schema whose defaults a read of a custom resource applies (`None` for built-ins and
/// schemas without defaults): apiextensions-apiserver defaults stored objects as it reads
/// them.
fn read_defaults(info: &TypeInfo) -> Option<&Schema> {
    (info.rt.custom && super::schema::structural::has_defaults(&info.schema))
        .then_some(&*info.schema)
}

/// A stored object as a read answers it.
fn served(obj: &Value, rt: &ResourceType, defaults: Option<&Schema>) -> Value {
    let mut out = present(obj, rt);
    if let Some(schema) = defaults {
        super::schema::structural::default(&mut out, schema);
    }
    out
}

/// The component statuses kube-apiserver reports without a scheduler or controller-manager
/// (their health ports refuse connections) and with its etcd, in its order.
fn component_statuses() -> Vec<Value> {
    let refused = |port: u16| {
        json!([{"type": "Healthy", "status": "False", "message": format!(
            "Get \"https://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )}])
    };
    vec![
        json!({"metadata": {"name": "scheduler"}, "conditions": refused(10259)}),
        json!({"metadata": {"name": "controller-manager"}, "conditions": refused(10257)}),
        json!({"metadata": {"name": "etcd-0"}, "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}),
    ]
}

impl Engine {
    /// Reads one object.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "namespaces").unwrap();
    /// let ns = engine.get(&rt, None, "default").unwrap();
    /// assert_eq!(ns["status"]["phase"], "Active");
    /// ```
    pub fn get(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let store = self.inner.read();
        let info = store.registry.lookup(rt)?;
        if info.special == Special::ComponentStatus {
            let mut found = component_statuses()
                .into_iter()
                .find(|c| c["metadata"]["name"] == name)
                .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
            found["kind"] = json!("ComponentStatus");
            found["apiVersion"] = json!("v1");
            return Ok(found);
        }
        let key: ObjKey = (scope(&info, namespace)?, name.to_string());
        store
            .peek(&info.res, &key)
            .map(|obj| served(obj, rt, read_defaults(&info)))
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// Lists objects: a `<Kind>List` sorted by namespace then name, with
    /// `metadata.resourceVersion`, and `metadata.continue` (+ `remainingItemCount` when
    /// unfiltered) when `limit` cut the page short.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "namespaces").unwrap();
    /// let page = engine.list(&rt, None, &ListParams { limit: Some(2), ..Default::default() }).unwrap();
    /// assert_eq!(page["items"].as_array().unwrap().len(), 2);
    /// assert!(page["metadata"]["continue"].is_string());
    /// ```
    pub fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<Value, ApiError> {
        let store = self.inner.read();
        let info = store.registry.lookup(rt)?;
        if info.special == Special::ComponentStatus {
            return Ok(json!({"kind": "ComponentStatusList", "apiVersion": "v1",
                "metadata": {}, "items": component_statuses()}));
        }
        let (mut list, _) = collect_list(&store, &info, namespace, params)?;
        if !rt.custom
            && let Some(items) = list.get_mut("items").and_then(Value::as_array_mut)
        {
            // Items of a built-in list carry no `apiVersion`/`kind` on kube-apiserver.
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                item.remove("apiVersion");
                item.remove("kind");
            }
        }
        Ok(list)
    }
}
