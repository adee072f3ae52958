//! The subresources besides `status`: `scale`, `serviceaccounts/token`, `pods/eviction`,
//! `pods/binding` (and the `bindings` resource), `pods/ephemeralcontainers` and
//! `certificatesigningrequests/approval`.
//!
//! Each one reads or writes a part of its parent object through the same update pipeline as
//! any other write, so versions, watches and field ownership behave as for the parent.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::managed::Operation;
use super::meta::{meta_str, name_of, new_uid, now, rv_of, uid_of};
use super::patch::apply_patch;
use super::registry::{TypeInfo, present, scope};
use super::state::{ObjKey, Store};
use super::update::finish_update;
use super::{ApiError, Engine, PatchType, ResourceType, WriteOptions, gc};

/// How a subresource write carries the new state.
#[derive(Clone, Copy, Debug)]
pub enum SubresourceWrite<'a> {
    /// `PUT`: the whole subresource object.
    Replace(&'a Value),
    /// `PATCH`: a patch of the subresource object.
    Patch(PatchType, &'a [u8]),
}

/// Seconds a requested service account token lives when the request names no duration.
const DEFAULT_TOKEN_SECONDS: i64 = 3600;
/// The shortest token lifetime kube-apiserver issues.
const MIN_TOKEN_SECONDS: i64 = 600;
/// The issuer and default audience of the tokens.
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

impl Engine {
    /// Reads a subresource: a `scale` as an `autoscaling/v1` `Scale`, anything else as the
    /// parent object.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("apps", "v1", "deployments").unwrap();
    /// let d = serde_json::json!({"metadata": {"name": "d"}, "spec": {"replicas": 2,
    ///     "selector": {"matchLabels": {"app": "d"}},
    ///     "template": {"metadata": {"labels": {"app": "d"}},
    ///                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    /// engine.create(&rt, Some("default"), d, &WriteOptions::default()).unwrap();
    /// let scale = engine.get_subresource(&rt, Some("default"), "d", "scale").unwrap();
    /// assert_eq!((scale["spec"]["replicas"].as_i64(), scale["status"]["selector"].as_str()), (Some(2), Some("app=d")));
    /// ```
    pub fn get_subresource(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        subresource: &str,
    ) -> Result<Value, ApiError> {
        let store = self.inner.read();
        let (info, existing) = parent(&store, rt, namespace, name, subresource)?;
        match subresource {
            "scale" => {
                let paths = scale_paths(&store, &info)?;
                if rt.custom && existing.pointer(&paths.spec_replicas).is_none() {
                    // kube-apiserver reads a custom resource's scale only where the count is.
                    let path = paths.spec_replicas.replace('/', ".");
                    let why = format!("the spec replicas field {path:?} does not exist");
                    let mut err = ApiError::internal(format!("Internal error occurred: {why}"));
                    err.details = Some(json!({"causes": [{"message": why}]}));
                    return Err(err);
                }
                scale_of(&store, &info, &existing)
            }
            _ => Ok(present(&existing, rt)),
        }
    }

    /// Writes `scale`, `ephemeralcontainers`, `resize`, `approval` or a namespace's `finalize`
    /// (the `status` subresource goes
    /// through [`Engine::update`] and [`Engine::patch`]). Returns what the subresource reads
    /// back.
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("apps", "v1", "statefulsets").unwrap();
    /// let s = serde_json::json!({"metadata": {"name": "s"}, "spec": {"replicas": 1,
    ///     "selector": {"matchLabels": {"app": "s"}},
    ///     "template": {"metadata": {"labels": {"app": "s"}},
    ///                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    /// engine.create(&rt, Some("default"), s, &WriteOptions::default()).unwrap();
    /// let patch = SubresourceWrite::Patch(PatchType::Merge, br#"{"spec":{"replicas":3}}"#);
    /// engine.write_subresource(&rt, Some("default"), "s", "scale", patch, &WriteOptions::default()).unwrap();
    /// assert_eq!(engine.get(&rt, Some("default"), "s").unwrap()["spec"]["replicas"], 3);
    /// ```
    pub fn write_subresource(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        subresource: &str,
        write: SubresourceWrite<'_>,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut store = self.inner.write();
        let result = write_locked(&mut store, rt, namespace, name, subresource, write, opts);
        let rv = store.rv;
        drop(store);
        self.inner.wake(rv);
        result
    }

    /// Posts to `token`, `eviction` or `binding`; returns the answer (a `TokenRequest` with
    /// its token, or a `Success` `Status`).
    ///
    /// ```
    /// # use mcr_envtest::engine::*;
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "serviceaccounts").unwrap();
    /// let sa = serde_json::json!({"metadata": {"name": "robot"}});
    /// engine.create(&rt, Some("default"), sa, &WriteOptions::default()).unwrap();
    /// let request = serde_json::json!({"spec": {"audiences": ["api"]}});
    /// let answer = engine.post_subresource(&rt, Some("default"), "robot", "token", request, &WriteOptions::default()).unwrap();
    /// assert_eq!(answer["status"]["token"].as_str().unwrap().split('.').count(), 3);
    /// ```
    pub fn post_subresource(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        subresource: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut store = self.inner.write();
        let result = post_locked(&mut store, rt, namespace, name, subresource, body, opts);
        let rv = store.rv;
        drop(store);
        self.inner.wake(rv);
        result
    }
}

