//! The update pipeline shared by `PUT` and every `PATCH` flavour: subresource rules,
//! server-owned metadata, finalizer rules, generation, managed fields, no-op detection and the
//! final removal of a deleted object whose finalizers are gone.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::managed::{Operation, scope_for};
use super::meta::{finalizers_of, is_deleting, meta_mut, name_of, rv_of, spec_part};
use super::registry::{Special, TypeInfo, present};
use super::state::Store;
use super::{ApiError, WriteOptions, crd, gc, special};

/// Metadata the server owns: never taken from a request body on update.
const SERVER_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
    "name",
    "namespace",
];
/// The update pipeline shared by `PUT` and `PATCH`: subresource rules, server-owned metadata,
/// finalizer rules, generation, managed fields, no-op detection, final removal of a deleted
/// object whose finalizers are gone.
pub(crate) fn finish_update(
    store: &mut Store,
    info: &TypeInfo,
    existing: &Arc<Value>,
    candidate: Value,
    subresource: Option<&str>,
    opts: &WriteOptions,
    operation: Operation,
) -> Result<Value, ApiError> {
    let rt = &info.rt;

    let sent_managed = candidate.pointer("/metadata/managedFields").cloned();
    let mut new = match subresource {
        Some("status") => with_status_of(existing, &candidate),
        // `scale`, `binding`, `approval`, ...: the caller changed only what they write.
        Some(_) => candidate,
        None if rt.status_subresource => with_status_of(&candidate, existing),
        None => candidate,
    };
    let old_meta = existing
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let meta = meta_mut(&mut new);
    for field in SERVER_META {
        match old_meta.get(*field) {
            Some(v) => meta.insert((*field).to_string(), v.clone()),
            None => meta.remove(*field),
        };
    }
    if let Some(map) = new.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(rt.api_version()));
        map.insert("kind".into(), Value::String(rt.kind.clone()));
    }
    if operation == Operation::Apply {
        // Computed by the apply; the status subresource keeps the rest of the stored object.
        match &sent_managed {
            Some(list) => meta_mut(&mut new).insert("managedFields".into(), list.clone()),
            None => meta_mut(&mut new).remove("managedFields"),
        };
    }
    special::defaults(info, &mut new)?;
    if operation == Operation::Update {
        record_update(
            store,
            info,
            existing,
            &mut new,
            sent_managed.as_ref(),
            subresource,
            opts,
        );
    }
    special::normalize(info, &mut new, Some(existing));
    if info.special == Special::Crd {
        crd::on_update(existing, &mut new)?;
    }
    if is_deleting(existing) {
        let old: Vec<&str> = finalizers_of(existing);
        let added: Vec<&str> = finalizers_of(&new)
            .into_iter()
            .filter(|f| !old.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                &rt.kind,
                name_of(existing),
                format!(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                ),
            ));
        }
    }
    if info.generation
        && spec_part(&new, rt.status_subresource) != spec_part(existing, rt.status_subresource)
    {
        let generation = existing["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        meta_mut(&mut new).insert("generation".into(), json!(generation));
    }
    if new == **existing {
        return Ok(present(existing, rt));
    }
    if opts.dry_run {
        return Ok(present(&new, rt));
    }
    let key = super::state::key_of(&new);
    if is_deleting(&new) && finalizers_of(&new).is_empty() && gc::may_remove(store, info, &new) {
        // Like the real server: one DELETED event, no intermediate MODIFIED.
        if let Some(removed) = gc::final_remove(store, &info.res, &key, None) {
            meta_mut(&mut new).insert("resourceVersion".into(), json!(rv_of(&removed)));
        }
        return Ok(present(&new, rt));
    }
    let stored = store.put(&info.res, new);
    if info.special == Special::Crd {
        crd::serve(store, &stored);
    }
    Ok(present(&stored, rt))
}

/// Records the write's manager in `new`'s `managedFields` (`Update` operation; without a
/// manager, `unknown`).
pub(crate) fn record_update(
    store: &Store,
    info: &TypeInfo,
    old: &Value,
    new: &mut Value,
    sent: Option<&Value>,
    subresource: Option<&str>,
    opts: &WriteOptions,
) {
    let fields = scope_for(store, info, subresource);
    super::managed::record_update(old, new, sent, opts.field_manager.as_deref(), &fields);
}

/// `base` with its `status` replaced by `from`'s (removed when `from` has none).
fn with_status_of(base: &Value, from: &Value) -> Value {
    let mut out = base.clone();
    if let Some(map) = out.as_object_mut() {
        match from.get("status") {
            Some(status) => map.insert("status".into(), status.clone()),
            None => map.remove("status"),
        };
    } else {
        out = Value::Object(Map::new());
    }
    out
}
