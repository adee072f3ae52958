//! Patch algorithms: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge
//! patch, which follows the schema's `x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key` (the `patchStrategy`/`patchMergeKey` tags kube-apiserver
//! reads from its Go types): lists marked `merge` are merged by their key (lists of scalars
//! as sets), every other list is replaced.

use serde_json::{Map, Value};

use super::schema::{Field, Schema};
use super::{ApiError, PatchType};

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

/// Applies a strategic merge patch to `target` (of type `schema`) in place.
pub(crate) fn strategic_merge(
    target: &mut Value,
    patch: &Value,
    schema: &Schema,
) -> Result<(), ApiError> {
    let Value::Object(patch) = patch else {
        return Err(bad_patch("strategic merge patch must be a JSON object"));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Some(map) = target.as_object_mut() {
        merge_map(map, patch, schema)?;
    }
    Ok(())
}

/// How a list field merges.
enum ListMerge<'a> {
    /// Replaced by the patch's list.
    Replace,
    /// Merged as a set of scalars.
    Set,
    /// Merged item by item on this key.
    Keyed(&'a str),
}

fn list_merge(field: Option<&Field>) -> ListMerge<'_> {
    let Some(field) = field else {
        return ListMerge::Replace;
    };
    let merge = field
        .patch_strategy
        .as_deref()
        .is_some_and(|s| s.split(',').any(|p| p == "merge"));
    match (merge, field.merge_key.as_deref()) {
        (false, _) => ListMerge::Replace,
        (true, Some(key)) => ListMerge::Keyed(key),
        (true, None) => ListMerge::Set,
    }
}

fn merge_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    schema: &Schema,
) -> Result<(), ApiError> {
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
        Some("merge") | None => {}
        Some(other) => return Err(bad_patch(format!("unknown patch type: {other}"))),
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
        let (child_schema, _) = schema.field(key);
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
                    merge_map(map, child, &child_schema)?;
                }
            }
            Value::Array(items) => {
                let order = patch
                    .get(&format!("$setElementOrder/{key}"))
                    .and_then(Value::as_array);
                let how = list_merge(schema.named(key));
                let merged = merge_list(target.get(key), items, order, &how, &child_schema)?;
                target.insert(key.clone(), merged);
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    // An order given for a list the patch leaves alone reorders it.
    for (key, order) in patch {
        let Some(field) = key.strip_prefix("$setElementOrder/") else {
            continue;
        };
        if patch.contains_key(field) {
            continue;
        }
        let (Some(Value::Array(current)), Some(order)) = (target.get(field), order.as_array())
        else {
            continue;
        };
        let how = list_merge(schema.named(field));
        let reordered = reorder(current, order, current, &how);
        target.insert(field.to_string(), Value::Array(reordered));
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

/// The identity of a list item: its merge key's value, or itself for scalars.
fn identity<'a>(item: &'a Value, how: &ListMerge<'_>) -> Option<&'a Value> {
    match how {
        ListMerge::Keyed(key) => item.get(*key),
        _ => Some(item),
    }
}

fn position(list: &[Value], item: &Value, how: &ListMerge<'_>) -> Option<usize> {
    let id = identity(item, how)?;
    list.iter().position(|o| identity(o, how) == Some(id))
}

fn merge_list(
    current: Option<&Value>,
    patch: &[Value],
    order: Option<&Vec<Value>>,
    how: &ListMerge<'_>,
    schema: &Schema,
) -> Result<Value, ApiError> {
    let current = current.and_then(Value::as_array);
    let replace = patch
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"));
    let item_schema = schema.item();
    match how {
        ListMerge::Replace => return Ok(clean(&Value::Array(patch.to_vec()))),
        _ if replace => return Ok(clean(&Value::Array(patch.to_vec()))),
        ListMerge::Keyed(_) if !patch.iter().all(Value::is_object) => {
            return Ok(clean(&Value::Array(patch.to_vec())));
        }
        _ => {}
    }
    let original: Vec<Value> = current.cloned().unwrap_or_default();
    let mut merged = original.clone();
    let mut patched: Vec<Value> = Vec::new();
    for item in patch {
        match how {
            ListMerge::Keyed(key) => {
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                if item.get(*key).is_none() {
                    return Err(bad_patch(format!(
                        "map: {item} does not contain declared merge key: {key}"
                    )));
                }
                let pos = position(&merged, item, how);
                match (pos, delete) {
                    (Some(i), true) => {
                        merged.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        strategic_merge(&mut merged[i], item, &item_schema)?;
                        patched.push(item.clone());
                    }
                    (None, false) => {
                        merged.push(clean(item));
                        patched.push(item.clone());
                    }
                }
            }
            _ => {
                if position(&merged, item, how).is_none() {
                    merged.push(item.clone());
                }
                patched.push(item.clone());
            }
        }
    }
    let order: Vec<Value> = match order {
        Some(o) => o.clone(),
        None => patched,
    };
    Ok(Value::Array(reorder(&merged, &order, &original, how)))
}

/// Orders a merged list as kube-apiserver does (`normalizeElementOrder`): the items `order`
/// names in its order, the others (server-only) in their original order, the two merged by
/// their positions in the original list.
fn reorder(
    merged: &[Value],
    order: &[Value],
    original: &[Value],
    how: &ListMerge<'_>,
) -> Vec<Value> {
    let (mut named, mut rest): (Vec<Value>, Vec<Value>) = merged
        .iter()
        .cloned()
        .partition(|item| position(order, item, how).is_some());
    named.sort_by_key(|item| position(order, item, how));
    rest.sort_by_key(|item| position(original, item, how));
    let mut out = Vec::with_capacity(named.len() + rest.len());
    let (mut i, mut j) = (0, 0);
    while i < rest.len() || j < named.len() {
        let take_rest = match (rest.get(i), named.get(j)) {
            (Some(_), None) => true,
            (None, _) => false,
            (Some(l), Some(r)) => match (position(original, l, how), position(original, r, how)) {
                (Some(li), Some(ri)) => li < ri,
                _ => false,
            },
        };
        if take_rest {
            out.push(rest[i].clone());
            i += 1;
        } else {
            out.push(named[j].clone());
            j += 1;
        }
    }
    out
}

/// Parses a patch body as JSON (400 when it is not).
fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad_patch(format!("error decoding patch: {e}")))
}