/// The type and stored parent of a subresource request, or the 404 kube-apiserver gives.
fn parent(
    store: &Store,
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    subresource: &str,
) -> Result<(Arc<TypeInfo>, Arc<Value>), ApiError> {
    let info = store.registry.lookup(rt)?;
    if !info.rt.subresources.contains(&subresource) {
        return Err(ApiError::path_not_found());
    }
    let key: ObjKey = (scope(&info, namespace)?, name.to_string());
    match store.get(&info.res, &key) {
        Some(obj) => Ok((info, obj)),
        None => Err(ApiError::not_found(&rt.group, &rt.plural, name)),
    }
}

/// Where a type keeps its replica counts and selector.
pub(crate) struct ScalePaths {
    /// JSON pointer of the desired count.
    pub(crate) spec_replicas: String,
    status_replicas: String,
    selector: Option<String>,
    /// The selector is a `LabelSelector` (built-ins) rather than a serialized string (CRDs).
    structured_selector: bool,
}

/// The scale paths of a type (404 for a custom resource whose version serves no scale).
pub(crate) fn scale_paths(store: &Store, info: &TypeInfo) -> Result<ScalePaths, ApiError> {
    let rt = &info.rt;
    if !rt.custom {
        return Ok(ScalePaths {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: Some("/spec/selector".into()),
            structured_selector: true,
        });
    }
    let crd_name = format!("{}.{}", rt.plural, rt.group);
    let scale = store
        .get(
            "customresourcedefinitions.apiextensions.k8s.io",
            &(String::new(), crd_name),
        )
        .and_then(|crd| {
            crd["spec"]["versions"]
                .as_array()?
                .iter()
                .find(|v| v["name"] == json!(rt.version))
                .map(|v| v["subresources"]["scale"].clone())
        })
        .filter(Value::is_object)
        .ok_or_else(ApiError::path_not_found)?;
    let pointer = |field: &str| scale[field].as_str().map(json_path_to_pointer);
    Ok(ScalePaths {
        spec_replicas: pointer("specReplicasPath").unwrap_or_else(|| "/spec/replicas".into()),
        status_replicas: pointer("statusReplicasPath").unwrap_or_else(|| "/status/replicas".into()),
        selector: pointer("labelSelectorPath"),
        structured_selector: false,
    })
}

/// `.spec.replicas` to `/spec/replicas`.
fn json_path_to_pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut out, part| {
            out.push('/');
            out.push_str(&part.replace('~', "~0").replace('/', "~1"));
            out
        })
}

/// The `autoscaling/v1` `Scale` of an object.
fn scale_of(store: &Store, info: &TypeInfo, obj: &Value) -> Result<Value, ApiError> {
    let paths = scale_paths(store, info)?;
    let spec_replicas = obj.pointer(&paths.spec_replicas).and_then(Value::as_i64);
    // The built-ins' replicas default to 1 on kube-apiserver; the emulator stores what was
    // sent, so an absent count reads as that default.
    let spec_replicas = spec_replicas.unwrap_or(if info.rt.custom { 0 } else { 1 });
    let status_replicas = obj
        .pointer(&paths.status_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = paths.selector.as_deref().and_then(|p| obj.pointer(p));
    let selector = match selector {
        Some(Value::String(s)) => s.clone(),
        Some(sel) if paths.structured_selector => selector_string(sel),
        _ => String::new(),
    };
    let mut meta = Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj["metadata"].get(field) {
            meta.insert(field.into(), v.clone());
        }
    }
    let mut spec = Map::new();
    if spec_replicas != 0 {
        spec.insert("replicas".into(), json!(spec_replicas));
    }
    let mut status = json!({"replicas": status_replicas});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }))
}

