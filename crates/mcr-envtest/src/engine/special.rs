//! Per-type write rules of the built-ins (Secret, Namespace); CRDs live in [`super::crd`].

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::meta::{meta_mut, name_of};
use super::registry::{Special, TypeInfo};
use super::schema::roundtrip::{Mode, roundtrip};
use super::{ApiError, FieldValidation, WriteOptions};

/// Label the real server puts on every namespace.
pub(crate) const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What kube-apiserver does while decoding a request, before it tracks field ownership (so
/// the writer owns the result): a built-in is decoded into its Go type and written back
/// ([`roundtrip`]: unknown fields dropped as `fieldValidation` says, values canonical, Go's
/// zero-value rules) around its defaulting; Secret `stringData` folded and `type` defaulted,
/// a Namespace's name label set.
pub(crate) fn defaults(
    info: &TypeInfo,
    obj: &mut Value,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    omit_empty(info, obj);
    if info.rt.custom {
        let unknown = super::schema::structural::prune(obj, &info.schema);
        unknown_fields(info, &unknown, opts)?;
        super::schema::structural::default(obj, &info.schema);
    } else {
        decode(info, obj, Mode::Decode, opts)?;
        built_in_nulls(obj);
    }
    super::defaults::apply(info, obj)?;
    if !info.rt.custom {
        decode(info, obj, Mode::Encode, &WriteOptions::default())?;
    }
    super::validate::check(info, obj)?;
    match info.special {
        Special::Secret => normalize_secret(obj),
        Special::Namespace => {
            name_label(obj);
            Ok(())
        }
        _ if !info.rt.custom => {
            condition_times(&info.rt.kind, obj);
            if info.rt.kind == "DaemonSet" {
                // Decoded into the internal `templateGeneration` and encoded back: `0` when
                // the request leaves it out, so the writer owns the change.
                if let Some(entry) = template_generation(obj) {
                    entry.or_insert(json!("0"));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Decodes a built-in object into its Go type and writes it back (see [`roundtrip`]); unknown
/// fields are warnings, or a 400 with `fieldValidation=Strict`.
fn decode(
    info: &TypeInfo,
    obj: &mut Value,
    mode: Mode,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    let (decoded, dropped) =
        roundtrip(obj, &info.schema, mode).map_err(|why| undecodable(info, &why))?;
    unknown_fields(info, &dropped.unknown, opts)?;
    *obj = decoded;
    Ok(())
}

/// The warnings kube-apiserver's registry of a built-in kind gives a write of `obj` (its
/// `WarningsOnCreate` and `WarningsOnUpdate`): a PersistentVolume's deprecated `Recycle`
/// reclaim policy.
pub(crate) fn kind_warnings(info: &TypeInfo, obj: &Value) -> Vec<String> {
    let mut warnings = Vec::new();
    if !info.rt.custom
        && info.rt.kind == "PersistentVolume"
        && obj["spec"]["persistentVolumeReclaimPolicy"] == "Recycle"
    {
        warnings.push(
            "spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. \
             Instead, the recommended approach is to use dynamic provisioning."
                .to_string(),
        );
    }
    warnings
}

/// The 400 of a body kube-apiserver cannot decode into its type.
fn undecodable(info: &TypeInfo, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
        kind = info.rt.kind,
        version = info.rt.version,
    ))
}

/// What a write does with the unknown fields it dropped: warnings, or a 400 with
/// `fieldValidation=Strict`.
fn unknown_fields(
    info: &TypeInfo,
    unknown: &[String],
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    let named = unknown.iter().map(|f| format!("unknown field {f:?}"));
    match opts.field_validation {
        FieldValidation::Strict if !unknown.is_empty() => {
            let list: Vec<String> = named.collect();
            Err(undecodable(
                info,
                &format!("strict decoding error: {}", list.join(", ")),
            ))
        }
        FieldValidation::Warn => {
            named.for_each(|w| opts.warnings.push(w));
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The times of a Pod's or Node's conditions are Go structs: `null` when unset, never left
/// out (so their writer owns them).
fn condition_times(kind: &str, obj: &mut Value) {
    let times: &[&str] = match kind {
        "Pod" => &["lastProbeTime", "lastTransitionTime"],
        "Node" => &["lastHeartbeatTime", "lastTransitionTime"],
        _ => return,
    };
    for c in obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        for field in times {
            c.entry(*field).or_insert(Value::Null);
        }
    }
}

/// The type's own rules after ownership is tracked (owned by no one): a new Namespace's
/// `kubernetes` finalizer and `Active` phase, what a Service keeps of its allocations.
pub(crate) fn normalize(
    info: &TypeInfo,
    obj: &mut Value,
    old: Option<&Value>,
    subresource: Option<&str>,
) {
    if info.special == Special::Service
        && let Some(old) = old
    {
        keep_allocated(obj, old);
    }
    if !info.rt.custom && info.rt.kind == "Node" {
        node_status(obj);
    }
    if !info.rt.custom {
        always_served(&info.rt.kind, obj);
    }
    if !info.rt.custom
        && info.rt.kind == "CertificateSigningRequest"
        && let (Some(old), Some(map)) = (old, obj.as_object_mut())
    {
        // The spec is immutable: an update keeps the stored one.
        match old.get("spec") {
            Some(spec) => map.insert("spec".into(), spec.clone()),
            None => map.remove("spec"),
        };
    }
    if !info.rt.custom && info.rt.kind == "DaemonSet" {
        // kube-apiserver keeps the template's generation itself: 1 on create, one more when
        // the template changes, whatever the request said.
        let generation = match old {
            None => 1,
            Some(old) => {
                let before = old
                    .pointer(&format!(
                        "/metadata/annotations/{}",
                        TEMPLATE_GENERATION.replace('/', "~1")
                    ))
                    .and_then(Value::as_str)
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(1);
                let changed = subresource.is_none()
                    && obj.pointer("/spec/template") != old.pointer("/spec/template");
                before + i64::from(changed)
            }
        };
        if let Some(entry) = template_generation(obj) {
            *entry.or_insert(Value::Null) = json!(generation.to_string());
        }
    }
    if !info.rt.custom
        && info.rt.kind == "PersistentVolume"
        && let Some(old) = old
    {
        phase_transition_time(obj, old);
    }
    if info.special != Special::Namespace {
        return;
    }
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    match old {
        Some(_) if subresource == Some("finalize") => {}
        // Only `/finalize` changes the finalizers of a namespace.
        Some(old) => match old.pointer("/spec/finalizers") {
            Some(finalizers) => {
                let spec = map.entry("spec").or_insert_with(|| json!({}));
                if !spec.is_object() {
                    *spec = json!({});
                }
                spec["finalizers"] = finalizers.clone();
            }
            None => {
                if let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("finalizers");
                }
            }
        },
        None => {
            let spec = map.entry("spec").or_insert_with(|| json!({}));
            if !spec.is_object() {
                *spec = json!({});
            }
            let finalizers = spec["finalizers"].take();
            let mut list = finalizers.as_array().cloned().unwrap_or_default();
            if !list.iter().any(|f| f == "kubernetes") {
                list.push(json!("kubernetes"));
            }
            spec["finalizers"] = Value::Array(list);
            map.insert("status".into(), json!({"phase": "Active"}));
        }
    }
}

/// The annotation a DaemonSet's internal `templateGeneration` is served as.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// The entry of a DaemonSet's template generation annotation (making the annotations map).
fn template_generation(obj: &mut Value) -> Option<serde_json::map::Entry<'_>> {
    let meta = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let annotations = meta
        .as_object_mut()?
        .entry("annotations")
        .or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    Some(annotations.as_object_mut()?.entry(TEMPLATE_GENERATION))
}

/// One row of [`ALWAYS_SERVED`]: kind, object holding the field, field, its value when unset.
type AlwaysServed = (&'static str, &'static str, &'static str, fn() -> Value);

/// Fields kube-apiserver always serves, owned by no one, with the value they have when unset:
/// Go slices without `omitempty` (`null`) and specs that are Go structs (`{}`). (kind, object
/// holding the field, field, value.)
const ALWAYS_SERVED: &[AlwaysServed] = &[
    ("EndpointSlice", "", "ports", || Value::Null),
    (
        "HorizontalPodAutoscaler",
        "/status",
        "currentMetrics",
        || Value::Null,
    ),
    ("Lease", "", "spec", || json!({})),
];

/// Sets the [`ALWAYS_SERVED`] fields of `kind` that `obj` leaves out.
fn always_served(kind: &str, obj: &mut Value) {
    for (_, parent, field, value) in ALWAYS_SERVED.iter().filter(|(k, ..)| *k == kind) {
        if let Some(map) = obj.pointer_mut(parent).and_then(Value::as_object_mut) {
            map.entry(*field).or_insert_with(value);
        }
    }
}

/// A PersistentVolume's `status.lastPhaseTransitionTime`: kept while the phase stays, set to
/// now when the phase moves and the writer did not set a new time.
fn phase_transition_time(obj: &mut Value, old: &Value) {
    const TIME: &str = "/status/lastPhaseTransitionTime";
    let unset = |v: Option<&Value>| v.is_none_or(Value::is_null);
    let old_time = old.pointer(TIME).filter(|v| !v.is_null()).cloned();
    let new_time = obj.pointer(TIME).cloned();
    let time = if old.pointer("/status/phase") == obj.pointer("/status/phase") {
        if !unset(new_time.as_ref()) {
            return;
        }
        match old_time {
            Some(t) => t,
            None => return,
        }
    } else if unset(new_time.as_ref()) || new_time == old_time {
        json!(super::meta::now())
    } else {
        return;
    };
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("lastPhaseTransitionTime".into(), time);
    }
}

/// Drops empty maps and lists that kube-apiserver does not store (Go's `omitempty` on the
/// typed object): `metadata.labels`, `annotations`, `finalizers`, `ownerReferences`, and a
/// ConfigMap's or Secret's empty `data`, `binaryData`, `stringData`.
fn omit_empty(info: &TypeInfo, obj: &mut Value) {
    let empty = |v: &Value| {
        v.is_null()
            || v.as_object().is_some_and(Map::is_empty)
            || v.as_array().is_some_and(Vec::is_empty)
    };
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
            if meta.get(field).is_some_and(empty) {
                meta.remove(field);
            }
        }
    }
    let data_fields: &[&str] = match (info.rt.custom, info.rt.kind.as_str()) {
        (false, "ConfigMap") => &["data", "binaryData"],
        (false, "Secret") => &["data", "stringData"],
        _ => &[],
    };
    if let Some(map) = obj.as_object_mut() {
        for field in data_fields {
            if map.get(*field).is_some_and(empty) {
                map.remove(*field);
            }
        }
    }
}

/// A built-in's typed fields have no `null`: decoded (a map's `null` became its element's
/// zero value, a typed field's `null` is left out), what is left of them goes.
fn built_in_nulls(obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        for (key, value) in map.iter_mut() {
            if key != "metadata" {
                drop_nulls(value);
            }
        }
        map.retain(|_, v| !v.is_null());
    }
}

/// Removes the `null` members of every object inside `value`.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Folds `stringData` into base64 `data` (stringData wins) and defaults `type` to `Opaque`.
fn normalize_secret(obj: &mut Value) -> Result<(), ApiError> {
    let name = name_of(obj).to_string();
    let Some(map) = obj.as_object_mut() else {
        return Ok(());
    };
    if let Some(string_data) = map.remove("stringData") {
        let Value::Object(entries) = string_data else {
            return Err(ApiError::bad_request(
                "Secret.stringData must be an object of strings",
            ));
        };
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        let Some(data) = data.as_object_mut() else {
            return Ok(());
        };
        for (k, v) in entries {
            let Some(s) = v.as_str() else {
                return Err(ApiError::invalid(
                    "Secret",
                    &name,
                    format!("stringData[{k}]: Invalid value: must be a string"),
                ));
            };
            data.insert(
                k,
                Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
            );
        }
    }
    if !map.get("type").is_some_and(Value::is_string) {
        map.insert("type".into(), json!("Opaque"));
    }
    Ok(())
}

/// The name label, and on create the `kubernetes` finalizer and `Active` phase.
fn name_label(obj: &mut Value) {
    let name = name_of(obj).to_string();
    let meta = meta_mut(obj);
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(NAMESPACE_NAME_LABEL.into(), Value::String(name));
    }
}

