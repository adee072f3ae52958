//! Create and update (`POST`, `PUT`), plus the update pipeline shared with patches.

use serde_json::{Value, json};

use super::managed::Operation;
use super::meta::{
    NameRule, is_deleting, meta_mut, meta_str, name_of, name_problem, new_uid, now, random_suffix,
    rv_of, uid_of,
};
use super::registry::{Special, TypeInfo, present, scope};
use super::state::{ObjKey, Store};
use super::update::{finish_update, record_update};
use super::{ApiError, Engine, ResourceType, WriteOptions, crd, special};

/// Checks kind/apiVersion/namespace of a request body and fills them in from the path.
pub(crate) fn check_body(info: &TypeInfo, ns: &str, mut body: Value) -> Result<Value, ApiError> {
    let Some(map) = body.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let expected = info.rt.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(v) if !v.is_empty() && v != expected => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )));
        }
        _ => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != info.rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                info.rt.kind
            )));
        }
        _ => {}
    }
    map.insert("apiVersion".into(), Value::String(expected));
    map.insert("kind".into(), Value::String(info.rt.kind.clone()));
    let meta = meta_mut(&mut body);
    if info.rt.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {}
        }
        meta.insert("namespace".into(), Value::String(ns.to_string()));
    } else {
        meta.remove("namespace");
    }
    Ok(body)
}

impl Engine {
    /// Creates an object (`POST`). See the module docs of [`crate::engine`] for the rules.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "configmaps").unwrap();
    /// let cm = serde_json::json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    /// let created = engine.create(&rt, Some("default"), cm, &WriteOptions::default()).unwrap();
    /// assert!(created["metadata"]["uid"].is_string());
    /// ```
    pub fn create(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut store = self.inner.write();
        let info = store.registry.lookup(rt)?;
        let ns = scope(&info, namespace).map_err(|_| {
            ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )
        })?;
        let result = create_locked(&mut store, &info, &ns, body, opts, Operation::Update);
        let rv = store.rv;
        drop(store);
        self.inner.wake(rv);
        result
    }

    /// Replaces an object (`PUT`), or only its `status` with `subresource = Some("status")`.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "configmaps").unwrap();
    /// let opts = WriteOptions::default();
    /// let mut cm = engine.create(&rt, Some("default"), serde_json::json!({"metadata": {"name": "a"}}), &opts).unwrap();
    /// cm["data"] = serde_json::json!({"k": "v"});
    /// let updated = engine.update(&rt, Some("default"), "a", cm, None, &opts).unwrap();
    /// assert_eq!(updated["data"]["k"], "v");
    /// ```
    pub fn update(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.update_created(rt, namespace, name, body, subresource, opts)
            .map(|(object, _)| object)
    }

    /// [`Engine::update`], also saying whether the update created the object: kube-apiserver
    /// creates on `PUT` the kinds whose registry allows it (RBAC kinds, `LimitRange`, `Endpoints`,
    /// `Event` and the others kube-apiserver lists).
    pub fn update_created(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<(Value, bool), ApiError> {
        let mut store = self.inner.write();
        let result = update_locked(&mut store, rt, namespace, name, body, subresource, opts);
        let rv = store.rv;
        drop(store);
        self.inner.wake(rv);
        result
    }
}

/// Built-in kinds that a `PUT` creates when they do not exist (the `AllowCreateOnUpdate` of
/// their kube-apiserver registry).
const CREATE_ON_UPDATE: &[&str] = &[
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "LimitRange",
    "Endpoints",
    "Event",
    "Lease",
    "RuntimeClass",
    "Service",
];

/// Built-in kinds whose `PUT` must carry a resourceVersion (their kube-apiserver registry's
/// `AllowUnconditionalUpdate` is false), as for every custom resource.
const NO_UNCONDITIONAL_UPDATE: &[&str] = &["Lease", "PodDisruptionBudget", "RuntimeClass"];

/// Validates a subresource name for a type.
pub(crate) fn check_subresource(
    info: &TypeInfo,
    subresource: Option<&str>,
) -> Result<(), ApiError> {
    match subresource {
        None => Ok(()),
        Some("status") if info.rt.status_subresource => Ok(()),
        Some(_) => Err(ApiError::path_not_found()),
    }
}

