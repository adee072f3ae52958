//! `metadata.managedFields`: which manager owns which fields, as kube-apiserver tracks it.
//!
//! - Every write records its manager. A create, update or non-apply patch is an `Update`: the
//!   manager gains the fields it added or changed, and every other manager loses them (updates
//!   never conflict). A server-side apply is an `Apply`: the manager owns exactly the fields of
//!   its configuration; fields it applied before and no manager owns any more are removed; a
//!   field another manager owns with a different value is a conflict (409) unless `force`
//!   moves it.
//! - Entries are keyed by manager, operation, subresource and, for `Update`, apiVersion; at most
//!   ten `Update` entries are kept, older ones fold into `ancient-changes`.
//! - A request may set `managedFields` itself (an empty list resets it). An object without
//!   `managedFields` stays untracked by updates; the first apply gives its fields to
//!   `before-first-apply`.
//!
//! Not emulated, and refused: applies that kube-apiserver would reconcile with the client-side
//! `kubectl.kubernetes.io/last-applied-configuration` annotation.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::ApiError;
use super::fields::typed::{self, Comparison};
use super::fields::{FieldSet, Pe, display_path};
use super::meta::now;
use super::registry::TypeInfo;
use super::schema::{self, Schema};
use super::state::Store;

/// The manager that owns the fields of an untracked object when it is first applied to.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";
/// The manager name older `Update` entries fold into.
const ANCIENT: &str = "ancient-changes";
/// How many `Update` entries are kept.
const MAX_UPDATE_MANAGERS: usize = 10;
/// The client-side apply annotation.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What a `managedFields` entry is keyed by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Id {
    manager: String,
    apply: bool,
    /// Empty for `Apply`: an applier keeps one entry across versions.
    api_version: String,
    subresource: String,
}

impl Id {
    /// How kube-apiserver names the manager in a conflict.
    fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if !self.apply {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    /// kube-apiserver's manager identifier: the entry's JSON without fields, type and time
    /// (and without `apiVersion` for an applier), which orders the managers of a conflict.
    fn identifier(&self) -> String {
        let text = |s: &str| Value::String(s.to_string()).to_string();
        let mut out = String::from("{");
        if !self.manager.is_empty() {
            out.push_str(&format!("\"manager\":{},", text(&self.manager)));
        }
        out.push_str(&format!(
            "\"operation\":{}",
            text(if self.apply { "Apply" } else { "Update" })
        ));
        if !self.api_version.is_empty() {
            out.push_str(&format!(",\"apiVersion\":{}", text(&self.api_version)));
        }
        if !self.subresource.is_empty() {
            out.push_str(&format!(",\"subresource\":{}", text(&self.subresource)));
        }
        out.push('}');
        out
    }
}

#[derive(Clone, Debug)]
struct Entry {
    api_version: String,
    time: Option<String>,
    set: FieldSet,
}

type Managed = BTreeMap<Id, Entry>;

/// How one request writes: its type's schema and the request's version and subresource.
pub(crate) struct Scope<'a> {
    /// The schema of the type.
    pub schema: Arc<Schema>,
    /// The request's `apiVersion`.
    pub api_version: String,
    /// `Some("status")` for the status subresource.
    pub subresource: Option<&'a str>,
    /// Fields this endpoint resets (never owned through it): `status` on the main resource
    /// of a type with a status subresource, the rest on `/status`.
    pub reset: Vec<Vec<Pe>>,
    /// The type's empty object ([`empty_object`]).
    pub empty: Value,
    /// For a custom resource, its kind qualified by group (`Gadget.example.com`), the name
    /// validation errors use; `None` for built-in types.
    pub custom_kind: Option<(String, String)>,
    /// For a `scale` write, the JSON pointer of the replica count. kube-apiserver tracks the
    /// write on the `Scale`, where a count of 0 is left out (`omitempty`): setting 0 removes
    /// the field from every owner and gives it to no one.
    pub scale_replicas: Option<String>,
}

impl Scope<'_> {
    fn filter(&self, set: &FieldSet) -> FieldSet {
        self.reset
            .iter()
            .fold(set.clone(), |s, path| s.without_prefix(path))
    }

    fn filter_comparison(&self, c: &mut Comparison) {
        c.added = self.filter(&c.added);
        c.modified = self.filter(&c.modified);
        c.removed = self.filter(&c.removed);
    }

    fn id(&self, manager: &str, apply: bool) -> Id {
        Id {
            manager: if manager.is_empty() {
                "unknown"
            } else {
                manager
            }
            .to_string(),
            apply,
            api_version: if apply {
                String::new()
            } else {
                self.api_version.clone()
            },
            subresource: self.subresource.unwrap_or_default().to_string(),
        }
    }
}

