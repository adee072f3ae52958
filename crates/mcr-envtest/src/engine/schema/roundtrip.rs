//! What kube-apiserver's decoding and encoding do to a built-in object: the body is decoded
//! into the Go types of its version and written back by `encoding/json`, so
//!
//! - a field the type does not have is dropped (and reported: `fieldValidation` decides
//!   whether it is a warning or a 400);
//! - a value of the wrong JSON type is a 400 naming the Go struct, field path and Go type
//!   (`json: cannot unmarshal number into Go struct field EnvVar.spec.containers.env.value
//!   of type string`);
//! - quantities come back in canonical form (`0.5` is `500m`), an int-or-string as the JSON
//!   type it was sent as;
//! - zero values follow Go's rules: an `omitempty` field that is `false`, `0`, `""`, `[]` or
//!   `{}` is left out, a pointer keeps its zero value, a struct value is always written
//!   (`status: {}`), a nil slice or pointer without `omitempty` is written as `null`, an
//!   absent string without `omitempty` as `""`.
//!
//! Everything comes from the schema table ([`super::builtin`]): the OpenAPI types and Go's
//! encoding of every field.

use serde_json::{Map, Value, json};

use super::{Field, GoKind, Scalar, Schema};
use crate::engine::quantity::Quantity;

/// What the round trip found that the object loses.
#[derive(Debug, Default)]
pub(crate) struct Dropped {
    /// Unknown fields, as kube-apiserver names them (`spec.containers[0].foo`), depth first in
    /// key order.
    pub unknown: Vec<String>,
}

/// How far the round trip goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Decoding only, for the defaulting that comes next: unknown fields dropped, values
    /// checked and canonical, and a value field (not a pointer) holding its zero value left
    /// out, so that "unset" is one thing as it is in Go (`imagePullPolicy: ""` is defaulted
    /// like a missing one). Nothing is added.
    Decode,
    /// Decoding and encoding: the object as kube-apiserver writes it.
    Encode,
}

/// The object as kube-apiserver stores it (or, with [`Mode::Decode`], as its defaulting sees
/// it), or the decoding error (the text after `<Kind> in version "<v>" cannot be handled as a
/// <Kind>: `).
pub(crate) fn roundtrip(
    obj: &Value,
    schema: &Schema,
    mode: Mode,
) -> Result<(Value, Dropped), String> {
    let mut walk = Walk {
        mode,
        dropped: Dropped::default(),
        path: Vec::new(),
        structs: Vec::new(),
    };
    let out = walk.value(obj, schema)?;
    Ok((out, walk.dropped))
}

/// One step of the path being walked.
enum Seg {
    /// A named field.
    Field(String),
    /// An embedded struct a field comes through (decoding errors name it).
    Via(String),
    /// A list item.
    Index(usize),
    /// A map key.
    Key(String),
}

struct Walk {
    mode: Mode,
    dropped: Dropped,
    path: Vec<Seg>,
    /// The Go structs being decoded, innermost last (`EnvVar`).
    structs: Vec<String>,
}

