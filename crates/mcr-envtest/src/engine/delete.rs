//! Deletion: preconditions, finalizers, propagation, namespace termination.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::{finalizers_of, is_deleting, meta_mut, now, rv_of, uid_of};
use super::read::collect_list;
use super::registry::{Special, TypeInfo};
use super::state::{ObjKey, ResKey, Store};
use super::write::{present, scope};
use super::{ApiError, DeleteOptions, Engine, ListParams, ResourceType, gc};

fn check_policy(opts: &DeleteOptions) -> Result<Option<&str>, ApiError> {
    match opts.propagation_policy.as_deref() {
        None | Some("") => Ok(None),
        Some(p @ ("Orphan" | "Background" | "Foreground")) => Ok(Some(p)),
        Some(other) => Err(ApiError::invalid(
            "DeleteOptions",
            "",
            format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            ),
        )),
    }
}

impl Engine {
    /// Deletes an object. Returns it with `deletionTimestamp` set when finalizers keep it, or as
    /// it was when removed.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "configmaps").unwrap();
    /// let cm = serde_json::json!({"metadata": {"name": "a"}});
    /// engine.create(&rt, Some("default"), cm, &WriteOptions::default()).unwrap();
    /// engine.delete(&rt, Some("default"), "a", &DeleteOptions::default()).unwrap();
    /// assert_eq!(engine.get(&rt, Some("default"), "a").unwrap_err().code, 404);
    /// ```
    pub fn delete(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let mut store = self.inner.write();
        let result = (|| {
            let info = store.registry.lookup(rt)?;
            let key: ObjKey = (scope(&info, namespace)?, name.to_string());
            let policy = check_policy(opts)?;
            let Some(existing) = store.get(&info.res, &key).cloned() else {
                return Err(ApiError::not_found(&rt.group, &rt.plural, name));
            };
            if let Some(uid) = opts
                .precondition_uid
                .as_deref()
                .filter(|u| *u != uid_of(&existing))
            {
                let why = format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    uid_of(&existing)
                );
                return Err(ApiError::conflict(&rt.group, &rt.plural, name, &why));
            }
            if let Some(rv) = opts
                .precondition_resource_version
                .as_deref()
                .filter(|r| *r != rv_of(&existing))
            {
                let why = format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    rv_of(&existing)
                );
                return Err(ApiError::conflict(&rt.group, &rt.plural, name, &why));
            }
            if opts.dry_run {
                return Ok(present(&existing, rt));
            }
            let gone = delete_object(&mut store, &info.res, &key, policy).unwrap_or(existing);
            let removed = store.get(&info.res, &key).is_none();
            if removed && !matches!(info.special, Special::Namespace | Special::Crd) {
                // kube-apiserver answers an immediate delete with a `Status` (it returns the
                // object only for Namespaces, and while finalizers hold it).
                return Ok(deleted_status(rt, name, uid_of(&gone)));
            }
            Ok(present(&gone, rt))
        })();
        let rv = store.rv;
        drop(store);
        self.inner.wake(rv);
        result
    }

    /// Deletes every object matching the list selectors; returns a list of what was deleted.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "configmaps").unwrap();
    /// let params = ListParams { label_selector: Some("app=web".into()), ..Default::default() };
    /// let deleted = engine.delete_collection(&rt, Some("default"), &params, &DeleteOptions::default()).unwrap();
    /// assert_eq!(deleted["items"].as_array().unwrap().len(), 0);
    /// ```
    pub fn delete_collection(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        params: &ListParams,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let mut store = self.inner.write();
        let result = (|| {
            let info = store.registry.lookup(rt)?;
            let policy = check_policy(opts)?;
            let params = ListParams {
                limit: None,
                continue_token: None,
                ..params.clone()
            };
            let (mut list, _) = collect_list(&store, &info, namespace, &params)?;
            if opts.dry_run {
                return Ok(list);
            }
            let mut deleted = Vec::new();
            for item in list["items"].as_array().cloned().unwrap_or_default() {
                let key = super::state::key_of(&item);
                if let Some(gone) = delete_object(&mut store, &info.res, &key, policy) {
                    deleted.push(present(&gone, rt));
                }
            }
            list["items"] = Value::Array(deleted);
            list["metadata"] = json!({"resourceVersion": store.rv.to_string()});
            Ok(list)
        })();
        let rv = store.rv;
        drop(store);
        self.inner.wake(rv);
        result
    }
}

/// Deletes one stored object under the lock, following finalizers and the propagation policy
/// (`None` = Background). Returns the object's resulting state.
/// The `Status` of an object that a delete removed.
fn deleted_status(rt: &ResourceType, name: &str, uid: &str) -> Value {
    let mut details = json!({"name": name, "kind": rt.plural, "uid": uid});
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

pub(crate) fn delete_object(
    store: &mut Store,
    res: &ResKey,
    key: &ObjKey,
    policy: Option<&str>,
) -> Option<Arc<Value>> {
    let obj = store.get(res, key)?.clone();
    let info = store.registry.any_version(res);
    let special = info.as_ref().map_or(Special::None, |i| i.special);
    if special == Special::Namespace {
        return delete_namespace(store, res, key);
    }
    if finalizers_of(&obj).is_empty() {
        return final_remove(store, res, key, policy);
    }
    if is_deleting(&obj) {
        return Some(obj);
    }
    let marked = mark_deleting(&obj, info.as_deref());
    let stored = store.put(res, marked);
    if policy == Some("Orphan") {
        gc::orphan_dependents(store, uid_of(&stored));
    }
    Some(stored)
}

/// Sets `deletionTimestamp` / `deletionGracePeriodSeconds` and bumps a tracked generation.
fn mark_deleting(obj: &Value, info: Option<&TypeInfo>) -> Value {
    let mut marked = obj.clone();
    let meta = meta_mut(&mut marked);
    meta.insert("deletionTimestamp".into(), json!(now()));
    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    if info.is_some_and(|i| i.generation)
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
        && let Some(crd) = store.get(res, key).cloned()
    {
        super::crd::unserve_and_purge(store, &crd);
    }
    let removed = store.remove(res, key)?;
    if policy == Some("Orphan") {
        gc::orphan_dependents(store, uid_of(&removed));
    } else {
        gc::collect_dependents(store, uid_of(&removed));
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
    let obj = store.get(res, key)?.clone();
    let marked = if is_deleting(&obj) {
        obj
    } else {
        let mut marked = mark_deleting(&obj, None);
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
    let Some(obj) = store.get(&res, &key) else {
        return;
    };
    if is_deleting(obj)
        && finalizers_of(obj).is_empty()
        && store.ns_counts.get(ns).copied().unwrap_or(0) == 0
    {
        final_remove(store, &res, &key, None);
    }
}
