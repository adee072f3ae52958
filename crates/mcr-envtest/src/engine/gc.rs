//! Removal and what it sets off: finalizers, namespace termination, a CRD's custom objects, and
//! garbage collection by `ownerReferences` (when an owner goes away, dependents whose last live
//! owner it was are deleted (background); dependents with other live owners, and orphaned
//! dependents, lose the reference instead).

use std::sync::Arc;

use serde_json::{Value, json};

use super::crd;
use super::meta::{finalizers_of, is_deleting, meta_mut, now, uid_of};
use super::registry::{Special, TypeInfo};
use super::state::{ObjKey, ResKey, Store};

/// The dependents currently naming `owner_uid`.
fn dependents_of(
    store: &Store,
    owner_uid: &str,
) -> Vec<(super::state::ResKey, super::state::ObjKey)> {
    store
        .dependents
        .get(owner_uid)
        .map(|set| {
            let mut deps: Vec<_> = set.iter().cloned().collect();
            deps.sort();
            deps
        })
        .unwrap_or_default()
}

/// `obj` without owner references to `owner_uid` (the field is dropped when it becomes empty).
fn without_owner(obj: &Value, owner_uid: &str) -> Value {
    let mut out = obj.clone();
    let meta = meta_mut(&mut out);
    let keep: Vec<Value> = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    if keep.is_empty() {
        meta.remove("ownerReferences");
    } else {
        meta.insert("ownerReferences".into(), Value::Array(keep));
    }
    out
}

/// The owner `owner_uid` was removed: delete dependents it was the last live owner of, and drop
/// the dangling reference from the others.
pub(crate) fn collect_dependents(store: &mut Store, owner_uid: &str) {
    if owner_uid.is_empty() {
        return;
    }
    for (res, key) in dependents_of(store, owner_uid) {
        let Some(dep) = store.get(&res, &key) else {
            continue;
        };
        let other_live_owner = super::meta::owner_uids(&dep)
            .iter()
            .any(|uid| uid != owner_uid && store.uids.contains_key(uid));
        if other_live_owner {
            let updated = without_owner(&dep, owner_uid);
            store.put(&res, updated);
        } else {
            delete_object(store, &res, &key, None);
        }
    }
}

/// The owner `owner_uid` was deleted with `propagationPolicy=Orphan`: its dependents stay and
/// lose the reference.
pub(crate) fn orphan_dependents(store: &mut Store, owner_uid: &str) {
    for (res, key) in dependents_of(store, owner_uid) {
        let Some(dep) = store.get(&res, &key) else {
            continue;
        };
        let updated = without_owner(&dep, owner_uid);
        store.put(&res, updated);
    }
}

pub(crate) fn delete_object(
    store: &mut Store,
    res: &ResKey,
    key: &ObjKey,
    policy: Option<&str>,
) -> Option<Arc<Value>> {
    let obj = store.get(res, key)?;
    let info = store.registry.any_version(res);
    let special = info.as_ref().map_or(Special::None, |i| i.special);
    if special == Special::Namespace {
        return delete_namespace(store, res, key);
    }
    if finalizers_of(&obj).is_empty() {
        if special == Special::Pod && !is_deleting(&obj) {
            // A Pod's deletion is graceful, with a grace period of 0 where no kubelet runs it:
            // marked first (one MODIFIED event), then removed.
            store.put(res, mark_deleting(&obj, info.as_deref()));
        }
        return final_remove(store, res, key, policy);
    }
    if is_deleting(&obj) {
        return Some(obj);
    }
    let marked = mark_deleting(&obj, info.as_deref());
    let stored = store.put(res, marked);
    if policy == Some("Orphan") {
        orphan_dependents(store, uid_of(&stored));
    }
    Some(stored)
}

/// Sets `deletionTimestamp` / `deletionGracePeriodSeconds` and bumps a generation the object
/// has (kube-apiserver does, whatever the kind's updates do with it).
fn mark_deleting(obj: &Value, info: Option<&TypeInfo>) -> Value {
    let mut marked = obj.clone();
    let meta = meta_mut(&mut marked);
    meta.insert("deletionTimestamp".into(), json!(now()));
    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    if info.is_some_and(|i| i.generation != super::registry::Generation::None)
        && let Some(g) = meta.get("generation").and_then(Value::as_i64)
    {
        meta.insert("generation".into(), json!(g + 1));
    }
    marked
}

