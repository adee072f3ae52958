//! Patch algorithms: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge
//! patch (with the merge keys of the built-in types, by field name).

use serde_json::{Map, Value};

use super::{ApiError, PatchType};

/// Merge key of a list field under strategic merge (by field name, as the built-ins define it).
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "secrets" => "name",
        // Also a Service's `port` (see `merge_list`).
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ownerReferences" => "uid",
        "conditions" => "type",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Lists of scalars merged as sets under strategic merge (`patchStrategy: merge`).
fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

fn is_directive(key: &str) -> bool {
    key == "$patch"
        || key == "$retainKeys"
        || key.starts_with("$setElementOrder/")
        || key.starts_with("$deleteFromPrimitiveList/")
}

/// A patch value as it is stored when it has nothing to merge into: directives and nulls gone.
fn clean(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !is_directive(k) && !v.is_null())
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|v| v.get("$patch").is_none())
                .map(clean)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn bad_patch(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

/// Applies a strategic merge patch to `target` in place.
pub(crate) fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Value::Object(patch) = patch else {
        return Err(bad_patch("strategic merge patch must be a JSON object"));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Some(map) = target.as_object_mut() {
        merge_map(map, patch)?;
    }
    Ok(())
}

fn merge_map(target: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), ApiError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = clean(&Value::Object(patch.clone()))
                .as_object()
                .cloned()
                .unwrap_or_default();
            return Ok(());
        }
        Some("delete") => {
            target.clear();
            return Ok(());
        }
        Some(other) => return Err(bad_patch(format!("unknown patch type: {other}"))),
        None => {}
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove = value.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(items)) = target.get_mut(field) {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if is_directive(key) {
            continue;
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(child) => {
                if child.get("$patch").and_then(Value::as_str) == Some("delete") {
                    target.remove(key);
                    continue;
                }
                let slot = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Some(map) = slot.as_object_mut() {
                    merge_map(map, child)?;
                }
            }
            Value::Array(items) => {
                let merged = merge_list(key, target.get(key), items)?;
                target.insert(key.clone(), merged);
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

fn merge_list(field: &str, current: Option<&Value>, patch: &[Value]) -> Result<Value, ApiError> {
    let replace = patch
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"));
    let current = current.and_then(Value::as_array);
    if replace || current.is_none() {
        return Ok(clean(&Value::Array(patch.to_vec())));
    }
    let mut out: Vec<Value> = current.cloned().unwrap_or_default();
    // A container's ports merge on `containerPort`, a Service's on `port`.
    let service_ports = field == "ports"
        && patch
            .iter()
            .all(|item| item.get("containerPort").is_none() && item.get("port").is_some());
    let key = if service_ports {
        Some("port")
    } else {
        merge_key(field)
    };
    if let Some(key) = key.filter(|_| patch.iter().all(Value::is_object)) {
        for item in patch {
            let id = item.get(key);
            let pos = id.and_then(|id| out.iter().position(|o| o.get(key) == Some(id)));
            let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
            match (pos, delete) {
                (Some(i), true) => {
                    out.remove(i);
                }
                (None, true) => {}
                (Some(i), false) => strategic_merge(&mut out[i], item)?,
                (None, false) => out.push(clean(item)),
            }
        }
        return Ok(Value::Array(out));
    }
    if is_set_list(field) {
        for item in patch {
            if !out.contains(item) {
                out.push(item.clone());
            }
        }
        return Ok(Value::Array(out));
    }
    Ok(clean(&Value::Array(patch.to_vec())))
}

/// Parses a patch body as JSON (400 when it is not).
fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad_patch(format!("error decoding patch: {e}")))
}

/// Applies a merge, JSON or strategic patch to a copy of `current`.
pub(crate) fn apply_patch(
    current: &Value,
    patch_type: PatchType,
    body: &[u8],
) -> Result<Value, ApiError> {
    let mut doc = current.clone();
    match patch_type {
        PatchType::Merge => {
            let patch = parse_json(body)?;
            if !patch.is_object() {
                return Err(bad_patch("merge patch must be a JSON object"));
            }
            json_patch::merge(&mut doc, &patch);
        }
        PatchType::Json => {
            let patch: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| bad_patch(format!("error decoding JSON patch: {e}")))?;
            // kube-apiserver's JSON patch replaces a missing member of an object by adding it.
            let mut result = doc.clone();
            let mut failed = false;
            for op in patch.0 {
                let op = match op {
                    json_patch::PatchOperation::Replace(r)
                        if result.pointer(r.path.as_str()).is_none()
                            && r.path
                                .parent()
                                .and_then(|p| result.pointer(p.as_str()))
                                .is_some_and(Value::is_object) =>
                    {
                        json_patch::PatchOperation::Add(json_patch::AddOperation {
                            path: r.path,
                            value: r.value,
                        })
                    }
                    op => op,
                };
                if json_patch::patch(&mut result, std::slice::from_ref(&op)).is_err() {
                    failed = true;
                    break;
                }
            }
            doc = result;
            let outcome: Result<(), ()> = if failed { Err(()) } else { Ok(()) };
            outcome.map_err(|_| {
                // kube-apiserver says no more than this (and an empty `details`).
                let mut err = ApiError::new(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                );
                err.details = Some(Value::Object(Map::new()));
                err
            })?;
        }
        PatchType::Strategic => strategic_merge(&mut doc, &parse_json(body)?)?,
        PatchType::Apply => {
            return Err(ApiError::internal(
                "apply patches are handled by server-side apply",
            ));
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(target: Value, patch: Value) -> Value {
        let mut t = target;
        strategic_merge(&mut t, &patch).unwrap();
        t
    }

    #[test]
    fn strategic_lists_merge_by_key() {
        let base = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}]}});
        let out = smp(
            base,
            json!({"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "c", "image": "c:1"},
            {"name": "b", "$patch": "delete"}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
            {"name": "c", "image": "c:1"}]}})
        );
    }

    #[test]
    fn strategic_directives() {
        let base = json!({"a": {"x": 1, "y": 2}, "list": [1, 2], "conditions": [{"type": "A"}], "finalizers": ["f1"]});
        let out = smp(
            base.clone(),
            json!({"a": {"$patch": "replace", "z": 3}, "list": [3]}),
        );
        assert_eq!(out["a"], json!({"z": 3}));
        assert_eq!(out["list"], json!([3]), "plain lists are replaced");
        let out = smp(
            base.clone(),
            json!({"a": {"$patch": "delete"}, "conditions": [{"$patch": "replace"}, {"type": "B"}]}),
        );
        assert!(out.get("a").is_none());
        assert_eq!(out["conditions"], json!([{"type": "B"}]));
        let out = smp(base.clone(), json!({"finalizers": ["f2", "f1"]}));
        assert_eq!(
            out["finalizers"],
            json!(["f1", "f2"]),
            "finalizers merge as a set"
        );
        let out = smp(
            base,
            json!({"$deleteFromPrimitiveList/finalizers": ["f1"], "a": {"x": null}}),
        );
        assert_eq!(out["finalizers"], json!([]));
        assert_eq!(out["a"], json!({"y": 2}));
    }

    #[test]
    fn json_patch_errors() {
        let doc = json!({"a": 1});
        let err = apply_patch(
            &doc,
            PatchType::Json,
            br#"[{"op":"test","path":"/a","value":2}]"#,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            apply_patch(&doc, PatchType::Json, b"{").unwrap_err().code,
            400
        );
        let ok = apply_patch(
            &doc,
            PatchType::Json,
            br#"[{"op":"replace","path":"/a","value":2}]"#,
        )
        .unwrap();
        assert_eq!(ok["a"], 2);
    }
}