/// Applies a merge, JSON or strategic patch to a copy of `current` (of type `schema`).
pub(crate) fn apply_patch(
    current: &Value,
    patch_type: PatchType,
    body: &[u8],
    schema: &Schema,
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
        PatchType::Strategic => strategic_merge(&mut doc, &parse_json(body)?, schema)?,
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
    use crate::engine::schema;
    use serde_json::json;

    fn smp(target: Value, patch: Value) -> Value {
        let mut t = target;
        strategic_merge(&mut t, &patch, &schema::builtin("", "v1", "Pod")).unwrap();
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
            {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}]},
            {"name": "c", "image": "c:1"}]}}),
            "a new item goes before the items the patch does not name, as on kube-apiserver"
        );
    }

    #[test]
    fn element_order_puts_patched_items_in_order_and_keeps_the_others() {
        let base = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}});
        let out = smp(
            base,
            json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
                "containers": [{"name": "c", "image": "x"}]}}),
        );
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        // What kube-apiserver answers (checked with kubectl patch against v1.36).
        assert_eq!(names, ["b", "c", "a"]);
    }

    #[test]
    fn strategic_directives() {
        let base = json!({"metadata": {"labels": {"x": "1", "y": "2"}, "finalizers": ["f1"]},
            "spec": {"tolerations": [{"key": "a"}], "nodeSelector": {"a": "b"}}});
        let out = smp(
            base.clone(),
            json!({"metadata": {"labels": {"$patch": "replace", "z": "3"}},
                "spec": {"tolerations": [{"key": "b"}]}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"z": "3"}));
        assert_eq!(
            out["spec"]["tolerations"],
            json!([{"key": "b"}]),
            "lists without a merge strategy are replaced"
        );
        let out = smp(
            base.clone(),
            json!({"spec": {"nodeSelector": {"$patch": "delete"}}}),
        );
        assert!(out["spec"].get("nodeSelector").is_none());
        let out = smp(
            base.clone(),
            json!({"metadata": {"finalizers": ["f2", "f1"]}}),
        );
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["f2", "f1"]),
            "finalizers merge as a set, in the patch's order"
        );
        let out = smp(
            base,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"], "labels": {"x": null}}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!([]));
        assert_eq!(out["metadata"]["labels"], json!({"y": "2"}));
    }

    #[test]
    fn json_patch_errors() {
        let doc = json!({"a": 1});
        let s = schema::deduced();
        let err = apply_patch(
            &doc,
            PatchType::Json,
            br#"[{"op":"test","path":"/a","value":2}]"#,
            &s,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            apply_patch(&doc, PatchType::Json, b"{", &s)
                .unwrap_err()
                .code,
            400
        );
        let ok = apply_patch(
            &doc,
            PatchType::Json,
            br#"[{"op":"replace","path":"/a","value":2}]"#,
            &s,
        )
        .unwrap();
        assert_eq!(ok["a"], 2);
    }
}
