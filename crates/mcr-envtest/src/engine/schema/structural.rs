//! What apiextensions-apiserver does to a custom resource with its CRD's structural schema:
//! pruning (fields the schema does not declare are dropped, unless
//! `x-kubernetes-preserve-unknown-fields`, and reported like a built-in's unknown fields)
//! and defaulting (a property's `default` fills it when it is missing, or `null` and not
//! `nullable`; a `null` without default that is not `nullable` is dropped). Defaulting runs
//! on every write and on every read of a stored object, so a default added to a CRD shows on
//! objects stored before.

use serde_json::Value;

use super::Schema;

/// Drops the fields `schema` does not declare; returns them as kube-apiserver names them
/// (`spec.foo`, `spec.items[0].bar`).
pub(crate) fn prune(obj: &mut Value, schema: &Schema) -> Vec<String> {
    let mut unknown = Vec::new();
    prune_at(obj, schema, "", &mut unknown);
    unknown
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn prune_at(value: &mut Value, schema: &Schema, path: &str, unknown: &mut Vec<String>) {
    // Built-in definitions (an embedded `metadata`) are not pruned here.
    match (schema, value) {
        (Schema::Map(m), Value::Object(map)) => {
            // Depth first in key order, as kube-apiserver reports a body with sorted keys.
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let sub = match (m.fields.get(&k), &m.elem) {
                    (Some(f), _) => f.schema.clone(),
                    (None, _) if m.prune => {
                        map.remove(&k);
                        unknown.push(join(path, &k));
                        continue;
                    }
                    (None, Some(elem)) => elem.clone(),
                    (None, None) => continue,
                };
                if let Some(v) = map.get_mut(&k) {
                    prune_at(v, &sub, &join(path, &k), unknown);
                }
            }
        }
        (Schema::List(l), Value::Array(items)) => {
            for (i, item) in items.iter_mut().enumerate() {
                prune_at(item, &l.elem, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
}

/// Fills the schema's defaults into `obj` (and drops the `null`s that may not be there).
pub(crate) fn default(obj: &mut Value, schema: &Schema) {
    match (schema, obj) {
        (Schema::Map(m), Value::Object(map)) => {
            for (k, f) in &m.fields {
                match (map.get(k), &f.default) {
                    (None, Some(d)) => {
                        map.insert(k.clone(), d.clone());
                    }
                    (Some(Value::Null), Some(d)) if !f.nullable => {
                        map.insert(k.clone(), d.clone());
                    }
                    (Some(Value::Null), None)
                        if !f.nullable && !matches!(*f.schema, Schema::Ref(_)) =>
                    {
                        map.remove(k);
                    }
                    _ => {}
                }
            }
            for (k, v) in map.iter_mut() {
                match (m.fields.get(k), &m.elem) {
                    (Some(f), _) => default(v, &f.schema),
                    (None, Some(elem)) => default(v, elem),
                    (None, None) => {}
                }
            }
        }
        (Schema::List(l), Value::Array(items)) => {
            for item in items {
                default(item, &l.elem);
            }
        }
        _ => {}
    }
}

/// Whether a schema has a default anywhere (reads of its objects need defaulting).
pub(crate) fn has_defaults(schema: &Schema) -> bool {
    match schema {
        Schema::Map(m) => {
            m.fields
                .values()
                .any(|f| f.default.is_some() || has_defaults(&f.schema))
                || m.elem.as_deref().is_some_and(has_defaults)
        }
        Schema::List(l) => has_defaults(&l.elem),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::custom;
    use super::*;
    use serde_json::json;

    fn widget() -> std::sync::Arc<Schema> {
        custom(Some(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "default": 3},
                "color": {"type": "string", "nullable": true, "default": "red"},
                "items": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "weight": {"type": "integer", "default": 1}}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}})))
    }

    #[test]
    fn prunes_what_the_schema_does_not_declare() {
        let mut w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "top": 1, "spec": {"foo": 1, "items": [{"name": "a", "bar": 2}],
                "extra": {"x": {"y": 1}}, "labels": {"any": "thing"}}});
        let unknown = prune(&mut w, &widget());
        assert_eq!(unknown, ["spec.foo", "spec.items[0].bar", "top"]);
        assert_eq!(
            w["spec"],
            json!({"items": [{"name": "a"}], "extra": {"x": {"y": 1}}, "labels": {"any": "thing"}})
        );
    }

    #[test]
    fn defaults_fill_missing_and_non_nullable_null_fields() {
        let mut w = json!({"spec": {"items": [{"name": "a"}, {"name": "b", "weight": null}], "color": null}});
        default(&mut w, &widget());
        assert_eq!(
            w["spec"],
            json!({"size": 3, "color": null, "items": [{"name": "a", "weight": 1}, {"name": "b", "weight": 1}]})
        );
        assert!(has_defaults(&widget()));
    }
}
