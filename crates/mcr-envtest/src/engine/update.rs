//! The update pipeline shared by `PUT` and every `PATCH` flavour: subresource rules,
//! server-owned metadata, finalizer rules, generation, managed fields, no-op detection and the
//! final removal of a deleted object whose finalizers are gone.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::managed::{Operation, scope_for};
use super::meta::{finalizers_of, is_deleting, meta_mut, name_of, rv_of, spec_part};
use super::registry::{Generation, Special, TypeInfo, present};
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
/// Built-in kinds that kube-apiserver stores again, unchanged but with a new resourceVersion,
/// on the first write after their create that changes nothing.
pub(crate) const STORED_AGAIN: &[&str] = &["PersistentVolumeClaim"];

/// Built-in kinds whose registry strategy does not check an update's metadata itself (only the
/// generic store does, so a metadata cause is listed once).
const META_CHECKED_ONCE: &[&str] = &["PersistentVolume"];

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
    if let Err(err) = special::defaults(info, &mut new, opts) {
        if info.special == Special::Pod && subresource.is_none() && err.code == 422 {
            let mut probe = new.clone();
            super::defaults::on_update(store, info, &mut probe, existing);
            return Err(super::validate::pod_update_refusal(info, existing, &probe).unwrap_or(err));
        }
        return Err(err);
    }
    // kube-apiserver records no owner for a Pod's binding.
    if operation == Operation::Update && subresource != Some("binding") {
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
    special::normalize(info, &mut new, Some(existing), subresource);
    if subresource.is_none() && !rt.custom && rt.kind == "APIService" {
        super::apiservice::converge(store, &mut new);
    }
    if subresource.is_none() {
        super::defaults::on_update(store, info, &mut new, existing);
        super::validate::check_update(info, existing, &new)?;
        if info.special == Special::Pod {
            // A Pod that becomes terminating or stops being so is counted again.
            let ns = super::meta::namespace_of(existing).to_string();
            let name = super::meta::name_of(existing).to_string();
            super::admission::resource_quota(
                store,
                info,
                &ns,
                &name,
                &new,
                Some(existing),
                opts.dry_run,
            )?;
        }
    }
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
            // As Go prints a `[]string` with `%#v`.
            let list: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
            let mut err = ApiError::invalid(
                &rt.kind,
                name_of(existing),
                format!(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    list.join(", ")
                ),
            )
            .in_group(&rt.group);
            if !rt.custom
                && !META_CHECKED_ONCE.contains(&rt.kind.as_str())
                && let Some(causes) = err
                    .details
                    .as_mut()
                    .and_then(|d| d["causes"].as_array_mut())
            {
                // kube-apiserver checks a built-in's metadata twice (its strategy and the
                // generic store) and lists the cause twice; the message says it once.
                let first = causes.first().cloned();
                causes.extend(first);
            }
            return Err(err);
        }
    }
    // A binding sets `spec.nodeName` outside the Pod's update strategy, which is what moves
    // its generation.
    let moved = subresource != Some("binding")
        && match info.generation {
            Generation::None | Generation::Fixed => false,
            Generation::Spec => {
                spec_part(&new, rt.status_subresource) != spec_part(existing, rt.status_subresource)
            }
            Generation::SpecOrLabels => {
                spec_part(&new, rt.status_subresource) != spec_part(existing, rt.status_subresource)
                    || new.pointer("/metadata/labels") != existing.pointer("/metadata/labels")
            }
        };
    if moved {
        let generation = existing["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        meta_mut(&mut new).insert("generation".into(), json!(generation));
    }
    if new == **existing || super::managed::same_but_times(&new, existing) {
        let key = (info.res.clone(), super::state::key_of(existing));
        if opts.dry_run || !store.untouched.contains(&key) {
            // A write that changes nothing but the time of its managedFields entry is no write.
            return Ok(present(existing, rt));
        }
        // kube-apiserver stores the object again, unchanged (a MODIFIED event).
        let stored = store.put(&info.res, (**existing).clone());
        return Ok(present(&stored, rt));
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
    let ns = super::meta::namespace_of(&stored).to_string();
    super::apiservice::after_change(store, &info.res, &ns);
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
