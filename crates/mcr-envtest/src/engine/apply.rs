//! `PATCH` (all four types) and the simplified server-side apply with `managedFields`.

use serde_json::{Map, Value, json};

use super::meta::{meta_mut, meta_str, name_of, namespace_of, now, rv_of, uid_of};
use super::patch::{apply_patch, strategic_merge};
use super::state::{ObjKey, Store};
use super::update::finish_update;
use super::write::{check_body, check_subresource, create_locked, scope};
use super::{ApiError, Engine, PatchType, ResourceType, WriteOptions};

/// What kind of write a `managedFields` entry records.
#[derive(Clone, Debug)]
pub(crate) enum Operation {
    /// A create, update or non-apply patch.
    Update,
    /// A server-side apply, with the `fieldsV1` set of the applied configuration.
    Apply(Value),
}

/// Metadata that identifies or is owned by the server: not part of a manager's field set.
const UNOWNED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
];

/// The `fieldsV1` set of an applied configuration: maps become `f:` keys, anything else a leaf
/// (lists are owned atomically in this emulation).
pub(crate) fn fields_v1(applied: &Value) -> Value {
    fn walk(value: &Value, top: bool, in_meta: bool) -> Value {
        let Value::Object(map) = value else {
            return json!({});
        };
        let mut out = Map::new();
        for (k, v) in map {
            if (top && (k == "apiVersion" || k == "kind"))
                || (in_meta && UNOWNED_META.contains(&k.as_str()))
            {
                continue;
            }
            out.insert(format!("f:{k}"), walk(v, false, top && k == "metadata"));
        }
        Value::Object(out)
    }
    walk(applied, true, false)
}

/// Adds or replaces this manager's `managedFields` entry (no entry for an anonymous update).
pub(crate) fn record_managed(
    obj: &mut Value,
    manager: Option<&str>,
    operation: &Operation,
    api_version: &str,
    subresource: Option<&str>,
) {
    let Some(manager) = manager.filter(|m| !m.is_empty()) else {
        return;
    };
    let (op, fields) = match operation {
        Operation::Update => ("Update", json!({})),
        Operation::Apply(fields) => ("Apply", fields.clone()),
    };
    let mut entry = json!({
        "manager": manager,
        "operation": op,
        "apiVersion": api_version,
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    });
    if let Some(sub) = subresource {
        entry["subresource"] = json!(sub);
    }
    let meta = meta_mut(obj);
    let mut entries: Vec<Value> = meta
        .get("managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries.retain(|e| {
        !(e["manager"] == json!(manager)
            && e["operation"] == json!(op)
            && e.get("subresource").and_then(Value::as_str) == subresource)
    });
    entries.push(entry);
    meta.insert("managedFields".into(), Value::Array(entries));
}

/// Parses an apply body: JSON or YAML, which must be an object.
fn parse_applied(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => serde_saphyr::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::bad_request(
            "the applied configuration must be an object",
        ))
    }
}

impl Engine {
    /// Patches an object (or its `status`). `PatchType::Apply` is server-side apply: it needs a
    /// `fieldManager`, creates the object when absent and otherwise merges the applied
    /// configuration into it (keyed lists merge, other lists are replaced). Field ownership
    /// and apply conflicts are not tracked.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "configmaps").unwrap();
    /// let opts = WriteOptions { field_manager: Some("me".into()), ..Default::default() };
    /// let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}"#;
    /// let cm = engine.patch(&rt, Some("default"), "a", PatchType::Apply, body, None, &opts).unwrap();
    /// assert_eq!(cm["metadata"]["managedFields"][0]["operation"], "Apply");
    /// let cm = engine.patch(&rt, Some("default"), "a", PatchType::Merge, br#"{"data":{"k":"w"}}"#, None, &opts).unwrap();
    /// assert_eq!(cm["data"]["k"], "w");
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut store = self.inner.write();
        let result = patch_locked(
            &mut store,
            rt,
            namespace,
            name,
            patch_type,
            body,
            subresource,
            opts,
        );
        let rv = store.rv;
        drop(store);
        self.inner.wake(rv);
        result
    }
}

#[allow(clippy::too_many_arguments)]
fn patch_locked(
    store: &mut Store,
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    patch_type: PatchType,
    body: &[u8],
    subresource: Option<&str>,
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let info = store.registry.lookup(rt)?;
    let ns = scope(&info, namespace)?;
    check_subresource(&info, subresource)?;
    if patch_type == PatchType::Strategic && rt.custom {
        return Err(ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json",
        ));
    }
    let key: ObjKey = (ns.clone(), name.to_string());
    let existing = store.get(&info.res, &key).cloned();
    let (candidate, operation) = if patch_type == PatchType::Apply {
        if opts.field_manager.as_deref().is_none_or(str::is_empty) {
            return Err(ApiError::bad_request(
                "fieldManager: Required value: is required for apply patch",
            ));
        }
        let mut applied = check_body(&info, &ns, parse_applied(body)?)?;
        match meta_str(&applied, "name") {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            Some(_) => {}
            None => {
                meta_mut(&mut applied).insert("name".into(), json!(name));
            }
        }
        let operation = Operation::Apply(fields_v1(&applied));
        let Some(existing) = &existing else {
            if subresource.is_some() {
                return Err(ApiError::not_found(&rt.group, &rt.plural, name));
            }
            return create_locked(store, &info, &ns, applied, opts, &operation);
        };
        let mut candidate = (**existing).clone();
        strategic_merge(&mut candidate, &applied)?;
        (candidate, operation)
    } else {
        let Some(existing) = &existing else {
            return Err(ApiError::not_found(&rt.group, &rt.plural, name));
        };
        (apply_patch(existing, patch_type, body)?, Operation::Update)
    };
    let Some(existing) = existing else {
        return Err(ApiError::not_found(&rt.group, &rt.plural, name));
    };
    if name_of(&candidate) != name || namespace_of(&candidate) != ns {
        return Err(ApiError::bad_request(
            "metadata.name and metadata.namespace cannot be changed by a patch",
        ));
    }
    if !uid_of(&candidate).is_empty() && uid_of(&candidate) != uid_of(&existing) {
        let why = format!(
            "Precondition failed: UID in precondition: {}, UID in object meta: {}",
            uid_of(&candidate),
            uid_of(&existing)
        );
        return Err(ApiError::conflict(&rt.group, &rt.plural, name, &why));
    }
    if !rv_of(&candidate).is_empty() && rv_of(&candidate) != rv_of(&existing) {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    finish_update(
        store,
        &info,
        &existing,
        candidate,
        subresource,
        opts,
        &operation,
    )
}