/// The fields `reset` lists for a type and endpoint.
pub(crate) fn reset_fields(
    kind: Option<&str>,
    has_status: bool,
    subresource: Option<&str>,
) -> Vec<Vec<Pe>> {
    let custom = kind.is_none();
    let f = |s: &str| Pe::Field(s.to_string());
    match (kind, subresource) {
        // A CertificateSigningRequest's spec is the server's (filled from the requester) and
        // its approval writes only metadata and conditions.
        (Some("CertificateSigningRequest"), None) => {
            return vec![vec![f("spec")], vec![f("status")]];
        }
        (Some("CertificateSigningRequest"), Some("approval")) => {
            return vec![vec![f("spec")], vec![f("status"), f("certificate")]];
        }
        _ => {}
    }
    match (subresource, has_status) {
        (Some("status"), _) if custom => vec![vec![f("metadata")], vec![f("spec")]],
        (Some("status"), _) => vec![vec![f("spec")], vec![f("metadata"), f("labels")]],
        // The other subresources write only their own fields (prepared by the caller).
        (Some(_), _) => vec![],
        (None, true) => vec![vec![f("status")]],
        (None, false) => vec![],
    }
}

fn decode(list: Option<&Value>) -> Result<Managed, String> {
    let mut out = Managed::new();
    let Some(list) = list.filter(|v| !v.is_null()) else {
        return Ok(out);
    };
    let Value::Array(entries) = list else {
        return Err("managedFields must be a list".into());
    };
    for (i, e) in entries.iter().enumerate() {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
        let apply = match s("operation") {
            "Apply" => true,
            "Update" => false,
            _ => return Err("operation must be `Apply` or `Update`".into()),
        };
        if s("apiVersion").is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        match s("fieldsType") {
            "FieldsV1" => {}
            "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} in managed fields entry {i}"
                ));
            }
        }
        let set = match e.get("fieldsV1") {
            Some(v) => FieldSet::from_fields_v1(v)?,
            None => FieldSet::default(),
        };
        let id = Id {
            manager: s("manager").to_string(),
            apply,
            api_version: if apply {
                String::new()
            } else {
                s("apiVersion").to_string()
            },
            subresource: s("subresource").to_string(),
        };
        out.insert(
            id,
            Entry {
                api_version: s("apiVersion").to_string(),
                time: e.get("time").and_then(Value::as_str).map(str::to_string),
                set,
            },
        );
    }
    Ok(out)
}

fn encode(managed: &Managed) -> Option<Value> {
    if managed.is_empty() {
        return None;
    }
    let mut entries: Vec<(&Id, &Entry)> = managed.iter().collect();
    // Apply before Update, then by time, manager, apiVersion and subresource.
    entries.sort_by(|(a, ea), (b, eb)| {
        (
            !a.apply,
            ea.time.as_deref().unwrap_or(""),
            &a.manager,
            &ea.api_version,
            &a.subresource,
        )
            .cmp(&(
                !b.apply,
                eb.time.as_deref().unwrap_or(""),
                &b.manager,
                &eb.api_version,
                &b.subresource,
            ))
    });
    let list = entries
        .into_iter()
        .map(|(id, e)| {
            let mut out = Map::new();
            if !id.manager.is_empty() {
                out.insert("manager".into(), json!(id.manager));
            }
            out.insert(
                "operation".into(),
                json!(if id.apply { "Apply" } else { "Update" }),
            );
            out.insert("apiVersion".into(), json!(e.api_version));
            if let Some(t) = &e.time {
                out.insert("time".into(), json!(t));
            }
            out.insert("fieldsType".into(), json!("FieldsV1"));
            out.insert("fieldsV1".into(), e.set.to_fields_v1());
            if !id.subresource.is_empty() {
                out.insert("subresource".into(), json!(id.subresource));
            }
            Value::Object(out)
        })
        .collect();
    Some(Value::Array(list))
}

fn managed_fields_of(obj: &Value) -> Option<&Value> {
    obj.get("metadata").and_then(|m| m.get("managedFields"))
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    out
}