/// The Go name of a definition (`io.k8s.api.core.v1.EnvVar` is `EnvVar`).
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// The Go type name of a definition as errors print it (`v1.PodSpec`).
fn qualified(name: &str) -> String {
    let mut parts = name.rsplit('.');
    let ty = parts.next().unwrap_or_default();
    match parts.next() {
        Some(pkg) => format!("{pkg}.{ty}"),
        None => ty.to_string(),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The zero value Go's `encoding/json` gives a map element decoded from `null` (a string's
/// `""`, a `resource.Quantity`'s `"0"`, a number's `0`, a bool's `false`), for the scalar
/// element types; `None` for the others (a `[]byte`'s nil is `null` again).
fn zero_of(schema: &Schema) -> Option<Value> {
    let schema = match schema {
        Schema::Ref(id) => super::builtin::table().schema(*id),
        other => other,
    };
    match schema {
        Schema::Scalar(Scalar::String) => Some(json!("")),
        Schema::Scalar(Scalar::Quantity) => Some(json!("0")),
        Schema::Scalar(Scalar::Integer | Scalar::Number) => Some(json!(0)),
        Schema::Scalar(Scalar::Boolean) => Some(json!(false)),
        _ => None,
    }
}

/// Replaces every `null` element of a map of scalars inside `value` (of a built-in's type
/// `schema`) with the zero value Go's decoder stores for it ([`zero_of`]): what a built-in
/// becomes of an applied configuration's `{"hard": {"limits.cpu": null}}`, whose merge keeps
/// the `null` for the decoding.
pub(crate) fn zero_map_nulls(value: &mut Value, schema: &Schema) {
    let schema = match schema {
        Schema::Ref(id) => super::builtin::table().schema(*id),
        other => other,
    };
    match (schema, value) {
        (Schema::Map(m), Value::Object(map)) => {
            for (key, child) in map.iter_mut() {
                let sub = match (m.fields.get(key), &m.elem) {
                    (Some(f), _) => f.schema.as_ref(),
                    (None, Some(elem)) => elem.as_ref(),
                    (None, None) => continue,
                };
                if child.is_null() {
                    if !m.typed && !m.fields.contains_key(key) {
                        *child = zero_of(sub).unwrap_or(Value::Null);
                    }
                } else {
                    zero_map_nulls(child, sub);
                }
            }
        }
        (Schema::List(l), Value::Array(items)) => {
            for item in items {
                zero_map_nulls(item, &l.elem);
            }
        }
        _ => {}
    }
}

impl Walk {
    /// `spec.containers[0].foo`, as unknown fields are named.
    fn display(&self, last: &str) -> String {
        let mut out = String::new();
        for seg in &self.path {
            match seg {
                Seg::Field(name) | Seg::Key(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
                Seg::Via(_) => {}
            }
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(last);
        out
    }

    /// The type error Go's decoder reports here.
    fn type_error(&self, v: &Value, go_type: &str) -> String {
        let fields: Vec<&str> = self
            .path
            .iter()
            .filter_map(|s| match s {
                Seg::Field(n) | Seg::Via(n) => Some(n.as_str()),
                _ => None,
            })
            .collect();
        // Go names the number only when it is one that does not fit an integer.
        let value = match v {
            Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() != 0.0) => {
                format!("number {n}")
            }
            other => json_kind(other).to_string(),
        };
        let owner = self.structs.last().map(String::as_str).unwrap_or("");
        format!(
            "json: cannot unmarshal {value} into Go struct field {owner}.{} of type {go_type}",
            fields.join(".")
        )
    }

    /// The value of a present, non-null `v` under `schema`.
    fn value(&mut self, v: &Value, schema: &Schema) -> Result<Value, String> {
        self.value_as(v, schema, None)
    }

    /// As [`Walk::value`]; `go_type` is the Go type of the field holding `v`, if known.
    fn value_as(
        &mut self,
        v: &Value,
        schema: &Schema,
        go_type: Option<&str>,
    ) -> Result<Value, String> {
        let (schema, def) = match schema {
            Schema::Ref(id) => {
                let table = super::builtin::table();
                (table.schema(*id), Some(table.name(*id)))
            }
            other => (other, None),
        };
        match schema {
            Schema::Scalar(kind) => self.scalar(v, *kind, go_type),
            Schema::Map(m) if m.typed => {
                let Value::Object(input) = v else {
                    let ty = def.map(qualified).unwrap_or_else(|| "struct".into());
                    return Err(self.type_error(v, &ty));
                };
                self.structs
                    .push(def.map(short).unwrap_or_default().to_string());
                let out = self.fields(input, &m.fields);
                self.structs.pop();
                out.map(Value::Object)
            }
            Schema::Map(m) => {
                let Value::Object(input) = v else {
                    return Err(self.type_error(v, go_type.unwrap_or("map[string]string")));
                };
                let mut out = Map::new();
                for (key, child) in input {
                    let sub = match m.fields.get(key) {
                        Some(f) => f.schema.clone(),
                        None => m.elem.clone().unwrap_or_else(super::deduced),
                    };
                    if child.is_null() {
                        // Go's decoder stores a map's `null` as the element's zero value.
                        out.insert(key.clone(), zero_of(&sub).unwrap_or(Value::Null));
                        continue;
                    }
                    self.path.push(Seg::Key(key.clone()));
                    let r = self.value(child, &sub);
                    self.path.pop();
                    out.insert(key.clone(), r?);
                }
                Ok(Value::Object(out))
            }
            Schema::List(l) => {
                let Value::Array(items) = v else {
                    let item = match l.elem.as_ref() {
                        Schema::Ref(id) => qualified(super::builtin::table().name(*id)),
                        Schema::Scalar(Scalar::String) => "string".into(),
                        _ => "interface {}".into(),
                    };
                    return Err(self.type_error(v, go_type.unwrap_or(&format!("[]{item}"))));
                };
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    if item.is_null() {
                        out.push(Value::Null);
                        continue;
                    }
                    self.path.push(Seg::Index(i));
                    let r = self.value(item, &l.elem);
                    self.path.pop();
                    out.push(r?);
                }
                Ok(Value::Array(out))
            }
            Schema::Struct | Schema::Deduced | Schema::Ref(_) => Ok(v.clone()),
        }
    }

    fn scalar(&self, v: &Value, kind: Scalar, go_type: Option<&str>) -> Result<Value, String> {
        let wrong = |default: &str| Err(self.type_error(v, go_type.unwrap_or(default)));
        match kind {
            Scalar::String | Scalar::Bytes => match v {
                Value::String(_) => Ok(v.clone()),
                _ => wrong(if kind == Scalar::Bytes {
                    "[]uint8"
                } else {
                    "string"
                }),
            },
            Scalar::Integer => match v {
                Value::Number(n) if n.is_i64() || n.is_u64() => Ok(v.clone()),
                Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                    // `1.0` decodes into an integer field as 1.
                    Ok(n.as_f64().map(|f| json!(f as i64)).unwrap_or(Value::Null))
                }
                _ => wrong("int64"),
            },
            Scalar::Number => match v {
                Value::Number(_) => Ok(v.clone()),
                _ => wrong("float64"),
            },
            Scalar::Boolean => match v {
                Value::Bool(_) => Ok(v.clone()),
                _ => wrong("bool"),
            },
            Scalar::IntOrString => match v {
                Value::String(_) => Ok(v.clone()),
                Value::Number(n) if n.is_i64() || n.is_u64() => Ok(v.clone()),
                _ => wrong("int32"),
            },
            Scalar::Quantity => {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => return wrong("resource.Quantity"),
                };
                match Quantity::parse(&text) {
                    Some(q) if !text.trim().is_empty() && text.trim() == text => {
                        Ok(Value::String(q.to_string()))
                    }
                    _ => Err(QUANTITY_SYNTAX.to_string()),
                }
            }
            Scalar::Time => match v {
                Value::String(_) => Ok(v.clone()),
                _ => wrong("string"),
            },
            Scalar::Any => Ok(v.clone()),
        }
    }

    /// The fields of a built-in struct, as Go writes them.
    fn fields(
        &mut self,
        input: &Map<String, Value>,
        fields: &std::collections::BTreeMap<String, Field>,
    ) -> Result<Map<String, Value>, String> {
        // In key order, depth first: the order kube-apiserver reports unknown fields of a
        // body whose keys are sorted (as kubectl sends them).
        let names: std::collections::BTreeSet<&String> =
            input.keys().chain(fields.keys()).collect();
        let mut out = Map::new();
        for name in names {
            let Some(field) = fields.get(name) else {
                let at = self.display(name);
                self.dropped.unknown.push(at);
                continue;
            };
            let given = input.get(name).filter(|v| !v.is_null());
            let via = field.go.as_ref().and_then(|g| g.via.as_deref());
            for part in via.into_iter().flat_map(|v| v.split('.')) {
                self.path.push(Seg::Via(part.to_string()));
            }
            self.path.push(Seg::Field(name.clone()));
            let r = self.field(given, field);
            self.path.pop();
            for _ in via.into_iter().flat_map(|v| v.split('.')) {
                self.path.pop();
            }
            if let Some(v) = r? {
                out.insert(name.clone(), v);
            }
        }
        Ok(out)
    }

    /// A field of a built-in struct: what Go writes for it, `None` when it is left out.
    fn field(&mut self, given: Option<&Value>, field: &Field) -> Result<Option<Value>, String> {
        let go_type = field.go.as_ref().and_then(|g| g.ty.as_deref());
        let decoded = match given {
            Some(v) => Some(self.value_as(v, &field.schema, go_type)?),
            None => None,
        };
        let Some(go) = &field.go else {
            return Ok(decoded);
        };
        if self.mode == Mode::Decode {
            let value_field = matches!(
                go.kind,
                GoKind::String
                    | GoKind::Bool
                    | GoKind::Int
                    | GoKind::Float
                    | GoKind::Quantity
                    | GoKind::IntOrString
                    | GoKind::Duration
            );
            let zero = decoded
                .as_ref()
                .is_some_and(|v| zero_scalar(v) || (go.kind == GoKind::Duration && v == "0s"));
            return Ok(decoded.filter(|_| !(value_field && zero)));
        }
        let omit = go.omitempty || go.omitzero;
        let absent = |zero: Value| if go.omitzero { None } else { Some(zero) };
        Ok(match go.kind {
            GoKind::Pointer => match decoded {
                None => (!omit).then_some(Value::Null),
                some => some,
            },
            GoKind::Slice | GoKind::Map | GoKind::Bytes => match decoded {
                None => (!omit).then_some(Value::Null),
                Some(v) if go.omitempty && empty(&v) => None,
                some => some,
            },
            GoKind::String | GoKind::Bool | GoKind::Int | GoKind::Float => {
                let v = decoded.unwrap_or_else(|| match go.kind {
                    GoKind::String => json!(""),
                    GoKind::Bool => json!(false),
                    _ => json!(0),
                });
                (!(omit && zero_scalar(&v))).then_some(v)
            }
            GoKind::Struct => {
                let v = match decoded {
                    Some(v) => v,
                    None => self.value_as(&json!({}), &field.schema, None)?,
                };
                if go.omitzero && v == self.value_as(&json!({}), &field.schema, None)? {
                    None
                } else {
                    Some(v)
                }
            }
            GoKind::Time | GoKind::Raw => decoded.or_else(|| absent(Value::Null)),
            GoKind::Quantity => decoded.or_else(|| absent(json!("0"))),
            GoKind::IntOrString => decoded.or_else(|| absent(json!(0))),
            GoKind::Duration => decoded.or_else(|| absent(json!("0s"))),
        })
    }
}

