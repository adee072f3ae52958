//! Defaulting as kube-apiserver applies it to the built-in kinds, and the values the server
//! sets itself ([`server`]).
//!
//! kube-apiserver defaults an object every time it decodes one: a request body (after a patch
//! is applied to the stored object) and an object read back from storage. Its defaulters are
//! generated (`zz_generated.defaults.go` of each API group): they walk the object and, at
//! every struct of a type that has one, call that type's `SetDefaults_<Type>` function
//! (`pkg/apis/<group>/<version>/defaults.go`), then fill each field marked `+default=` whose
//! value is unset. [`apply`] does the same walk over the schema table: the `+default=`
//! markers are the OpenAPI `default`s of the table, and the functions are ported one by one
//! in this module's children (one per API group), each naming its source. Values are taken
//! from Kubernetes v1.36 and its feature gates' defaults at that release.
//!
//! The defaulters see an object as the Go code does ([`Mode::Decode`]): a value field holding
//! its zero value is absent, so "unset" is one test.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use super::ApiError;
use super::meta::name_of;
use super::quantity::Quantity;
use super::registry::{Special, TypeInfo};
use super::schema::{GoKind, Scalar, Schema};

mod admissionregistration;
mod apiextensions;
mod apps;
mod autoscaling;
mod batch;
mod core;
mod misc;
mod networking;
mod server;

pub(crate) use server::{on_create, on_update, qos_class};

/// An object of one built-in struct type, as its defaulter sees it.
pub(crate) type Obj = Map<String, Value>;

/// A `SetDefaults_<Type>` function.
type Defaulter = fn(&mut Obj);

/// The defaulters of one API group: definition name, function.
type Defaulters = &'static [(&'static str, Defaulter)];

/// Every defaulter, by definition name.
fn registry() -> &'static HashMap<&'static str, Vec<Defaulter>> {
    static REGISTRY: OnceLock<HashMap<&'static str, Vec<Defaulter>>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut all: HashMap<&'static str, Vec<Defaulter>> = HashMap::new();
        for group in [
            core::DEFAULTERS,
            apps::DEFAULTERS,
            batch::DEFAULTERS,
            autoscaling::DEFAULTERS,
            networking::DEFAULTERS,
            admissionregistration::DEFAULTERS,
            apiextensions::DEFAULTERS,
            misc::DEFAULTERS,
        ] {
            for (name, f) in group {
                all.entry(name).or_default().push(*f);
            }
        }
        all
    })
}

/// Defaults a built-in object (decoded, [`Mode::Decode`]); 422 for the shapes kube-apiserver
/// refuses before defaulting (a Pod without containers).
///
/// [`Mode::Decode`]: super::schema::roundtrip::Mode::Decode
pub(crate) fn apply(info: &TypeInfo, obj: &mut Value) -> Result<(), ApiError> {
    if info.rt.custom {
        return Ok(());
    }
    if info.special == Special::Pod
        && obj
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    {
        return Err(ApiError::invalid(
            "Pod",
            name_of(obj),
            "spec.containers: Required value",
        ));
    }
    walk(obj, &info.schema, false);
    Ok(())
}

/// Defaults `value` of type `schema`; `core` says whether the value is inside a core/v1 type
/// (whose resource lists are rounded up to milli-units).
fn walk(value: &mut Value, schema: &Schema, core: bool) {
    match schema {
        Schema::Ref(id) => {
            let table = super::schema::builtin::table();
            let name = table.name(*id);
            let Value::Object(map) = value else {
                return;
            };
            for f in registry().get(name).into_iter().flatten() {
                f(map);
            }
            if let Schema::Map(m) = table.schema(*id) {
                let core = name.starts_with("io.k8s.api.core.v1.");
                for (field, f) in &m.fields {
                    if let Some(default) = &f.default {
                        let pointer = f.go.as_ref().is_some_and(|g| g.kind == GoKind::Pointer);
                        // A zero default of a value field is what Go holds anyway.
                        if map.get(field).is_none_or(Value::is_null) && (pointer || !zero(default))
                        {
                            map.insert(field.clone(), default.clone());
                        }
                    }
                    if let Some(v) = map.get_mut(field) {
                        walk(v, &f.schema, core);
                    }
                }
            }
        }
        Schema::Map(m) => {
            let Value::Object(map) = value else {
                return;
            };
            for (key, v) in map.iter_mut() {
                match (m.fields.get(key), &m.elem) {
                    (Some(f), _) => walk(v, &f.schema, core),
                    (None, Some(elem)) => {
                        if core && matches!(elem.resolve(), Schema::Scalar(Scalar::Quantity)) {
                            round_up_milli(v);
                        } else {
                            walk(v, elem, core);
                        }
                    }
                    (None, None) => {}
                }
            }
        }
        Schema::List(l) => {
            for item in value.as_array_mut().into_iter().flatten() {
                walk(item, &l.elem, core);
            }
        }
        _ => {}
    }
}

/// `SetDefaults_ResourceList` (core/v1 `defaults.go`): every quantity of a resource list is
/// rounded up to a whole milli-unit.
fn round_up_milli(v: &mut Value) {
    if let Some(q) = v.as_str().and_then(Quantity::parse) {
        let rounded = q.round_up_milli();
        if rounded != q {
            *v = Value::String(rounded.to_string());
        }
    }
}

/// Go's zero value: `false`, `0`, `""`.
fn zero(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Whether a pointer field is nil (absent or `null`).
pub(crate) fn nil(m: &Obj, key: &str) -> bool {
    m.get(key).is_none_or(Value::is_null)
}

/// Whether a value field holds its zero value (absent, `null`, `false`, `0`, `""`, or an
/// empty list or map).
pub(crate) fn unset(m: &Obj, key: &str) -> bool {
    m.get(key).is_none_or(|v| {
        v.is_null()
            || zero(v)
            || v.as_array().is_some_and(Vec::is_empty)
            || v.as_object().is_some_and(Map::is_empty)
    })
}

/// Sets `key` to `value` if it is nil.
pub(crate) fn or_nil(m: &mut Obj, key: &str, value: Value) {
    if nil(m, key) {
        m.insert(key.to_string(), value);
    }
}

/// Sets `key` to `value` if it holds its zero value.
pub(crate) fn or_unset(m: &mut Obj, key: &str, value: Value) {
    if unset(m, key) {
        m.insert(key.to_string(), value);
    }
}

/// The struct at `key`, made `{}` if nil.
pub(crate) fn child<'a>(m: &'a mut Obj, key: &str) -> &'a mut Obj {
    let slot = m.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    match slot {
        Value::Object(inner) => inner,
        _ => unreachable!("made an object above"),
    }
}

/// The struct at `key` if it is set.
pub(crate) fn get<'a>(m: &'a mut Obj, key: &str) -> Option<&'a mut Obj> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

/// The items of the list at `key` that are structs.
pub(crate) fn items<'a>(m: &'a mut Obj, key: &str) -> impl Iterator<Item = &'a mut Obj> {
    m.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// The string at `key` (`""` when unset).
pub(crate) fn text<'a>(m: &'a Obj, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or_default()
}