/// Removes the object for good, then handles its dependents, its namespace and (for a CRD) its
/// types and custom objects.
pub(crate) fn final_remove(
    store: &mut Store,
    res: &ResKey,
    key: &ObjKey,
    policy: Option<&str>,
) -> Option<Arc<Value>> {
    let special = store
        .registry
        .any_version(res)
        .map_or(Special::None, |i| i.special);
    if special == Special::Crd
        && let Some(crd) = store.get(res, key)
    {
        purge(store, &crd::res_of(&crd));
    }
    let removed = store.remove(res, key)?;
    super::apiservice::after_change(store, res, &key.0);
    if special == Special::Service {
        // kube-apiserver deletes a removed Service's Endpoints of the same name.
        let endpoints: ResKey = Arc::from("endpoints");
        if store.peek(&endpoints, key).is_some() {
            delete_object(store, &endpoints, key, None);
        }
    }
    if policy == Some("Orphan") {
        orphan_dependents(store, uid_of(&removed));
    } else {
        collect_dependents(store, uid_of(&removed));
    }
    if !key.0.is_empty() {
        try_finalize_namespace(store, &key.0);
    }
    Some(removed)
}

/// Whether a deleted object with no finalizers left may go now (a namespace waits until empty).
pub(crate) fn may_remove(store: &Store, info: &TypeInfo, obj: &Value) -> bool {
    info.special != Special::Namespace
        || store
            .ns_counts
            .get(super::meta::name_of(obj))
            .copied()
            .unwrap_or(0)
            == 0
}

/// Marks a namespace Terminating, deletes everything in it, and removes it once empty.
fn delete_namespace(store: &mut Store, res: &ResKey, key: &ObjKey) -> Option<Arc<Value>> {
    let obj = store.get(res, key)?;
    let marked = if is_deleting(&obj) {
        obj
    } else {
        let mut marked = mark_deleting(&obj, None);
        // kube-apiserver gives a namespace no grace period.
        meta_mut(&mut marked).remove("deletionGracePeriodSeconds");
        marked["status"] = json!({"phase": "Terminating"});
        store.put(res, marked)
    };
    let ns = key.1.clone();
    let mut content: Vec<(ResKey, ObjKey)> = Vec::new();
    for (r, objects) in &store.objects {
        content.extend(
            objects
                .range((ns.clone(), String::new())..)
                .take_while(|((n, _), _)| *n == ns)
                .map(|(k, _)| (r.clone(), k.clone())),
        );
    }
    content.sort();
    for (r, k) in content {
        delete_object(store, &r, &k, None);
    }
    try_finalize_namespace(store, &ns);
    Some(marked)
}

/// Removes a terminating namespace once nothing is left in it and its finalizers are gone.
pub(crate) fn try_finalize_namespace(store: &mut Store, ns: &str) {
    let res: ResKey = Arc::from("namespaces");
    let key: ObjKey = (String::new(), ns.to_string());
    let Some(obj) = store.peek(&res, &key) else {
        return;
    };
    if is_deleting(obj)
        && finalizers_of(obj).is_empty()
        && store.ns_counts.get(ns).copied().unwrap_or(0) == 0
    {
        final_remove(store, &res, &key, None);
    }
}

/// Removes every object of a CRD's resource (finalizers on custom objects are not waited for),
/// then stops serving its types.
fn purge(store: &mut Store, res: &ResKey) {
    let keys: Vec<_> = store
        .objects
        .get(res)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    for key in keys {
        if let Some(removed) = store.remove(res, &key) {
            collect_dependents(store, uid_of(&removed));
            if !key.0.is_empty() {
                try_finalize_namespace(store, &key.0);
            }
        }
    }
    store.objects.remove(res);
    store.registry.replace_resource(res, Vec::new());
}