fn set_managed_fields(obj: &mut Value, managed: &Managed) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    match encode(managed) {
        Some(list) => meta.insert("managedFields".into(), list),
        None => meta.remove("managedFields"),
    };
}

/// The paths no manager ever owns.
fn strip(set: &FieldSet) -> FieldSet {
    let f = |s: &str| Pe::Field(s.to_string());
    let mut server = FieldSet::default();
    server.insert(&[f("apiVersion")]);
    server.insert(&[f("kind")]);
    server.insert(&[f("metadata")]);
    for field in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        server.insert(&[f("metadata"), f(field)]);
    }
    set.difference(&server)
}

/// The conflicts of a write: the fields it changes that other managers own, managers in the
/// order of their identifiers, as kube-apiserver prints them.
fn conflict_error(conflicts: &[(Id, FieldSet)]) -> ApiError {
    let mut conflicts = conflicts.to_vec();
    conflicts.sort_by_cached_key(|(id, _)| id.identifier());
    let mut causes = Vec::new();
    let mut lines = Vec::new();
    let mut total = 0;
    for (id, set) in &conflicts {
        lines.push(format!("conflicts with {}:", id.describe()));
        for path in set.paths() {
            total += 1;
            lines.push(format!("- {}", display_path(&path)));
            causes.push(json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", id.describe()),
                "field": display_path(&path),
            }));
        }
    }
    let message = if total == 1 {
        format!(
            "Apply failed with 1 conflict: {}: {}",
            causes[0]["message"].as_str().unwrap_or_default(),
            causes[0]["field"].as_str().unwrap_or_default()
        )
    } else {
        format!("Apply failed with {total} conflicts: {}", lines.join("\n"))
    };
    let mut err = ApiError::new(409, "Conflict", message);
    err.details = Some(json!({ "causes": causes }));
    err
}

