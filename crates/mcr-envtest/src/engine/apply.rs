//! `PATCH` (all four types), server-side apply included.

use serde_json::{Value, json};

use super::managed::{self, Operation, scope_for};
use super::meta::{meta_mut, meta_str, name_of, namespace_of, rv_of, uid_of};
use super::patch::apply_patch;
use super::registry::{TypeInfo, scope};
use super::schema::{ListKind, Schema};
use super::state::{ObjKey, Store};
use super::update::finish_update;
use super::write::{check_body, check_subresource, create_locked};
use super::{ApiError, Engine, PatchType, ResourceType, WriteOptions};

/// Parses an apply body: JSON or YAML, which must be an object.
pub(crate) fn parse_applied(body: &[u8]) -> Result<Value, ApiError> {
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

/// kube-apiserver makes a typed patch of an applied configuration with its type's schema
/// before anything else (structured-merge-diff's `ObjectToTyped`, called by the apiserver's
/// `fieldmanager` in `structuredmerge.go`, v1.36): a field the schema does not declare fails
/// the request, dry run or not and whatever `fieldValidation` says, with a 500 that is no API
/// status (no reason) naming the object as the body does (`namespace/name; group/version,
/// Kind=Kind`) and each field as field ownership names it
/// (`.spec.containers[name="c"].foo: field not declared in schema`; more than one are listed
/// under `errors:`).
fn undeclared_fields(info: &TypeInfo, raw: &Value) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    undeclared(raw, &info.schema, "", &mut errors);
    let listed = match errors.len() {
        0 => return Ok(()),
        1 => errors.remove(0),
        _ => format!("errors:\n  {}", errors.join("\n  ")),
    };
    let (group, version) = match str_of(raw, "apiVersion").rsplit_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), str_of(raw, "apiVersion").to_string()),
    };
    Err(ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({}/{}; {group}/{version}, Kind={}): {listed}",
            meta_str(raw, "namespace").unwrap_or(""),
            meta_str(raw, "name").unwrap_or(""),
            str_of(raw, "kind"),
        ),
    ))
}

/// The undeclared fields of `value` (of type `schema`) at `path`, as structured-merge-diff's
/// validation reports them: it walks a struct's keys and stops at the first it does not
/// know (Go's map order; here the keys' order), and names a list item by its keys
/// (`[name="c"]`, with the keys' defaults), by its value in a set (`[="v"]`), by its index in
/// an atomic list (`[0]`).
fn undeclared(value: &Value, schema: &Schema, path: &str, errors: &mut Vec<String>) {
    let schema = match schema {
        Schema::Ref(id) => super::schema::builtin::table().schema(*id),
        other => other,
    };
    match (schema, value) {
        (Schema::Map(m), Value::Object(map)) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for key in keys {
                let at = format!("{path}.{key}");
                let sub = match (m.fields.get(key.as_str()), &m.elem) {
                    (Some(f), _) => f.schema.as_ref(),
                    (None, _) if m.prune => {
                        errors.push(format!("{at}: field not declared in schema"));
                        return;
                    }
                    (None, Some(elem)) => elem.as_ref(),
                    (None, None) if m.typed => {
                        errors.push(format!("{at}: field not declared in schema"));
                        return;
                    }
                    (None, None) => continue,
                };
                undeclared(&map[key.as_str()], sub, &at, errors);
            }
        }
        (Schema::List(l), Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let at = match &l.kind {
                    ListKind::Map(keys) => {
                        let named: Vec<String> = keys
                            .iter()
                            .filter_map(|(k, default)| {
                                item.get(k)
                                    .filter(|v| !v.is_null())
                                    .or(default.as_ref())
                                    .map(|v| format!("{k}={v}"))
                            })
                            .collect();
                        format!("{path}[{}]", named.join(","))
                    }
                    ListKind::Set => format!("{path}[={item}]"),
                    ListKind::Atomic => format!("{path}[{i}]"),
                };
                undeclared(item, &l.elem, &at, errors);
            }
        }
        _ => {}
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

impl Engine {
    /// Patches an object (or its `status`). `PatchType::Apply` is server-side apply: it needs a
    /// `fieldManager`, creates the object when absent and otherwise merges the applied
    /// configuration into it with field ownership as kube-apiserver tracks it (see
    /// `managed`): fields the manager stopped applying are removed unless another manager
    /// owns them, and changing a field another manager owns is a 409 conflict unless
    /// `force` is set.
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
        self.patch_created(rt, namespace, name, patch_type, body, subresource, opts)
            .map(|(object, _)| object)
    }

    /// [`Engine::patch`], and whether the patch created the object (a server-side apply of an
    /// absent object, which kube-apiserver answers with 201 Created).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch_created(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<(Value, bool), ApiError> {
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
) -> Result<(Value, bool), ApiError> {
    let info = store.registry.lookup(rt)?;
    let ns = scope(&info, namespace)?;
    check_subresource(&info, subresource)?;
    if patch_type == PatchType::Strategic && rt.custom {
        // kube-apiserver lists the patch types a custom resource takes.
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let key: ObjKey = (ns.clone(), name.to_string());
    let existing = store.get(&info.res, &key);
    let (candidate, operation) = if patch_type == PatchType::Apply {
        let Some(manager) = opts.field_manager.as_deref().filter(|m| !m.is_empty()) else {
            return Err(ApiError::bad_request(
                "fieldManager: Required value: is required for apply patch",
            ));
        };
        let raw = parse_applied(body)?;
        undeclared_fields(&info, &raw)?;
        let mut applied = check_body(&info, &ns, raw)?;
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
        let fields = scope_for(store, &info, subresource);
        let Some(existing) = &existing else {
            if subresource.is_some() {
                return Err(ApiError::not_found(&rt.group, &rt.plural, name));
            }
            let empty = managed::empty_object(rt);
            let object = managed::apply(&empty, &applied, manager, opts.force, &fields)?;
            return create_locked(store, &info, &ns, object, opts, Operation::Apply)
                .map(|created| (created, true));
        };
        let candidate = managed::apply(existing, &applied, manager, opts.force, &fields)?;
        (candidate, Operation::Apply)
    } else {
        let Some(existing) = &existing else {
            return Err(ApiError::not_found(&rt.group, &rt.plural, name));
        };
        (
            apply_patch(existing, patch_type, body, &info.schema)?,
            Operation::Update,
        )
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
        operation,
    )
    .map(|updated| (updated, false))
}