fn update_locked(
    store: &mut Store,
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    body: Value,
    subresource: Option<&str>,
    opts: &WriteOptions,
) -> Result<(Value, bool), ApiError> {
    let info = store.registry.lookup(rt)?;
    let ns = scope(&info, namespace)?;
    check_subresource(&info, subresource)?;
    let mut body = check_body(&info, &ns, body)?;
    match meta_str(&body, "name") {
        Some(n) if !n.is_empty() && n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {
            meta_mut(&mut body).insert("name".into(), Value::String(name.to_string()));
        }
    }
    let key: ObjKey = (ns, name.to_string());
    let Some(existing) = store.get(&info.res, &key) else {
        if subresource.is_none() && !rt.custom && CREATE_ON_UPDATE.contains(&rt.kind.as_str()) {
            let ns = key.0.clone();
            return create_locked(store, &info, &ns, body, opts, Operation::Update)
                .map(|created| (created, true));
        }
        return Err(ApiError::not_found(&rt.group, &rt.plural, name));
    };
    let (want_rv, have_rv) = (rv_of(&body), rv_of(&existing));
    if want_rv.is_empty() && (rt.custom || NO_UNCONDITIONAL_UPDATE.contains(&rt.kind.as_str())) {
        // Custom resources and a few built-ins take no unconditional update.
        let mut err = ApiError::invalid(
            &format!("{}.{}", rt.plural, rt.group),
            name,
            "metadata.resourceVersion: Invalid value: 0: must be specified for an update",
        );
        err.message = format!(
            "{}.{} \"{name}\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update",
            rt.plural, rt.group
        );
        err.details = Some(json!({
            "name": name,
            "group": rt.group,
            "kind": rt.plural,
            "causes": [{
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 0: must be specified for an update",
                "field": "metadata.resourceVersion",
            }],
        }));
        return Err(err);
    }
    if !want_rv.is_empty() && want_rv != have_rv {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    let (want_uid, have_uid) = (uid_of(&body), uid_of(&existing));
    if !want_uid.is_empty() && want_uid != have_uid {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {have_uid}"
            ),
        ));
    }
    finish_update(
        store,
        &info,
        &existing,
        body,
        subresource,
        opts,
        Operation::Update,
    )
    .map(|updated| (updated, false))
}