/// Moves the fields `old` → `new` changes away from every manager but `me`; with `force`
/// false, a changed field another manager owns is a conflict instead.
fn take_changes(
    old: &Value,
    new: &Value,
    managed: &mut Managed,
    me: Option<&Id>,
    force: bool,
    scope: &Scope<'_>,
) -> Result<Comparison, ApiError> {
    let mut cmp = typed::compare(old, new, &scope.schema).map_err(ApiError::internal)?;
    scope.filter_comparison(&mut cmp);
    let changed = cmp.modified.union(&cmp.added);
    let mut conflicts = Vec::new();
    for (id, entry) in managed.iter() {
        if Some(id) == me {
            continue;
        }
        let owned = entry.set.intersection(&changed);
        if !owned.is_empty() {
            conflicts.push((id.clone(), owned));
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(conflict_error(&conflicts));
    }
    for (id, owned) in conflicts {
        if let Some(e) = managed.get_mut(&id) {
            e.set = e.set.difference(&owned);
        }
    }
    if !cmp.removed.is_empty() {
        for (id, e) in managed.iter_mut() {
            if Some(id) != me {
                e.set = e.set.difference(&cmp.removed);
            }
        }
    }
    managed.retain(|_, e| !e.set.is_empty());
    Ok(cmp)
}

/// Folds the oldest `Update` entries into `ancient-changes` beyond ten of them.
fn cap_updaters(managed: &mut Managed) {
    let mut updaters: Vec<(Option<String>, Id)> = managed
        .iter()
        .filter(|(id, _)| !id.apply)
        .map(|(id, e)| (e.time.clone(), id.clone()))
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort();
    let mut remaining = updaters.len();
    let mut first_of_version: BTreeMap<String, Id> = BTreeMap::new();
    for (_, id) in updaters {
        if remaining <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(entry) = managed.get(&id).cloned() else {
            continue;
        };
        let version = entry.api_version.clone();
        let Some(first) = first_of_version.get(&version).cloned() else {
            first_of_version.insert(version, id);
            continue;
        };
        let bucket = Id {
            manager: ANCIENT.into(),
            apply: false,
            api_version: version,
            subresource: String::new(),
        };
        if !managed.contains_key(&bucket)
            && let Some(moved) = managed.remove(&first)
        {
            managed.insert(bucket.clone(), moved);
        }
        if let Some(b) = managed.get_mut(&bucket) {
            b.set = entry.set.union(&b.set);
            b.time = entry.time.clone();
        }
        managed.remove(&id);
        remaining -= 1;
    }
}

/// Records an `Update` by `manager` (create, update, non-apply patch; `None` or empty is
/// `unknown`) in `new`'s `managedFields`. `old` is the stored object (for a create, the type's empty object);
/// `sent` is the `managedFields` the request carried. Like kube-apiserver, a failure to track
/// ownership drops `managedFields` rather than failing the write.
pub(crate) fn record_update(
    old: &Value,
    new: &mut Value,
    sent: Option<&Value>,
    manager: Option<&str>,
    scope: &Scope<'_>,
) {
    let live = || decode(managed_fields_of(old)).unwrap_or_default();
    let mut managed = if scope.subresource.is_some() {
        live()
    } else if is_reset(sent) {
        Managed::new()
    } else {
        match decode(sent) {
            Ok(m) if !m.is_empty() => m,
            _ => live(),
        }
    };
    let creating = old
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if managed.is_empty() && !creating {
        // An object nobody tracks (its managedFields were removed) stays untracked until an
        // apply.
        set_managed_fields(new, &managed);
        return;
    }
    let mut old_clean = without_managed_fields(old);
    let mut new_clean = without_managed_fields(new);
    if let Some(pointer) = &scope.scale_replicas {
        // kube-apiserver tracks a scale write on the `Scale`, which holds the entries that
        // own the count: a count nobody owns is an untracked `Scale`, and the write records
        // nothing.
        let path: Vec<Pe> = pointer
            .split('/')
            .skip(1)
            .map(|p| Pe::Field(p.replace("~1", "/").replace("~0", "~")))
            .collect();
        if !managed.values().any(|e| owns(&e.set, &path)) {
            set_managed_fields(new, &managed);
            return;
        }
        for obj in [&mut old_clean, &mut new_clean] {
            if obj.pointer(pointer).and_then(Value::as_i64) == Some(0) {
                remove_pointer(obj, pointer);
            }
        }
    }
    let Ok(cmp) = take_changes(&old_clean, &new_clean, &mut managed, None, true, scope) else {
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        return;
    };
    let gained = strip(&scope.filter(&cmp.modified.union(&cmp.added)));
    if !gained.is_empty() {
        // Without a manager, kube-apiserver records the write as `unknown`.
        let manager = manager.unwrap_or_default();
        let id = scope.id(manager, false);
        let set = match managed.get(&id) {
            Some(previous) => gained.union(&previous.set),
            None => gained,
        };
        managed.insert(
            id,
            Entry {
                api_version: scope.api_version.clone(),
                time: Some(now()),
                set,
            },
        );
    }
    cap_updaters(&mut managed);
    set_managed_fields(new, &managed);
}

/// Whether `set` holds `path` itself.
fn owns(set: &FieldSet, path: &[Pe]) -> bool {
    match path {
        [] => false,
        [last] => set.has_member(last),
        [first, rest @ ..] => set.child(first).is_some_and(|c| owns(c, rest)),
    }
}

/// Removes the member a JSON pointer names, if it is there.
fn remove_pointer(obj: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    if let Some(map) = obj.pointer_mut(parent).and_then(Value::as_object_mut) {
        map.remove(&last);
    }
}

/// The `Update` entry of a write the server makes outside a request's tracking (a
/// TokenRequest, which is created and never stored; the status kube-apiserver's own
/// controllers write), recorded under `subresource` for `manager` (`unknown` without one).
/// Like any `Update`, it owns what the write changes from `old` to `new` (both of type
/// `schema`): the fields it sets or changes, and a map or granular list the write adds
/// where `old` had none (`"."`, the field itself), not one `old` already had, even empty
/// or null.
pub(crate) fn created_entry(
    old: &Value,
    new: &Value,
    schema: &Schema,
    manager: Option<&str>,
    api_version: &str,
    subresource: &str,
) -> Value {
    let mut clean = new.clone();
    typed::drop_nulls(&mut clean);
    let set = typed::compare(old, &clean, schema)
        .map(|cmp| cmp.modified.union(&cmp.added))
        .unwrap_or_default();
    json!({
        "manager": manager.filter(|m| !m.is_empty()).unwrap_or("unknown"),
        "operation": "Update",
        "apiVersion": api_version,
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": strip(&set).to_fields_v1(),
        "subresource": subresource,
    })
}

/// Folds the fields of a manager's `previous` entry into its new `entry`: an `Update` adds
/// to what its manager owned before, as [`record_update`] does for a request.
pub(crate) fn keep_previous(previous: &Value, entry: &mut Value) {
    let (Ok(before), Ok(now)) = (
        FieldSet::from_fields_v1(&previous["fieldsV1"]),
        FieldSet::from_fields_v1(&entry["fieldsV1"]),
    ) else {
        return;
    };
    entry["fieldsV1"] = now.union(&before).to_fields_v1();
}

/// Whether two versions of an object differ at most in the times of their `managedFields`
/// entries (kube-apiserver does not store such a write).
pub(crate) fn same_but_times(a: &Value, b: &Value) -> bool {
    let untimed = |v: &Value| {
        let mut v = super::packed::unpacked(v).into_owned();
        if let Some(Value::Array(entries)) = v.pointer_mut("/metadata/managedFields") {
            for e in entries.iter_mut().filter_map(Value::as_object_mut) {
                e.remove("time");
            }
        }
        v
    };
    untimed(a) == untimed(b)
}

/// Whether a request's `managedFields` asks for a reset: `[]` or `[{}]`.
fn is_reset(sent: Option<&Value>) -> bool {
    match sent.and_then(Value::as_array) {
        Some(list) if list.is_empty() => true,
        Some(list) => list.len() == 1 && list[0].as_object().is_some_and(Map::is_empty),
        None => false,
    }
}

/// A server-side apply of `config` by `manager` to `live` (for a create, the type's empty
/// object): the merged object with fields the manager no longer applies removed, and its
/// `managedFields`.
pub(crate) fn apply(
    live: &Value,
    config: &Value,
    manager: &str,
    force: bool,
    scope: &Scope<'_>,
) -> Result<Value, ApiError> {
    if managed_fields_of(config).is_some() {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let mut managed = decode(managed_fields_of(live))
        .map_err(|e| ApiError::internal(format!("failed to decode managed fields: {e}")))?;
    let has_last_applied = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .is_some();
    if has_last_applied && manager == "kubectl" {
        return Err(unsupported(
            "server-side apply by the manager \"kubectl\" to an object with the client-side apply annotation",
        ));
    }
    let live = without_managed_fields(live);
    if managed.is_empty() {
        // The fields of an untracked object go to `before-first-apply` first.
        let empty = without_managed_fields(&scope.empty);
        let cmp = take_changes(&empty, &live, &mut managed, None, true, scope)?;
        let existing = strip(&scope.filter(&cmp.modified.union(&cmp.added)));
        if !existing.is_empty() {
            managed.insert(
                scope.id(BEFORE_FIRST_APPLY, false),
                Entry {
                    api_version: scope.api_version.clone(),
                    time: Some(now()),
                    set: existing,
                },
            );
        }
    }
    let schema = &scope.schema;
    let typed_err =
        |e: String| ApiError::internal(format!("failed to create typed patch object: {e}"));
    let applied = scope.filter(&typed::to_set(config, schema).map_err(typed_err)?);
    let merged = typed::merge(&live, config, schema).map_err(typed_err)?;
    let me = scope.id(manager, true);
    let previous = managed.get(&me).cloned();
    managed.insert(
        me.clone(),
        Entry {
            api_version: scope.api_version.clone(),
            time: previous.as_ref().and_then(|p| p.time.clone()),
            set: applied,
        },
    );
    let pruned = match previous.as_ref().map(|p| &p.set).filter(|s| !s.is_empty()) {
        Some(last) => prune(&merged, &managed, last, schema).map_err(ApiError::internal)?,
        None => merged,
    };
    take_changes(&live, &pruned, &mut managed, Some(&me), force, scope).map_err(|e| {
        if e.code == 409 && has_last_applied {
            unsupported("conflicts of a server-side apply with the client-side apply annotation")
        } else {
            e
        }
    })?;
    let mut object = pruned;
    if let Some((kind, group)) = &scope.custom_kind {
        // A custom resource is validated with what the removal left: an emptied map or list
        // is `null`, which its schema refuses (a typed built-in drops it).
        let nulls = typed::typed_nulls(&object, schema);
        if !nulls.is_empty() {
            return Err(null_error(kind, group, &object, &nulls));
        }
    } else {
        super::schema::roundtrip::zero_map_nulls(&mut object, schema);
    }
    typed::drop_nulls(&mut object);
    if let Some(entry) = managed.get_mut(&me) {
        entry.set = strip(&entry.set);
        if object != live {
            entry.time = Some(now());
        }
    }
    managed.retain(|_, e| !e.set.is_empty());
    set_managed_fields(&mut object, &managed);
    Ok(object)
}

/// Removes from `merged` what the applier applied last time (`last`) and no manager owns
/// now, keeping what is not its to remove.
fn prune(
    merged: &Value,
    managed: &Managed,
    last: &FieldSet,
    schema: &Schema,
) -> Result<Value, String> {
    let named = |s: &FieldSet| typed::ensure_named(s, schema);
    let fields_of = |v: &Value| typed::to_set(v, schema).map(|s| named(&s));
    let last = named(last);
    let all = fields_of(merged)?;
    let without_last = typed::remove(merged, &last, schema);
    let owned = named(
        &managed
            .values()
            .fold(FieldSet::default(), |acc, e| acc.union(&e.set)),
    );
    let unowned = all.difference(&fields_of(&without_last)?.union(&owned));
    let kept = fields_of(&typed::remove(merged, &unowned, schema))?;
    Ok(typed::remove(
        merged,
        &all.difference(&kept).intersection(&last),
        schema,
    ))
}

/// kube-apiserver's 422 for `null` where a custom resource's schema wants an object or list.
fn null_error(kind: &str, group: &str, object: &Value, nulls: &[(String, &str)]) -> ApiError {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let causes: Vec<Value> = nulls
        .iter()
        .map(|(path, ty)| {
            json!({
                "reason": "FieldValueTypeInvalid",
                "message": format!("Invalid value: \"null\": {path} in body must be of type {ty}: \"null\""),
                "field": path,
            })
        })
        .collect();
    let errors: Vec<String> = causes
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let list = if errors.len() == 1 {
        errors[0].clone()
    } else {
        format!("[{}]", errors.join(", "))
    };
    let mut err = ApiError::new(
        422,
        "Invalid",
        format!("{kind}.{group} {name:?} is invalid: {list}"),
    );
    err.details = Some(json!({"name": name, "group": group, "kind": kind, "causes": causes}));
    err
}

fn unsupported(what: &str) -> ApiError {
    ApiError::internal(format!(
        "mcr-envtest does not emulate {what}; run this test on a real kube-apiserver (MCR_ENVTEST=real)"
    ))
}

/// The type's empty object, which a create's ownership is tracked against (kube-apiserver's
/// `New()` of the type, written as Go writes it: struct values such as `status: {}` are
/// there, so nobody owns them).
pub(crate) fn empty_object(rt: &super::ResourceType) -> Value {
    if rt.custom {
        return json!({"apiVersion": rt.api_version(), "kind": rt.kind});
    }
    empty_of(&schema::builtin(&rt.group, &rt.version, &rt.kind))
}

/// The empty object of a built-in type's `schema`, as Go writes it (see [`empty_object`]).
pub(crate) fn empty_of(schema: &Schema) -> Value {
    super::schema::roundtrip::roundtrip(&json!({}), schema, super::schema::roundtrip::Mode::Encode)
        .map(|(empty, _)| empty)
        .unwrap_or_else(|_| json!({}))
}

/// What kind of write a `managedFields` entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    /// A create, update or non-apply patch: ownership is recorded when the object is stored.
    Update,
    /// A server-side apply: the candidate already carries its `managedFields`.
    Apply,
}

/// The field-ownership scope of a request: the type's schema (a CRD's from its stored
/// definition), the request's version, and the fields its endpoint resets.
pub(crate) fn scope_for<'a>(
    store: &Store,
    info: &TypeInfo,
    subresource: Option<&'a str>,
) -> Scope<'a> {
    let rt = &info.rt;
    Scope {
        schema: info.schema.clone(),
        api_version: rt.api_version(),
        subresource,
        reset: reset_fields(
            (!rt.custom).then_some(rt.kind.as_str()),
            rt.status_subresource,
            subresource,
        ),
        empty: empty_object(rt),
        custom_kind: rt.custom.then(|| (rt.kind.clone(), rt.group.clone())),
        scale_replicas: (subresource == Some("scale"))
            .then(|| super::subresource::scale_paths(store, info).ok())
            .flatten()
            .map(|paths| paths.spec_replicas),
    }
}