/// A label selector as a query string: a `LabelSelector` (`matchLabels` and
/// `matchExpressions`) or a ReplicationController's plain map.
fn selector_string(sel: &Value) -> String {
    let mut parts: Vec<(String, String)> = Vec::new();
    let labels = sel
        .get("matchLabels")
        .or_else(|| (sel.get("matchExpressions").is_none()).then_some(sel));
    if let Some(labels) = labels.and_then(Value::as_object) {
        for (k, v) in labels {
            parts.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    for expr in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = expr["key"].as_str().unwrap_or_default();
        let mut values: Vec<&str> = expr["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match expr["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        };
        parts.push((key.to_string(), text));
    }
    parts.sort();
    parts
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

fn write_locked(
    store: &mut Store,
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    subresource: &str,
    write: SubresourceWrite<'_>,
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let (info, existing) = parent(store, rt, namespace, name, subresource)?;
    // What the subresource looks like now, and as the request wants it.
    let current = match subresource {
        "scale" => scale_of(store, &info, &existing)?,
        _ => (*existing).clone(),
    };
    let schema = match subresource {
        "scale" => super::schema::builtin("autoscaling", "v1", "Scale"),
        _ => info.schema.clone(),
    };
    let desired = match write {
        SubresourceWrite::Replace(body) => body.clone(),
        SubresourceWrite::Patch(PatchType::Apply, body) => {
            // An apply to a subresource sets the fields it names.
            let parsed = super::apply::parse_applied(body)?;
            apply_patch(
                &current,
                PatchType::Merge,
                &serde_json::to_vec(&parsed).unwrap_or_default(),
                &schema,
            )?
        }
        SubresourceWrite::Patch(patch_type, body) => {
            apply_patch(&current, patch_type, body, &schema)?
        }
    };
    if let Some(n) = meta_str(&desired, "name").filter(|n| !n.is_empty() && *n != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let want_rv = rv_of(&desired);
    if !want_rv.is_empty() && want_rv != rv_of(&existing) {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    let mut candidate = (*existing).clone();
    let sub_for_update = match subresource {
        "scale" => {
            let replicas = desired["spec"]["replicas"].as_i64().unwrap_or(0);
            if replicas < 0 || replicas > i64::from(i32::MAX) {
                return Err(ApiError::invalid(
                    "Scale",
                    name,
                    format!(
                        "spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
                    ),
                ));
            }
            let paths = scale_paths(store, &info)?;
            set_pointer(&mut candidate, &paths.spec_replicas, json!(replicas));
            Some("scale")
        }
        "ephemeralcontainers" => {
            let old = existing["spec"]["ephemeralContainers"].as_array();
            let new = desired["spec"]["ephemeralContainers"].as_array();
            for container in old.into_iter().flatten() {
                let kept = new
                    .into_iter()
                    .flatten()
                    .find(|c| c["name"] == container["name"]);
                if kept != Some(container) {
                    return Err(ApiError::invalid(
                        "Pod",
                        name,
                        format!(
                            "spec.ephemeralContainers: Forbidden: existing ephemeral containers {} may not be changed",
                            container["name"]
                        ),
                    ));
                }
            }
            candidate["spec"]["ephemeralContainers"] =
                desired["spec"]["ephemeralContainers"].clone();
            Some("ephemeralcontainers")
        }
        "resize" => {
            // Only the containers' resources (and resize policies) change.
            let wanted = desired["spec"]["containers"].as_array();
            let Some(stored) = candidate["spec"]["containers"].as_array_mut() else {
                return Err(ApiError::invalid(
                    "Pod",
                    name,
                    "spec.containers: Required value",
                ));
            };
            if wanted.map_or(0, Vec::len) != stored.len() {
                return Err(ApiError::invalid(
                    "Pod",
                    name,
                    "spec: Forbidden: only cpu and memory resources of existing containers may be changed",
                ));
            }
            for c in stored.iter_mut() {
                let Some(w) = wanted
                    .into_iter()
                    .flatten()
                    .find(|w| w["name"] == c["name"])
                else {
                    return Err(ApiError::invalid(
                        "Pod",
                        name,
                        format!(
                            "spec.containers: Forbidden: container {} may not be added or removed by a resize",
                            c["name"]
                        ),
                    ));
                };
                for field in ["resources", "resizePolicy"] {
                    match w.get(field) {
                        Some(v) => c[field] = v.clone(),
                        None => {
                            if let Some(m) = c.as_object_mut() {
                                m.remove(field);
                            }
                        }
                    }
                }
            }
            let qos = super::defaults::qos_class(&candidate["spec"]);
            if existing["status"]["qosClass"]
                .as_str()
                .is_some_and(|before| before != qos)
            {
                return Err(ApiError::invalid(
                    "Pod",
                    name,
                    "spec: Forbidden: Pod QoS is immutable",
                ));
            }
            Some("resize")
        }
        "finalize" => {
            // Only the namespace's `spec.finalizers` change.
            if !candidate["spec"].is_object() {
                candidate["spec"] = json!({});
            }
            candidate["spec"]["finalizers"] = desired["spec"]["finalizers"].clone();
            Some("finalize")
        }
        "approval" => {
            let conditions = desired["status"]["conditions"].clone();
            let types = |c: &Value| -> Vec<String> {
                c.as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["type"].as_str().map(str::to_string))
                    .collect()
            };
            let (before, after) = (types(&existing["status"]["conditions"]), types(&conditions));
            if let Some(gone) = before.iter().find(|t| {
                ["Approved", "Denied", "Failed"].contains(&t.as_str()) && !after.contains(t)
            }) {
                return Err(ApiError::invalid(
                    "CertificateSigningRequest",
                    name,
                    format!("status.conditions: Forbidden: updates may not remove a condition of type {gone:?}"),
                )
                .in_group("certificates.k8s.io"));
            }
            // The approval writes the metadata and the conditions; spec and the rest of the
            // status stay.
            if let Some(meta) = desired.get("metadata").filter(|m| m.is_object()) {
                candidate["metadata"] = meta.clone();
            }
            if !candidate["status"].is_object() {
                candidate["status"] = json!({});
            }
            candidate["status"]["conditions"] = stamp_conditions(conditions);
            Some("approval")
        }
        _ => return Err(ApiError::path_not_found()),
    };
    let updated = finish_update(
        store,
        &info,
        &existing,
        candidate,
        sub_for_update,
        opts,
        Operation::Update,
    )?;
    match subresource {
        "scale" => scale_of(store, &info, &updated),
        _ => Ok(updated),
    }
}

/// Fills `lastUpdateTime` of conditions that have none, as kube-apiserver does on approval.
fn stamp_conditions(mut conditions: Value) -> Value {
    for c in conditions.as_array_mut().into_iter().flatten() {
        if let Some(map) = c.as_object_mut() {
            let now = now();
            map.entry("lastUpdateTime").or_insert_with(|| json!(now));
            map.entry("lastTransitionTime")
                .or_insert_with(|| json!(now));
        }
    }
    conditions
}

/// Sets the value at a JSON pointer, creating objects on the way.
fn set_pointer(target: &mut Value, pointer: &str, value: Value) {
    let mut at = target;
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    for (i, part) in parts.iter().enumerate() {
        let key = part.replace("~1", "/").replace("~0", "~");
        if !at.is_object() {
            *at = json!({});
        }
        let Some(map) = at.as_object_mut() else {
            return;
        };
        if i + 1 == parts.len() {
            map.insert(key, value);
            return;
        }
        at = map.entry(key).or_insert_with(|| json!({}));
    }
}

fn post_locked(
    store: &mut Store,
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    subresource: &str,
    body: Value,
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let (info, existing) = parent(store, rt, namespace, name, subresource)?;
    if let Some(n) = meta_str(&body, "name").filter(|n| !n.is_empty() && *n != name) {
        return Err(ApiError::bad_request(format!(
            "name in URL does not match name in {} object ({n} != {name})",
            subresource
        )));
    }
    match subresource {
        "token" => {
            // kube-apiserver tracks the TokenRequest it creates like any create: the request's
            // manager owns the spec it sent, after defaulting (`expirationSeconds`), not the
            // audiences and bound object the server fills in later. An empty list sent is a
            // field sent (`audiences: []` is owned; the fidelity check found it).
            let mut spec = json!({"spec": {}});
            for field in ["audiences", "boundObjectRef"] {
                if let Some(v) = body["spec"].get(field).filter(|v| !v.is_null()) {
                    spec["spec"][field] = v.clone();
                }
            }
            let mut answer = token_request(&existing, body)?;
            spec["spec"]["expirationSeconds"] = answer["spec"]["expirationSeconds"].clone();
            let schema = super::schema::builtin("authentication.k8s.io", "v1", "TokenRequest");
            let entry = super::managed::created_entry(
                &super::managed::empty_of(&schema),
                &spec,
                &schema,
                opts.field_manager.as_deref(),
                "authentication.k8s.io/v1",
                "token",
            );
            answer["metadata"]["managedFields"] = json!([entry]);
            Ok(answer)
        }
        "eviction" => {
            if opts.dry_run {
                return Ok(success(201));
            }
            let delete_opts = &body["deleteOptions"];
            if let Some(uid) = delete_opts["preconditions"]["uid"]
                .as_str()
                .filter(|u| *u != uid_of(&existing))
            {
                return Err(ApiError::conflict(
                    &rt.group,
                    &rt.plural,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        uid_of(&existing)
                    ),
                ));
            }
            if let Some(pdb) = blocking_budget(store, &existing)? {
                let mut err = ApiError::new(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                );
                err.details = Some(json!({"causes": [{
                    "reason": "DisruptionBudget",
                    "message": format!("The disruption budget {pdb} does not allow this eviction now"),
                }]}));
                return Err(err);
            }
            let key = super::state::key_of(&existing);
            let terminal = matches!(
                existing["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            );
            if !terminal {
                // kube-apiserver first marks the Pod with a `DisruptionTarget` condition
                // through its status (no field manager records it), then deletes it.
                let mut marked = (*existing).clone();
                let condition = json!({
                    "type": "DisruptionTarget",
                    "status": "True",
                    "lastProbeTime": null,
                    "lastTransitionTime": now(),
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                });
                if !marked["status"].is_object() {
                    marked["status"] = json!({});
                }
                let conditions = marked["status"]
                    .as_object_mut()
                    .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
                if let Some(Value::Array(list)) = conditions {
                    match list.iter_mut().find(|c| c["type"] == "DisruptionTarget") {
                        Some(c) if c["status"] == "True" => {
                            c["reason"] = condition["reason"].clone();
                            c["message"] = condition["message"].clone();
                        }
                        Some(c) => *c = condition,
                        None => list.push(condition),
                    }
                }
                if marked != *existing {
                    store.put(&info.res, marked);
                }
            }
            let policy = delete_opts["propagationPolicy"].as_str();
            gc::delete_object(store, &info.res, &key, policy);
            Ok(success(201))
        }
        "binding" => bind(store, &info, &existing, &body, opts).map(|_| success(201)),
        _ => Err(ApiError::path_not_found()),
    }
}

/// The name of the PodDisruptionBudget that forbids evicting `pod` now, if one does; on
/// `Ok(None)` the budget that allowed it (if any) has been charged one disruption.
///
/// Pods that are not running (`Pending`, `Succeeded`, `Failed`) are evicted whatever the
/// budgets say, as kube-apiserver does; a running Pod needs its one budget to have been
/// processed at its current generation (`status.observedGeneration`, set by the disruption
/// controller, which the emulator does not run) with `status.disruptionsAllowed` above 0.
fn blocking_budget(store: &mut Store, pod: &Value) -> Result<Option<String>, ApiError> {
    if matches!(
        pod["status"]["phase"].as_str(),
        None | Some("Pending" | "Succeeded" | "Failed")
    ) {
        return Ok(None);
    }
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let res = "poddisruptionbudgets.policy";
    let mut matching: Vec<Arc<Value>> = Vec::new();
    for pdb in store
        .objects
        .get(res)
        .into_iter()
        .flat_map(|all| all.range((ns.to_string(), String::new())..))
        .take_while(|((n, _), _)| n == ns)
        .map(|(_, v)| v)
    {
        let selector = &pdb["spec"]["selector"];
        if selector.is_null() {
            continue;
        }
        let text = selector_string(selector);
        let labels = super::selector::Labels {
            group: "",
            kind: "Pod",
            custom: None,
        };
        let parsed = super::selector::Selectors::parse(Some(&text), None, &labels)?;
        if parsed.matches(pod) {
            matching.push(pdb.clone());
        }
    }
    let Some(pdb) = matching.first().cloned() else {
        return Ok(None);
    };
    if matching.len() > 1 {
        return Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    let name = name_of(&pdb).to_string();
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
    let observed = pdb["status"]["observedGeneration"].as_i64().unwrap_or(0);
    let allowed = pdb["status"]["disruptionsAllowed"].as_i64().unwrap_or(0);
    if observed < generation || allowed <= 0 {
        return Ok(Some(name));
    }
    let mut charged = (*pdb).clone();
    charged["status"]["disruptionsAllowed"] = json!(allowed - 1);
    let pod_name = name_of(pod).to_string();
    if !charged["status"]["disruptedPods"].is_object() {
        charged["status"]["disruptedPods"] = json!({});
    }
    charged["status"]["disruptedPods"][pod_name] = json!(now());
    store.put(&Arc::from(res), charged);
    Ok(None)
}

/// Assigns a Pod to the node a `Binding` names (`pods/binding` and the `bindings` resource).
pub(crate) fn bind(
    store: &mut Store,
    info: &TypeInfo,
    pod: &Arc<Value>,
    binding: &Value,
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let name = name_of(pod).to_string();
    let node = binding["target"]["name"].as_str().unwrap_or_default();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            &name,
            "target.name: Required value: a node name is required",
        ));
    }
    if super::meta::is_deleting(pod) {
        return Err(ApiError::conflict(
            "",
            "pods/binding",
            &name,
            &format!("pod {name} is being deleted, cannot be assigned to a host"),
        ));
    }
    if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        // kube-apiserver names the subresource in this conflict.
        return Err(ApiError::conflict(
            "",
            "pods/binding",
            &name,
            &format!("pod {name} is already assigned to node \"{assigned}\""),
        ));
    }
    if opts.dry_run {
        return Ok(present(pod, &info.rt));
    }
    let mut candidate = (**pod).clone();
    candidate["spec"]["nodeName"] = json!(node);
    let mut status = candidate["status"].clone();
    if !status.is_object() {
        status = json!({});
    }
    let mut conditions: Vec<Value> = status["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["type"] != "PodScheduled")
        .collect();
    conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now()}));
    status["conditions"] = Value::Array(conditions);
    candidate["status"] = status;
    super::update::finish_update(
        store,
        info,
        pod,
        candidate,
        Some("binding"),
        opts,
        Operation::Update,
    )
}

