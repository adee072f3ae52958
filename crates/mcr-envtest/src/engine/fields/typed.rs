//! Walks over objects with their [`Schema`]: the field set of a value, the comparison of two
//! values, the apply merge, and the removal of a field set, with the rules kube-apiserver
//! applies (structured-merge-diff): a map key is owned itself and through its children, a
//! named field only through its children unless it is empty, an associative list item by its
//! key, an atomic map or list as a whole.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value};

use super::{FieldSet, Pe, canonical, display_path};
use crate::engine::schema::{ListKind, Schema, Shape};

/// What changed between two versions of an object.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    /// Paths only in the old version.
    pub removed: FieldSet,
    /// Leaves in both, with different values.
    pub modified: FieldSet,
    /// Paths only in the new version.
    pub added: FieldSet,
}

/// An error about a value's shape, with the path where it was found.
fn error_at(path: &[Pe], message: impl std::fmt::Display) -> String {
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{}: {message}", display_path(path))
    }
}

/// The path element of a list item.
fn item_pe(item: &Value, kind: &ListKind, index: usize) -> Result<Pe, String> {
    match kind {
        ListKind::Map(keys) => {
            let Value::Object(fields) = item else {
                return Err(format!(
                    "element {index}: associative list with keys may not have non-map elements"
                ));
            };
            let mut key = Map::new();
            for (name, default) in keys {
                match fields
                    .get(name)
                    .filter(|v| !v.is_null())
                    .or(default.as_ref())
                {
                    Some(v) => {
                        key.insert(name.clone(), v.clone());
                    }
                    None => {
                        return Err(format!(
                            "element {index}: associative list with keys has an element that omits key field {name:?} (and doesn't have default value)"
                        ));
                    }
                }
            }
            Ok(Pe::Key(canonical(&Value::Object(key))))
        }
        ListKind::Set => Ok(Pe::Value(canonical(item))),
        ListKind::Atomic => Ok(Pe::Index(index)),
    }
}

/// The granular list kind of a shape, `None` for an atomic list.
fn granular(kind: Option<&ListKind>) -> Option<&ListKind> {
    kind.filter(|k| !matches!(k, ListKind::Atomic))
}

/// Whether the shapes of two values under a schema without types agree.
fn same_kind(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            matches!(
                (a, b),
                (Value::Object(_), Value::Object(_)) | (Value::Array(_), Value::Array(_))
            ) || !(a.is_object() || a.is_array() || b.is_object() || b.is_array())
        }
        _ => true,
    }
}

fn shape<'a>(schema: &'a Schema, lhs: Option<&Value>, rhs: Option<&Value>) -> Shape<'a> {
    if schema.untyped() && !same_kind(lhs, rhs) {
        return Shape::Leaf;
    }
    let probe = match (lhs, rhs) {
        (_, Some(v)) if !v.is_null() => Some(v),
        (Some(v), _) => Some(v),
        (_, v) => v,
    };
    schema.shape(probe)
}

/// The set of fields a value sets.
pub(crate) fn to_set(value: &Value, schema: &Schema) -> Result<FieldSet, String> {
    let mut out = FieldSet::default();
    to_set_at(value, schema, &mut Vec::new(), &mut out)?;
    Ok(out)
}

