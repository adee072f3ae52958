//! Deletion requests (`DELETE` of one object or of a collection): preconditions and propagation
//! policy. The removal itself, and what it sets off, is in [`gc`](super::gc).

use serde_json::{Value, json};

use super::meta::{rv_of, uid_of};
use super::read::collect_list;
use super::registry::{Special, present, scope};
use super::state::ObjKey;
use super::{ApiError, DeleteOptions, Engine, ListParams, ResourceType, gc};

/// Built-in kinds whose immediate delete kube-apiserver answers with the deleted object (the
/// `ReturnDeletedObject` of their registry) rather than a `Status`; Namespaces and CRDs too.
const RETURN_DELETED: &[&str] = &[
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodTemplate",
    "ResourceQuota",
    "Service",
    "ServiceAccount",
    "StorageClass",
];

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
            let Some(existing) = store.get(&info.res, &key) else {
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
            let gone = gc::delete_object(&mut store, &info.res, &key, policy).unwrap_or(existing);
            let removed = store.peek(&info.res, &key).is_none();
            let returns_object = matches!(info.special, Special::Namespace | Special::Crd)
                || (!rt.custom && RETURN_DELETED.contains(&rt.kind.as_str()));
            if removed && !returns_object {
                // kube-apiserver answers an immediate delete with a `Status`, but for the kinds
                // whose registry returns the deleted object, and while finalizers hold it.
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
                if let Some(gone) = gc::delete_object(&mut store, &info.res, &key, policy) {
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