/// Creates under the lock: validation, server fields, hooks, storage.
pub(crate) fn create_locked(
    store: &mut Store,
    info: &TypeInfo,
    ns: &str,
    body: Value,
    opts: &WriteOptions,
    operation: Operation,
) -> Result<Value, ApiError> {
    let rt = &info.rt;
    if info.special == Special::Answered {
        return super::answered::answer(store, info, ns, body, opts);
    }
    let mut obj = check_body(info, ns, body)?;
    let sent_managed = obj.pointer("/metadata/managedFields").cloned();
    if !ns.is_empty() {
        let ns_obj = store.peek("namespaces", &(String::new(), ns.to_string()));
        match ns_obj {
            None => return Err(ApiError::not_found("", "namespaces", ns)),
            Some(o) if is_deleting(o) => {
                return Err(ApiError::forbidden(format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    qualified(rt),
                    name_of(&obj)
                )));
            }
            Some(_) => {}
        }
    }
    let mut name = name_of(&obj).to_string();
    let sent_name = name.clone();
    if name.is_empty() {
        let Some(prefix) = meta_str(&obj, "generateName").map(str::to_string) else {
            return Err(ApiError::invalid(
                &rt.kind,
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        };
        loop {
            name = format!("{prefix}{}", random_suffix());
            if store
                .peek(&info.res, &(ns.to_string(), name.clone()))
                .is_none()
            {
                break;
            }
        }
    }
    if let Some(problem) = name_problem(&name, NameRule::of(&rt.kind, rt.custom)) {
        // kube-apiserver lists every invalid field of a new object at once, the name first.
        let mut probe = obj.clone();
        meta_mut(&mut probe).insert("name".into(), Value::String(name.clone()));
        let mut causes = vec![problem];
        if !rt.custom && super::defaults::apply(info, &mut probe).is_ok() {
            causes.extend(super::validate::problems(info, &probe));
        }
        return Err(ApiError::invalid_all(&rt.kind, &name, causes).in_group(&rt.group));
    }
    let key: ObjKey = (ns.to_string(), name.clone());
    let meta = meta_mut(&mut obj);
    meta.insert("name".into(), Value::String(name.clone()));
    for field in [
        "uid",
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        meta.remove(field);
    }
    meta.insert("uid".into(), Value::String(new_uid()));
    meta.insert("creationTimestamp".into(), Value::String(now()));
    if info.generation != super::registry::Generation::None {
        meta.insert("generation".into(), json!(1));
    }
    // A Node is registered with its status; every other kind starts without one.
    if rt.status_subresource
        && (rt.custom || rt.kind != "Node")
        && let Some(map) = obj.as_object_mut()
    {
        map.remove("status");
    }
    special::defaults(info, &mut obj, opts)?;
    if let Some(warning) = name_warning(rt, &name) {
        opts.warnings.push(warning);
    }
    // Admission comes next (after validation, before the name is taken: a 409 create has
    // passed it, and counted against quotas): `LimitRanger`'s defaults and checks on a Pod,
    // then `ResourceQuota`.
    let limit_ranges = if info.special == Special::Pod {
        super::admission::limit_ranges(store, ns)
    } else {
        Vec::new()
    };
    let mut admitted = obj.clone();
    if info.special == Special::Pod {
        super::admission::limit_ranger_defaults(&limit_ranges, &mut admitted);
        super::admission::limit_ranger_check(&limit_ranges, &admitted, &sent_name)?;
    }
    super::admission::resource_quota(store, info, ns, &sent_name, &admitted, None, opts.dry_run)?;
    // Validation comes first: an invalid object is 422 even when its name is taken.
    if let Some(existing) = store.peek(&info.res, &key) {
        let mut err = ApiError::already_exists(&rt.group, &rt.plural, &name);
        if is_deleting(existing) {
            // kube-apiserver says why the name is still taken.
            err.message = format!("object is being deleted: {}", err.message);
        }
        return Err(err);
    }
    if operation == Operation::Update {
        // Tracked against the type's empty object, as kube-apiserver does for a create.
        let empty = super::managed::empty_object(rt);
        record_update(
            store,
            info,
            &empty,
            &mut obj,
            sent_managed.as_ref(),
            None,
            opts,
        );
    }
    // The defaults of mutating admission are owned by no one: kube-apiserver tracks ownership
    // before admission runs.
    if info.special == Special::Pod {
        super::admission::limit_ranger_defaults(&limit_ranges, &mut obj);
    }
    special::normalize(info, &mut obj, None, None);
    super::defaults::on_create(store, info, &mut obj);
    if info.special == Special::Crd {
        crd::on_create(&mut obj, &info.schema)?;
    }
    if opts.dry_run {
        return Ok(present(&obj, rt));
    }
    let stored = store.put(&info.res, obj);
    super::apiservice::after_change(store, &info.res, ns);
    if !rt.custom && super::update::STORED_AGAIN.contains(&rt.kind.as_str()) {
        let key = (info.res.clone(), super::state::key_of(&stored));
        store.untouched.insert(key);
    }
    if info.special == Special::Crd {
        crd::serve(store, &stored);
    }
    Ok(present(&stored, rt))
}

/// The warning the `WarningsOnCreate` of a kind's registry gives a name that is not a DNS
/// label, for the kinds whose name becomes a Pod's hostname or name prefix.
fn name_warning(rt: &ResourceType, name: &str) -> Option<String> {
    let what = match rt.kind.as_str() {
        _ if rt.custom => return None,
        "Pod" => "the Pod's hostname",
        "Deployment" | "ReplicaSet" | "ReplicationController" | "Job" | "CronJob" => {
            "Pod names and hostnames"
        }
        _ => return None,
    };
    let problems = super::meta::label_problems(name)?;
    Some(format!(
        "metadata.name: this is used in {what}, which can result in surprising behavior; a DNS label is recommended: {problems}"
    ))
}

fn qualified(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        rt.plural.clone()
    } else {
        format!("{}.{}", rt.plural, rt.group)
    }
}