/// The tokens this process's TokenRequests issued, by signature, with their expiry (unix
/// seconds): the emulator's HTTPS servers authenticate them ([`issued_token_is_valid`]), as
/// kube-apiserver authenticates the service-account tokens it signed. Process-wide: a token
/// issued by one emulated cluster is accepted by the others of the process too.
static ISSUED_TOKENS: std::sync::LazyLock<
    parking_lot::Mutex<std::collections::HashMap<String, i64>>,
> = std::sync::LazyLock::new(Default::default);

/// Whether `token` (a bearer token as sent) was issued by a TokenRequest of this process and
/// has not expired.
pub(crate) fn issued_token_is_valid(token: &[u8]) -> bool {
    let Ok(token) = std::str::from_utf8(token) else {
        return false;
    };
    let Some((_, signature)) = token.rsplit_once('.') else {
        return false;
    };
    let now = jiff::Timestamp::now().as_second();
    ISSUED_TOKENS
        .lock()
        .get(signature)
        .is_some_and(|expires| *expires > now)
}

/// What a `TokenReview` of `token` for `audiences` (the API server's own when empty) answers:
/// a token this process issued, unexpired, for one of the audiences, authenticates its
/// service account; any other is an invalid bearer token.
pub(crate) fn review_token(token: &str, audiences: &[String]) -> Value {
    let invalid = |why: String| json!({"user": {}, "error": why});
    if !issued_token_is_valid(token.as_bytes()) {
        return invalid("invalid bearer token".into());
    }
    let claims: Value = token
        .split('.')
        .nth(1)
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .ok()
        })
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    let token_audiences: Vec<String> = claims["aud"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let wanted: Vec<String> = if audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        audiences.to_vec()
    };
    let matched: Vec<&String> = wanted
        .iter()
        .filter(|a| token_audiences.contains(a))
        .collect();
    if matched.is_empty() {
        // As Go prints a []string with %q.
        let quoted = |l: &[String]| {
            let items: Vec<String> = l.iter().map(|a| format!("{a:?}")).collect();
            format!("[{}]", items.join(" "))
        };
        return invalid(format!(
            "[invalid bearer token, token audiences {} is invalid for the target audiences {}]",
            quoted(&token_audiences),
            quoted(&wanted)
        ));
    }
    let namespace = claims["kubernetes.io"]["namespace"]
        .as_str()
        .unwrap_or_default();
    json!({
        "authenticated": true,
        "user": {
            "username": claims["sub"],
            "uid": claims["kubernetes.io"]["serviceaccount"]["uid"],
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{namespace}"),
                "system:authenticated"],
            "extra": {"authentication.kubernetes.io/credential-id": [format!("JTI={}", claims["jti"].as_str().unwrap_or_default())]},
        },
        "audiences": matched,
    })
}