/// What kube-apiserver keeps of a Service's allocations when an update leaves them out: its
/// cluster IPs and their families, and each port's node port.
fn keep_allocated(new: &mut Value, old: &Value) {
    let (Some(spec), Some(old_spec)) = (
        new.get_mut("spec").and_then(Value::as_object_mut),
        old["spec"].as_object(),
    ) else {
        return;
    };
    let missing = |v: Option<&Value>| {
        v.is_none_or(|v| v.is_null() || v == "" || v.as_array().is_some_and(Vec::is_empty))
    };
    let external =
        |s: &Map<String, Value>| s.get("type").and_then(Value::as_str) == Some("ExternalName");
    if external(spec) || external(old_spec) {
        return;
    }
    for field in [
        "clusterIP",
        "clusterIPs",
        "ipFamilies",
        "ipFamilyPolicy",
        "healthCheckNodePort",
    ] {
        if missing(spec.get(field))
            && let Some(v) = old_spec.get(field)
        {
            spec.insert(field.into(), v.clone());
        }
    }
    let old_ports = old_spec.get("ports").and_then(Value::as_array);
    for port in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if port.get("nodePort").is_some() {
            continue;
        }
        let same = old_ports
            .into_iter()
            .flatten()
            .find(|p| p["port"] == port["port"] && p["protocol"] == port["protocol"]);
        if let Some(node_port) = same.and_then(|p| p.get("nodePort"))
            && let Some(port) = port.as_object_mut()
        {
            port.insert("nodePort".into(), node_port.clone());
        }
    }
}

/// The parts of a Node that are Go structs, never left out: its spec (`{}` when empty), the
/// kubelet's endpoint (port 0) and the node's info (empty strings) until a kubelet reports
/// them.
fn node_status(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    let status = map.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else {
        return;
    };
    status
        .entry("daemonEndpoints")
        .or_insert_with(|| json!({"kubeletEndpoint": {"Port": 0}}));
    let info = status.entry("nodeInfo").or_insert_with(|| json!({}));
    if let Some(info) = info.as_object_mut() {
        for field in [
            "architecture",
            "bootID",
            "containerRuntimeVersion",
            "kernelVersion",
            "kubeProxyVersion",
            "kubeletVersion",
            "machineID",
            "operatingSystem",
            "osImage",
            "systemUUID",
        ] {
            info.entry(field).or_insert_with(|| json!(""));
        }
    }
}