fn to_set_at(
    value: &Value,
    schema: &Schema,
    path: &mut Vec<Pe>,
    out: &mut FieldSet,
) -> Result<(), String> {
    match schema.shape(Some(value)) {
        Shape::Leaf => out.insert(path),
        Shape::Map { atomic: true, .. } => out.insert(path),
        Shape::Map { .. } => match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let (child_schema, named) = schema.field(key);
                    path.push(Pe::Field(key.clone()));
                    to_set_at(child, &child_schema, path, out)?;
                    let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                    if empty || !named {
                        out.insert(path);
                    }
                    path.pop();
                }
            }
            Value::Null => {}
            _ => out.insert(path),
        },
        Shape::List { elem, kind } => {
            let Some(kind) = granular(kind) else {
                out.insert(path);
                return Ok(());
            };
            match value {
                Value::Array(items) => {
                    let mut seen = HashSet::new();
                    let mut duplicates = HashSet::new();
                    let mut pes = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        let pe = item_pe(item, kind, i).map_err(|e| error_at(path, e))?;
                        if !seen.insert(pe.clone()) && duplicates.insert(pe.clone()) {
                            path.push(pe.clone());
                            out.insert(path);
                            path.pop();
                        }
                        pes.push(pe);
                    }
                    for (item, pe) in items.iter().zip(pes) {
                        if duplicates.contains(&pe) {
                            continue;
                        }
                        path.push(pe);
                        to_set_at(item, &elem, path, out)?;
                        out.insert(path);
                        path.pop();
                    }
                }
                Value::Null => {}
                _ => out.insert(path),
            }
        }
    }
    Ok(())
}

/// Adds, as members, the named fields that lead to a path of `set`.
pub(crate) fn ensure_named(set: &FieldSet, schema: &Schema) -> FieldSet {
    let mut out = FieldSet {
        members: set.members.clone(),
        children: Default::default(),
    };
    for (pe, child) in &set.children {
        let child_schema = match pe {
            Pe::Field(name) => {
                let (s, named) = schema.field(name);
                if named && !child.is_empty() {
                    out.members.insert(pe.clone());
                }
                s
            }
            _ => schema.item(),
        };
        out.children
            .insert(pe.clone(), ensure_named(child, &child_schema));
    }
    out
}

/// Compares two versions of an object.
pub(crate) fn compare(old: &Value, new: &Value, schema: &Schema) -> Result<Comparison, String> {
    let mut out = Comparison::default();
    compare_at(Some(old), Some(new), schema, &mut Vec::new(), &mut out)?;
    Ok(out)
}

fn compare_leaf(lhs: Option<&Value>, rhs: Option<&Value>, path: &[Pe], out: &mut Comparison) {
    match (lhs, rhs) {
        (None, _) => out.added.insert(path),
        (_, None) => out.removed.insert(path),
        (Some(l), Some(r)) if l != r => out.modified.insert(path),
        _ => {}
    }
}

fn compare_at(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    schema: &Schema,
    path: &mut Vec<Pe>,
    out: &mut Comparison,
) -> Result<(), String> {
    match shape(schema, lhs, rhs) {
        Shape::Leaf | Shape::Map { atomic: true, .. } => {
            compare_leaf(lhs, rhs, path, out);
            return Ok(());
        }
        Shape::Map { .. } => {
            let lm = lhs.and_then(Value::as_object);
            let rm = rhs.and_then(Value::as_object);
            if lm.is_none_or(Map::is_empty) && rm.is_none_or(Map::is_empty) {
                compare_leaf(lhs, rhs, path, out);
                return Ok(());
            }
            let mut keys: Vec<&String> = lm.into_iter().flat_map(|m| m.keys()).collect();
            keys.extend(
                rm.into_iter()
                    .flat_map(|m| m.keys())
                    .filter(|k| lm.is_none_or(|l| !l.contains_key(*k))),
            );
            for key in keys {
                let (child_schema, _) = schema.field(key);
                path.push(Pe::Field(key.clone()));
                compare_at(
                    lm.and_then(|m| m.get(key)),
                    rm.and_then(|m| m.get(key)),
                    &child_schema,
                    path,
                    out,
                )?;
                path.pop();
            }
        }
        Shape::List { elem, kind } => {
            let ll = lhs.and_then(Value::as_array);
            let rl = rhs.and_then(Value::as_array);
            let kind = granular(kind);
            let Some(kind) =
                kind.filter(|_| !(ll.is_none_or(Vec::is_empty) && rl.is_none_or(Vec::is_empty)))
            else {
                compare_leaf(lhs, rhs, path, out);
                return Ok(());
            };
            compare_items(
                ll.map(Vec::as_slice).unwrap_or_default(),
                rl.map(Vec::as_slice).unwrap_or_default(),
                kind,
                &elem,
                path,
                out,
            )?;
        }
    }
    match (lhs, rhs) {
        (None, _) => out.added.insert(path),
        (_, None) => out.removed.insert(path),
        _ => {}
    }
    Ok(())
}