/// Records a token's signature until its expiry, forgetting the expired ones.
fn remember_issued(signature: &str, expires: i64) {
    let now = jiff::Timestamp::now().as_second();
    let mut issued = ISSUED_TOKENS.lock();
    issued.retain(|_, e| *e > now);
    issued.insert(signature.to_owned(), expires);
}

/// A `TokenRequest` answered with a JWT-shaped token, not signed by any key a real server
/// would trust; the emulator's HTTPS servers accept it until it expires.
fn token_request(sa: &Value, mut request: Value) -> Result<Value, ApiError> {
    let name = name_of(sa);
    let seconds = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_TOKEN_SECONDS);
    if seconds < MIN_TOKEN_SECONDS {
        return Err(ApiError::invalid(
            "TokenRequest",
            name,
            format!(
                "spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
            ),
        ));
    }
    let audiences = match request["spec"]["audiences"].as_array() {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!([ISSUER]),
    };
    let issued = jiff::Timestamp::now();
    let expires = issued
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .map_err(|e| ApiError::internal(format!("token expiry out of range: {e}")))?;
    let namespace = sa["metadata"]["namespace"].as_str().unwrap_or_default();
    let claims = json!({
        "aud": audiences,
        "exp": expires.as_second(),
        "iat": issued.as_second(),
        "nbf": issued.as_second(),
        "iss": ISSUER,
        "jti": new_uid(),
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "kubernetes.io": {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": uid_of(sa)},
        },
    });
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let header = b64(br#"{"alg":"RS256","kid":"mcr-envtest"}"#);
    let payload = b64(claims.to_string().as_bytes());
    let signature = b64(uuid::Uuid::new_v4().as_bytes());
    remember_issued(&signature, expires.as_second());
    let Some(map) = request.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    map.insert("apiVersion".into(), json!("authentication.k8s.io/v1"));
    map.insert("kind".into(), json!("TokenRequest"));
    // Named after the service account, with its uid, created now.
    map.insert(
        "metadata".into(),
        json!({"name": name, "namespace": namespace, "uid": uid_of(sa),
            "creationTimestamp": super::meta::now()}),
    );
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    spec["audiences"] = audiences;
    spec["expirationSeconds"] = json!(seconds);
    spec.as_object_mut()
        .map(|s| s.entry("boundObjectRef").or_insert(Value::Null));
    map.insert(
        "status".into(),
        json!({
            "token": format!("{header}.{payload}.{signature}"),
            "expirationTimestamp": format!("{expires:.0}"),
        }),
    );
    Ok(request)
}

/// The `Status` kube-apiserver answers an eviction or binding with.
fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_like_kubernetes() {
        let sel = json!({"matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]},
                                 {"key": "d", "operator": "DoesNotExist"}]});
        assert_eq!(selector_string(&sel), "a=1,b=2,c in (x,y),!d");
        assert_eq!(selector_string(&json!({"app": "rc"})), "app=rc");
        assert_eq!(json_path_to_pointer(".spec.replicas"), "/spec/replicas");
    }
}