/// What `quantity.UnmarshalJSON` says of text that is not a quantity.
const QUANTITY_SYNTAX: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// An empty slice, map or string (what `omitempty` leaves out of a non-scalar).
fn empty(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

/// Go's zero value of a scalar: `false`, `0`, `""`.
fn zero_scalar(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::schema::builtin;

    fn pod() -> std::sync::Arc<Schema> {
        builtin("", "v1", "Pod")
    }

    #[test]
    fn zero_values_follow_go() {
        let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {}},
            "spec": {"containers": [{"name": "c", "image": "i", "env": [], "tty": false,
                "volumeMounts": [{"name": "v", "mountPath": "/x", "readOnly": false}],
                "resources": {"requests": {"cpu": "0.5", "memory": 1073741824}}}],
                "hostNetwork": false, "activeDeadlineSeconds": 0}});
        let (out, dropped) = roundtrip(&p, &pod(), Mode::Encode).unwrap();
        assert!(dropped.unknown.is_empty());
        assert_eq!(
            out,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i",
                    "volumeMounts": [{"name": "v", "mountPath": "/x"}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1073741824"}}}],
                    "activeDeadlineSeconds": 0},
                "status": {}})
        );
    }

    #[test]
    fn decoding_leaves_zero_values_out_and_adds_nothing() {
        let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 0, "protocol": ""}],
            "clusterIP": "", "publishNotReadyAddresses": false, "sessionAffinityConfig": {}}});
        let (out, _) = roundtrip(&svc, &builtin("", "v1", "Service"), Mode::Decode).unwrap();
        assert_eq!(
            out,
            json!({"spec": {"ports": [{"port": 80}], "sessionAffinityConfig": {}}})
        );
    }

    #[test]
    fn unknown_fields_and_type_errors_are_named_as_kube_apiserver_names_them() {
        let p = json!({"spec": {"foo": 1, "containers": [{"name": "c", "bar": 2}]}});
        let (_, dropped) = roundtrip(&p, &pod(), Mode::Encode).unwrap();
        assert_eq!(dropped.unknown, ["spec.containers[0].bar", "spec.foo"]);
        let bad =
            |spec: Value| roundtrip(&json!({"spec": spec}), &pod(), Mode::Decode).unwrap_err();
        assert_eq!(
            bad(json!({"containers": [{"name": "c", "env": [{"name": "a", "value": 5}]}]})),
            "json: cannot unmarshal number into Go struct field EnvVar.spec.containers.env.value of type string"
        );
        assert_eq!(
            bad(
                json!({"containers": [{"name": "c", "livenessProbe": {"httpGet": {"port": 1.5}}}]})
            ),
            "json: cannot unmarshal number 1.5 into Go struct field HTTPGetAction.spec.containers.livenessProbe.ProbeHandler.httpGet.port of type int32"
        );
        assert_eq!(
            bad(json!({"containers": "x"})),
            "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container"
        );
        assert_eq!(
            bad(json!({"hostNetwork": "true"})),
            "json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool"
        );
        assert_eq!(
            bad(json!({"containers": [{"resources": {"limits": {"cpu": "x"}}}]})),
            QUANTITY_SYNTAX
        );
    }
}
