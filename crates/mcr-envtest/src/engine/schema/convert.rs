//! OpenAPI v3 schemas to [`Schema`]s: the built-in definitions of the table (with `$ref`s to
//! each other and Go's encoding of their fields) and the structural schemas of CRDs (inline).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::{Field, Go, ListKind, ListSchema, MapSchema, Scalar, Schema, deduced};

/// What a conversion can look up: the table's definitions by name (built-ins only).
pub(super) struct Context<'a> {
    /// Definition name to index.
    pub ids: &'a HashMap<String, u32>,
    /// The raw definitions, to read the defaults of list keys behind a `$ref`.
    pub raw: &'a serde_json::Map<String, Value>,
}

const REF_PREFIX: &str = "#/components/schemas/";

/// The definition a schema refers to (`$ref`, or `allOf` with one `$ref`).
fn reference(s: &Value) -> Option<&str> {
    s.get("$ref")
        .or_else(|| s.pointer("/allOf/0/$ref"))
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
}

/// The schema of a CRD version's `openAPIV3Schema` (a missing one preserves everything),
/// with `apiVersion`, `kind` and `metadata` as every object has them.
pub(crate) fn custom(openapi: Option<&Value>) -> Arc<Schema> {
    let root = match openapi {
        Some(s) => convert(s, None, None),
        None => Schema::Deduced,
    };
    let mut map = match root {
        Schema::Map(m) => m,
        _ => MapSchema {
            elem: Some(deduced()),
            ..Default::default()
        },
    };
    add_object_fields(&mut map);
    Arc::new(Schema::Map(map))
}

fn add_object_fields(map: &mut MapSchema) {
    let scalar = || Arc::new(Schema::Scalar(Scalar::String));
    map.fields.insert("apiVersion".into(), Field::of(scalar()));
    map.fields.insert("kind".into(), Field::of(scalar()));
    map.fields.insert(
        "metadata".into(),
        Field::of(super::builtin::table().object_meta()),
    );
}

/// Converts one schema. `cx` resolves `$ref`s (built-in definitions); `go` is Go's encoding
/// of the fields when `s` is a built-in struct.
pub(super) fn convert(
    s: &Value,
    cx: Option<&Context<'_>>,
    go: Option<&HashMap<String, Go>>,
) -> Schema {
    if let (Some(name), Some(cx)) = (reference(s), cx)
        && let Some(id) = cx.ids.get(name)
    {
        return Schema::Ref(*id);
    }
    let flag = |name: &str| s.get(name).and_then(Value::as_bool) == Some(true);
    if flag("x-kubernetes-int-or-string") || s["format"] == "int-or-string" {
        return Schema::Scalar(Scalar::IntOrString);
    }
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    let properties = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    if ty == "array" {
        let elem = s
            .get("items")
            .map(|i| Arc::new(convert(i, cx, None)))
            .unwrap_or_else(deduced);
        let kind = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => ListKind::Map(
                s.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|k| (k.to_string(), key_default(s.get("items"), k, cx)))
                    .collect(),
            ),
            _ => ListKind::Atomic,
        };
        return Schema::List(ListSchema { elem, kind });
    }
    if ty == "object" || properties.is_some() || additional.is_some() || preserve {
        let mut map = MapSchema {
            atomic: s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
            typed: go.is_some(),
            prune: go.is_none()
                && !preserve
                && matches!(additional, None | Some(Value::Bool(false))),
            embedded: flag("x-kubernetes-embedded-resource"),
            ..Default::default()
        };
        let mut fields = BTreeMap::new();
        for (k, v) in properties.into_iter().flatten() {
            let text = |name: &str| v.get(name).and_then(Value::as_str).map(Box::from);
            fields.insert(
                k.clone(),
                Field {
                    schema: Arc::new(convert(v, cx, None)),
                    default: v.get("default").cloned(),
                    go: go.and_then(|g| g.get(k)).cloned(),
                    patch_strategy: text("x-kubernetes-patch-strategy"),
                    merge_key: text("x-kubernetes-patch-merge-key"),
                    nullable: v.get("nullable").and_then(Value::as_bool) == Some(true),
                },
            );
        }
        map.fields = fields;
        if map.embedded {
            add_object_fields(&mut map);
        }
        map.elem = match additional {
            Some(Value::Object(a)) if !a.is_empty() => {
                Some(Arc::new(convert(&Value::Object(a.clone()), cx, None)))
            }
            // A built-in struct names all its keys.
            _ if go.is_some() => None,
            _ => Some(deduced()),
        };
        return Schema::Map(map);
    }
    Schema::Scalar(match (ty, s.get("format").and_then(Value::as_str)) {
        ("string", Some("byte")) => Scalar::Bytes,
        ("string", Some("date-time")) => Scalar::Time,
        ("string", _) => Scalar::String,
        ("integer", _) => Scalar::Integer,
        ("number", _) => Scalar::Number,
        ("boolean", _) => Scalar::Boolean,
        _ => Scalar::Any,
    })
}

/// The default of key field `key` of a keyed list's items (following a `$ref`).
fn key_default(items: Option<&Value>, key: &str, cx: Option<&Context<'_>>) -> Option<Value> {
    let items = items?;
    let item = match (reference(items), cx) {
        (Some(name), Some(cx)) => cx.raw.get(name)?,
        _ => items,
    };
    item.pointer(&format!("/properties/{key}/default")).cloned()
}