fn compare_items(
    lhs: &[Value],
    rhs: &[Value],
    kind: &ListKind,
    elem: &Schema,
    path: &mut Vec<Pe>,
    out: &mut Comparison,
) -> Result<(), String> {
    let mut order: Vec<Pe> = Vec::new();
    let mut left: HashMap<Pe, Vec<&Value>> = HashMap::new();
    let mut right: HashMap<Pe, Vec<&Value>> = HashMap::new();
    for (i, item) in lhs.iter().enumerate() {
        let pe = item_pe(item, kind, i).map_err(|e| error_at(path, e))?;
        let slot = left.entry(pe.clone()).or_default();
        if slot.is_empty() {
            order.push(pe);
        }
        slot.push(item);
    }
    for (i, item) in rhs.iter().enumerate() {
        let pe = item_pe(item, kind, i).map_err(|e| error_at(path, e))?;
        let slot = right.entry(pe.clone()).or_default();
        if slot.is_empty() && !left.contains_key(&pe) {
            order.push(pe.clone());
        }
        slot.push(item);
    }
    for pe in order {
        let l = left.get(&pe).map(Vec::as_slice).unwrap_or_default();
        let r = right.get(&pe).map(Vec::as_slice).unwrap_or_default();
        path.push(pe);
        match (l.len(), r.len()) {
            (0..=1, 0..=1) => compare_at(l.first().copied(), r.first().copied(), elem, path, out)?,
            (2.., 2..) => {
                if l != r {
                    out.modified.insert(path);
                }
            }
            (2.., _) => {
                if let Some(r) = r.first() {
                    compare_at(None, Some(r), elem, path, out)?;
                }
                out.removed.insert(path);
            }
            (_, _) => {
                if let Some(l) = l.first() {
                    compare_at(Some(l), None, elem, path, out)?;
                }
                out.added.insert(path);
            }
        }
        path.pop();
    }
    Ok(())
}

/// Merges an applied configuration (`rhs`) into a live object (`lhs`).
pub(crate) fn merge(lhs: &Value, rhs: &Value, schema: &Schema) -> Result<Value, String> {
    Ok(merge_at(Some(lhs), Some(rhs), schema, &mut Vec::new())?.unwrap_or(Value::Null))
}

fn merge_at(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    schema: &Schema,
    path: &mut Vec<Pe>,
) -> Result<Option<Value>, String> {
    let leaf = || Ok(rhs.or(lhs).cloned());
    match shape(schema, lhs, rhs) {
        Shape::Leaf | Shape::Map { atomic: true, .. } => leaf(),
        Shape::Map { .. } => {
            let lm = lhs.and_then(Value::as_object);
            let rm = rhs.and_then(Value::as_object);
            if lm.is_none_or(Map::is_empty) && rm.is_none_or(Map::is_empty) {
                return leaf();
            }
            let mut out = Map::new();
            let mut keys: Vec<&String> = lm.into_iter().flat_map(|m| m.keys()).collect();
            keys.extend(
                rm.into_iter()
                    .flat_map(|m| m.keys())
                    .filter(|k| lm.is_none_or(|l| !l.contains_key(*k))),
            );
            for key in keys {
                let (child_schema, _) = schema.field(key);
                path.push(Pe::Field(key.clone()));
                let merged = merge_at(
                    lm.and_then(|m| m.get(key)),
                    rm.and_then(|m| m.get(key)),
                    &child_schema,
                    path,
                )?;
                path.pop();
                if let Some(v) = merged {
                    out.insert(key.clone(), v);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
        Shape::List { elem, kind } => {
            let ll = lhs.and_then(Value::as_array);
            let rl = rhs.and_then(Value::as_array);
            let Some(kind) = granular(kind)
                .filter(|_| !(ll.is_none_or(Vec::is_empty) && rl.is_none_or(Vec::is_empty)))
            else {
                return leaf();
            };
            let out = merge_items(
                ll.map(Vec::as_slice).unwrap_or_default(),
                rl.map(Vec::as_slice).unwrap_or_default(),
                kind,
                &elem,
                path,
            )?;
            Ok((!out.is_empty()).then_some(Value::Array(out)))
        }
    }
}

/// Merges list items: shared items in the applied order, live-only items kept where they were.
fn merge_items(
    lhs: &[Value],
    rhs: &[Value],
    kind: &ListKind,
    elem: &Schema,
    path: &mut Vec<Pe>,
) -> Result<Vec<Value>, String> {
    let mut rhs_pes = Vec::with_capacity(rhs.len());
    let mut in_rhs: HashMap<Pe, &Value> = HashMap::new();
    for (i, item) in rhs.iter().enumerate() {
        let pe = item_pe(item, kind, i).map_err(|e| error_at(path, e))?;
        if in_rhs.insert(pe.clone(), item).is_some() {
            return Err(error_at(
                path,
                format!("duplicate entries for key {}", pe_display(&pe)),
            ));
        }
        rhs_pes.push(pe);
    }
    let mut lhs_pes = Vec::with_capacity(lhs.len());
    // `None` for an item that appears more than once: it is not merged.
    let mut in_lhs: HashMap<Pe, Option<&Value>> = HashMap::new();
    for (i, item) in lhs.iter().enumerate() {
        let pe = item_pe(item, kind, i).map_err(|e| error_at(path, e))?;
        in_lhs
            .entry(pe.clone())
            .and_modify(|v| *v = None)
            .or_insert(Some(item));
        lhs_pes.push(pe);
    }
    let mut shared: VecDeque<&Pe> = rhs_pes
        .iter()
        .filter(|pe| in_lhs.contains_key(*pe))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: HashSet<&Pe> = HashSet::new();
    let mut out = Vec::new();
    let mut push = |pe: &Pe, l: Option<&Value>, r: Option<&Value>, path: &mut Vec<Pe>| {
        path.push(pe.clone());
        let merged = merge_at(l, r, elem, path);
        path.pop();
        merged.map(|m| out.extend(m))
    };
    let (mut li, mut ri) = (0, 0);
    while li < lhs_pes.len() || ri < rhs_pes.len() {
        if li < lhs_pes.len() && ri < rhs_pes.len() {
            let pe = &lhs_pes[li];
            if pe == &rhs_pes[ri] {
                merged_rhs.insert(pe);
                push(pe, in_lhs[pe], in_rhs.get(pe).copied(), path)?;
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_rhs.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs_pes.len() {
            let pe = &lhs_pes[li];
            if !in_rhs.contains_key(pe) {
                push(pe, Some(&lhs[li]), None, path)?;
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rhs_pes.len() {
            let pe = &rhs_pes[ri];
            merged_rhs.insert(pe);
            push(
                pe,
                in_lhs.get(pe).copied().flatten(),
                in_rhs.get(pe).copied(),
                path,
            )?;
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok(out)
}

fn pe_display(pe: &Pe) -> String {
    display_path(std::slice::from_ref(pe))
}

/// `value` without the paths of `set`. A map or list that loses every entry becomes `null`
/// (and is dropped when the object is stored).
pub(crate) fn remove(value: &Value, set: &FieldSet, schema: &Schema) -> Value {
    if set.is_empty() {
        return value.clone();
    }
    match schema.shape(Some(value)) {
        Shape::Leaf => value.clone(),
        Shape::Map { atomic, .. } => {
            let Value::Object(map) = value else {
                return Value::Null;
            };
            if atomic || map.is_empty() {
                return Value::Null;
            }
            let mut out = Map::new();
            for (key, child) in map {
                let pe = Pe::Field(key.clone());
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) => {
                        let (child_schema, _) = schema.field(key);
                        out.insert(key.clone(), remove(child, sub, &child_schema));
                    }
                    None => {
                        out.insert(key.clone(), child.clone());
                    }
                }
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Object(out)
            }
        }
        Shape::List { elem, kind } => {
            let Value::Array(items) = value else {
                return Value::Null;
            };
            let Some(kind) = granular(kind) else {
                return Value::Null;
            };
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let Ok(pe) = item_pe(item, kind, i) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) => out.push(remove(item, sub, &elem)),
                    None => out.push(item.clone()),
                }
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Array(out)
            }
        }
    }
}

/// The `null`s [`remove`] left where the schema wants an object or a list: `(path, type)`,
/// the path as validation messages write it (`spec.items[0].tags`).
pub(crate) fn typed_nulls(value: &Value, schema: &Schema) -> Vec<(String, &'static str)> {
    fn walk(value: &Value, schema: &Schema, path: &str, out: &mut Vec<(String, &'static str)>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let (child_schema, _) = schema.field(key);
                    let at = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    if child.is_null() {
                        match child_schema.resolve() {
                            Schema::Map(_) => out.push((at, "object")),
                            Schema::List(_) => out.push((at, "array")),
                            _ => {}
                        }
                    } else {
                        walk(child, &child_schema, &at, out);
                    }
                }
            }
            Value::Array(items) => {
                let elem = schema.item();
                for (i, item) in items.iter().enumerate() {
                    walk(item, &elem, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Value::Object(map) = value {
        // `metadata` is an ObjectMeta, which drops them.
        for (key, child) in map.iter().filter(|(k, _)| *k != "metadata") {
            let root = Value::Object(std::iter::once((key.clone(), child.clone())).collect());
            walk(&root, schema, "", &mut out);
        }
    }
    out
}

/// `value` without `null`s in objects (what storing a typed object or a pruned custom resource
/// does to the `null`s [`remove`] leaves).
pub(crate) fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::schema;
    use serde_json::json;

    #[test]
    fn apply_set_of_a_configmap_and_a_deployment() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"a": "1"}});
        let set = to_set(&cm, &schema::builtin("", "v1", "ConfigMap")).unwrap();
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:name": {}, "f:labels": {"f:a": {}}}, "f:data": {"f:a": {}}})
        );
        let d = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {"containers": [{"name": "m", "ports": [{"containerPort": 80}]}]}}}});
        let set = to_set(&d, &schema::builtin("apps", "v1", "Deployment")).unwrap();
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:spec": {"f:selector": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"m\"}": {
                ".": {}, "f:name": {}, "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
            }}}}}})
        );
    }

    #[test]
    fn merge_keeps_live_order_and_appends_new_items() {
        let s = schema::builtin("apps", "v1", "Deployment");
        let c = |names: &[&str]| json!({"spec": {"template": {"spec": {"containers": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}}}});
        let out = merge(&c(&["a", "b", "c"]), &c(&["c", "d"]), &s).unwrap();
        assert_eq!(out, c(&["a", "b", "c", "d"]));
        let err = merge(&c(&["a"]), &c(&["d", "d"]), &s).unwrap_err();
        assert!(
            err.contains("duplicate entries for key [name=\"d\"]"),
            "{err}"
        );
    }

    #[test]
    fn compare_reports_added_nodes_and_modified_leaves() {
        let s = schema::builtin("", "v1", "ConfigMap");
        let c = compare(
            &json!({"metadata": {"creationTimestamp": null}}),
            &json!({"metadata": {"name": "x"}, "data": {"a": "1"}}),
            &s,
        )
        .unwrap();
        assert_eq!(
            c.added.to_fields_v1(),
            json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:name": {}}})
        );
        assert_eq!(
            c.removed.to_fields_v1(),
            json!({"f:metadata": {"f:creationTimestamp": {}}})
        );
    }
}
