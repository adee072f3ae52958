//! Validation kube-apiserver applies to every object or to common kinds, answered with 422:
//! label keys and values, annotation keys, and ConfigMap and Secret data keys.

use serde_json::{Map, Value};

use super::ApiError;
use super::meta::{SUBDOMAIN_MSG, is_dns_subdomain, name_of};
use super::registry::TypeInfo;

const QUALIFIED_NAME_MSG: &str = "a qualified name is an optional DNS subdomain prefix and '/', then 1 to 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a label value is empty or at most 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character";
/// `TotalAnnotationSizeLimitB` of apimachinery's object meta validation.
const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

const JOB_LABEL_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const IP_MSG: &str = "must be a valid IP address";
const DATA_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// The shape of a label value (also the name part of a qualified name).
fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    s.is_empty()
        || (b.len() <= 63
            && b.iter().all(inner)
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// A label or annotation key: `[prefix/]name`.
fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    !name.is_empty() && is_label_value(name) && prefix.is_none_or(is_dns_subdomain)
}

/// A ConfigMap or Secret data key.
fn is_data_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Checks an object before it is stored; the 422 lists every invalid field.
pub(crate) fn check(info: &TypeInfo, obj: &Value) -> Result<(), ApiError> {
    let causes = problems(info, obj);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_all(&info.rt.kind, name_of(obj), causes).in_group(&info.rt.group))
}

/// Every invalid field of an object, as 422 causes (`field: Invalid value: ...`).
pub(crate) fn problems(info: &TypeInfo, obj: &Value) -> Vec<String> {
    let mut causes: Vec<String> = Vec::new();
    let meta = &obj["metadata"];
    for (k, v) in meta["labels"].as_object().into_iter().flatten() {
        if !is_qualified_name(k) {
            causes.push(format!(
                "metadata.labels: Invalid value: {k:?}: {QUALIFIED_NAME_MSG}"
            ));
        }
        match v.as_str() {
            Some(s) if is_label_value(s) => {}
            _ => causes.push(format!(
                "metadata.labels: Invalid value: {v}: {LABEL_VALUE_MSG}"
            )),
        }
    }
    for k in meta["annotations"]
        .as_object()
        .into_iter()
        .flat_map(Map::keys)
    {
        if !is_qualified_name(&k.to_ascii_lowercase()) {
            causes.push(format!(
                "metadata.annotations: Invalid value: {k:?}: {QUALIFIED_NAME_MSG}"
            ));
        }
    }
    // `ValidateAnnotationsSize`: keys and values together.
    let annotations: usize = meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map(str::len).unwrap_or_default())
        .sum();
    if annotations > TOTAL_ANNOTATION_SIZE {
        causes.push(format!(
            "metadata.annotations: Too long: may not be more than {TOTAL_ANNOTATION_SIZE} bytes"
        ));
    }
    if !info.rt.custom && matches!(info.rt.kind.as_str(), "ConfigMap" | "Secret") {
        let mut seen: Vec<&str> = Vec::new();
        for field in ["data", "binaryData"] {
            for k in obj[field].as_object().into_iter().flat_map(Map::keys) {
                if !is_data_key(k) {
                    causes.push(format!(
                        "{field}[{k}]: Invalid value: {k:?}: {DATA_KEY_MSG}"
                    ));
                } else if seen.contains(&k.as_str()) {
                    causes.push(format!(
                        "data[{k}]: Invalid value: {k:?}: duplicate of key {k:?} in binaryData"
                    ));
                }
                seen.push(k);
            }
        }
    }
    if !info.rt.custom {
        by_kind(&info.rt.kind, obj, &mut causes);
    }
    causes
}

/// Where a kind keeps a Pod spec.
fn pod_spec_path(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Pod" => "spec",
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController" => "spec.template.spec",
        "PodTemplate" => "template.spec",
        "CronJob" => "spec.jobTemplate.spec.template.spec",
        _ => return None,
    })
}

/// `ValidatePodSpec`'s check that every volume mount names a volume of the Pod (`claims`: the
/// names a StatefulSet's `volumeClaimTemplates` add, as its validation does).
fn volume_mounts(path: &str, spec: &Value, claims: &Value, causes: &mut Vec<String>) {
    let volumes: Vec<&str> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .chain(
            claims
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["metadata"]["name"].as_str()),
        )
        .collect();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            for (j, m) in c["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let name = m["name"].as_str().unwrap_or_default();
                if !name.is_empty() && !volumes.contains(&name) {
                    causes.push(format!(
                        "{path}.{list}[{i}].volumeMounts[{j}].name: Not found: {name:?}"
                    ));
                }
            }
        }
    }
}

/// An Ingress host: a DNS subdomain, or one behind `*.`.
fn ingress_host(field: &str, host: &str, causes: &mut Vec<String>) {
    let name = host.strip_prefix("*.").unwrap_or(host);
    if !is_dns_subdomain(name) {
        causes.push(format!("{field}: Invalid value: {host:?}: {SUBDOMAIN_MSG}"));
    }
}

/// The checks of single kinds that clients commonly run into.
fn by_kind(kind: &str, obj: &Value, causes: &mut Vec<String>) {
    let spec = &obj["spec"];
    if let Some(path) = pod_spec_path(kind) {
        let pod_spec = path.split('.').fold(obj, |v, part| &v[part]);
        volume_mounts(path, pod_spec, &spec["volumeClaimTemplates"], causes);
    }
    match kind {
        "Ingress" => {
            for (i, rule) in spec["rules"].as_array().into_iter().flatten().enumerate() {
                if let Some(host) = rule["host"].as_str().filter(|h| !h.is_empty()) {
                    ingress_host(&format!("spec.rules[{i}].host"), host, causes);
                }
            }
            for (i, tls) in spec["tls"].as_array().into_iter().flatten().enumerate() {
                for (j, host) in tls["hosts"].as_array().into_iter().flatten().enumerate() {
                    if let Some(host) = host.as_str() {
                        ingress_host(&format!("spec.tls[{i}].hosts[{j}]"), host, causes);
                    }
                }
            }
        }
        "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet" => {
            let labels = &spec["template"]["metadata"]["labels"];
            let selects = spec["selector"]["matchLabels"]
                .as_object()
                .into_iter()
                .flatten()
                .all(|(k, v)| labels.get(k) == Some(v));
            if !selects {
                causes.push(format!(
                    "spec.template.metadata.labels: Invalid value: {labels}: `selector` does not match template `labels`"
                ));
            }
        }
        "CronJob" => {
            if let Some(schedule) = spec["schedule"].as_str()
                && !schedule.starts_with('@')
            {
                // As kube-apiserver's cron parser words it: five fields, `[f1 f2 ...]`.
                let fields: Vec<&str> = schedule.split_whitespace().collect();
                if fields.len() != 5 {
                    causes.push(format!(
                        "spec.schedule: Invalid value: {schedule:?}: expected exactly 5 fields, found {}: [{}]",
                        fields.len(),
                        fields.join(" ")
                    ));
                }
            }
        }
        "Job" => {
            // The labels kube-apiserver generates from the name (`job-name` and its
            // `batch.kubernetes.io/` twin) are validated as label values.
            let name = name_of(obj);
            if spec["manualSelector"] != true && !is_label_value(name) {
                for _ in 0..2 {
                    causes.push(format!(
                        "spec.template.labels: Invalid value: {name:?}: {JOB_LABEL_MSG}"
                    ));
                }
            }
            let policy = spec["template"]["spec"]["restartPolicy"].as_str();
            if !matches!(policy, Some("OnFailure" | "Never")) {
                causes.push(
                    "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"".into(),
                );
            }
        }
        "Service" => {
            const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
            if let Some(ty) = spec["type"].as_str().filter(|t| !TYPES.contains(t)) {
                causes.push(format!(
                    "spec.type: Unsupported value: {ty:?}: supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
                ));
                return;
            }
            let external = spec["type"] == "ExternalName" || spec["clusterIP"] == "None";
            if !external && spec["ports"].as_array().is_none_or(Vec::is_empty) {
                causes.push("spec.ports: Required value".into());
            }
        }
        "Endpoints" => {
            for (i, subset) in obj["subsets"].as_array().into_iter().flatten().enumerate() {
                for list in ["addresses", "notReadyAddresses"] {
                    for (j, a) in subset[list].as_array().into_iter().flatten().enumerate() {
                        let ip = a["ip"].as_str().unwrap_or_default();
                        if ip.parse::<std::net::IpAddr>().is_err() {
                            // kube-apiserver checks the address twice, wording it two ways.
                            let field = format!("subsets[{i}].{list}[{j}].ip");
                            causes.push(format!(
                                "{field}: Invalid value: {ip:?}: {IP_MSG}, (e.g. 10.9.8.7 or 2001:db8::ffff)"
                            ));
                            causes.push(format!("{field}: Invalid value: {ip:?}: {IP_MSG}"));
                        }
                    }
                }
            }
        }
        "LimitRange" => {
            for (i, limit) in spec["limits"].as_array().into_iter().flatten().enumerate() {
                limit_range_item(i, limit, causes);
            }
        }
        "PersistentVolumeClaim" if spec["accessModes"].as_array().is_none_or(Vec::is_empty) => {
            causes.push(
                "spec.accessModes: Required value: at least 1 access mode is required".into(),
            );
        }
        "Pod" => {
            for (i, c) in spec["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if c["image"].as_str().is_none_or(str::is_empty) {
                    causes.push(format!("spec.containers[{i}].image: Required value"));
                }
            }
            for list in ["containers", "initContainers"] {
                for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
                    requests_within_limits(&format!("spec.{list}[{i}]"), c, causes);
                }
            }
        }
        _ => {}
    }
}

/// A container's requests may not exceed its limits.
fn requests_within_limits(path: &str, c: &Value, causes: &mut Vec<String>) {
    use super::quantity::Quantity;
    let limits = &c["resources"]["limits"];
    for (name, request) in c["resources"]["requests"].as_object().into_iter().flatten() {
        let parse = |v: &Value| v.as_str().and_then(Quantity::parse);
        if let (Some(request), Some(limit)) = (parse(request), parse(&limits[name]))
            && request > limit
        {
            causes.push(format!(
                "{path}.resources.requests: Invalid value: \"{request}\": must be less than or equal to {name} limit of {limit}"
            ));
        }
    }
}

/// The 422 of a Pod update whose new spec is itself invalid: kube-apiserver lists the spec's
/// problems, then the update's own (a spec made invalid by an update changed what an update
/// may not change). `new` is the object as the update would store it.
pub(crate) fn pod_update_refusal(info: &TypeInfo, old: &Value, new: &Value) -> Option<ApiError> {
    let mut causes = problems(info, new);
    if causes.is_empty() {
        return None;
    }
    pod_update(&old["spec"], &new["spec"], &mut causes);
    Some(ApiError::invalid_all(&info.rt.kind, name_of(new), causes).in_group(&info.rt.group))
}

/// What an update may change in a Pod's spec, as kube-apiserver lists it.
const POD_UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// A Pod's update: `activeDeadlineSeconds` may only shrink, and nothing but the images, that
/// deadline and tolerations may change. kube-apiserver follows the 403-style cause with a diff
/// of its internal Go structs; the emulator names the spec fields that changed instead.
fn pod_update(old: &Value, new: &Value, causes: &mut Vec<String>) {
    const DEADLINE: &str = "activeDeadlineSeconds";
    match (old[DEADLINE].as_i64(), &new[DEADLINE]) {
        (Some(_), Value::Null) => causes.push(
            "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value".into(),
        ),
        (Some(before), after) if after.as_i64().is_some_and(|a| a > before) => causes.push(format!(
            "spec.activeDeadlineSeconds: Invalid value: {after}: must be less than or equal to previous value"
        )),
        _ => {}
    }
    let mut munged = new.clone();
    if let Some(map) = munged.as_object_mut() {
        for field in [DEADLINE, "tolerations", "schedulingGates"] {
            match old.get(field) {
                Some(v) => map.insert(field.into(), v.clone()),
                None => map.remove(field),
            };
        }
        for list in ["containers", "initContainers"] {
            let before = old[list].as_array();
            if let (Some(before), Some(Value::Array(after))) = (before, map.get_mut(list))
                && before.len() == after.len()
            {
                for (a, b) in after.iter_mut().zip(before) {
                    if let Some(c) = a.as_object_mut() {
                        match b.get("image") {
                            Some(image) => c.insert("image".into(), image.clone()),
                            None => c.remove("image"),
                        };
                    }
                }
            }
        }
    }
    if munged != *old {
        let changed: Vec<String> = munged
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .chain(old.as_object().into_iter().flat_map(|m| m.keys()))
            .filter(|k| munged.get(*k) != old.get(*k))
            .map(|k| format!("spec.{k}"))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        causes.push(format!(
            "spec: Forbidden: pod updates may not change fields other than {POD_UPDATABLE}\nchanged: {}",
            changed.join(", ")
        ));
    }
}

/// What a suspended Job that never started may change in its template (metadata or spec).
const SCHEDULING_DIRECTIVES: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "tolerations",
    "affinity",
    "schedulingGates",
];

/// A Job's update: the selector stays required, matching the template's labels, and (with the
/// template) immutable. kube-apiserver checks the new spec twice (as a Job and as an update),
/// so the first two causes are listed twice; its message says each once.
fn job_update(old: &Value, new: &Value, causes: &mut Vec<String>) {
    let selector = &new["spec"]["selector"];
    let template = &new["spec"]["template"];
    let labels = &template["metadata"]["labels"];
    let selects = selector.is_object()
        && selector["matchLabels"]
            .as_object()
            .into_iter()
            .flatten()
            .all(|(k, v)| labels.get(k) == Some(v));
    for _ in 0..2 {
        if selector.is_null() {
            causes.push("spec.selector: Required value".into());
        }
        if !selects {
            causes.push(format!(
                "spec.template.metadata.labels: Invalid value: {labels}: `selector` does not match template `labels`"
            ));
        }
    }
    if *selector != old["spec"]["selector"] {
        causes.push(format!(
            "spec.selector: Invalid value: {selector}: field is immutable"
        ));
    }
    // A suspended Job that never started may change its template's scheduling directives.
    let mutable = old["spec"]["suspend"] == true && old["status"]["startTime"].is_null();
    let fixed = |t: &Value| {
        let mut t = t.clone();
        if mutable {
            for ptr in ["/metadata", "/spec"] {
                if let Some(map) = t.pointer_mut(ptr).and_then(Value::as_object_mut) {
                    for field in SCHEDULING_DIRECTIVES {
                        map.remove(*field);
                    }
                }
            }
            if t["metadata"].as_object().is_some_and(Map::is_empty)
                && let Some(map) = t.as_object_mut()
            {
                map.remove("metadata");
            }
        }
        t
    };
    if fixed(template) != fixed(&old["spec"]["template"]) {
        // kube-apiserver prints the template as its internal Go struct.
        causes.push(format!(
            "spec.template: Invalid value: {template}: field is immutable"
        ));
    }
}

/// A StorageClass's update: `ValidateStorageClassUpdate` of kube-apiserver's
/// `pkg/apis/storage/validation` (v1.36) keeps `parameters`, `provisioner`, `reclaimPolicy` and
/// `volumeBindingMode` immutable, in that order, each quoted as its new value (JSON; `null`
/// when gone). Go's semantic equality takes an empty map for none.
fn storage_class_update(old: &Value, new: &Value, causes: &mut Vec<String>) {
    let parameters = |o: &Value| {
        o["parameters"]
            .as_object()
            .filter(|m| !m.is_empty())
            .cloned()
    };
    if parameters(old) != parameters(new) {
        causes.push(format!(
            "parameters: Invalid value: {}: field is immutable",
            new["parameters"]
        ));
    }
    for field in ["provisioner", "reclaimPolicy", "volumeBindingMode"] {
        if old[field] != new[field] {
            causes.push(format!(
                "{field}: Invalid value: {}: field is immutable",
                new[field]
            ));
        }
    }
}

/// A LimitRange item's bounds in order: `min <= defaultRequest <= default <= max`, worded and
/// ordered as kube-apiserver's validation (which quotes `max` for a default above it).
fn limit_range_item(i: usize, limit: &Value, causes: &mut Vec<String>) {
    let at = |field: &str, k: &str| {
        limit[field][k]
            .as_str()
            .and_then(|s| quantity(s).map(|q| (s, q)))
    };
    let mut keys: Vec<&str> = ["min", "max", "default", "defaultRequest"]
        .iter()
        .flat_map(|f| limit[*f].as_object().into_iter().flat_map(Map::keys))
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let (min, max) = (at("min", k), at("max", k));
        let (default, request) = (at("default", k), at("defaultRequest", k));
        let path = |field: &str| format!("spec.limits[{i}].{field}[{k}]");
        let mut check = |lo: Option<(&str, f64)>,
                         hi: Option<(&str, f64)>,
                         field: &str,
                         shown: Option<(&str, f64)>,
                         words: (&str, &str)| {
            if let (Some(lo), Some(hi), Some(shown)) = (lo, hi, shown)
                && lo.1 > hi.1
            {
                causes.push(format!(
                    "{}: Invalid value: {:?}: {} value {} is greater than {} value {}",
                    path(field),
                    shown.0,
                    words.0,
                    lo.0,
                    words.1,
                    hi.0
                ));
            }
        };
        check(min, max, "min", min, ("min", "max"));
        check(
            min,
            request,
            "defaultRequest",
            request,
            ("min", "default request"),
        );
        check(
            request,
            max,
            "defaultRequest",
            request,
            ("default request", "max"),
        );
        check(
            request,
            default,
            "defaultRequest",
            request,
            ("default request", "default limit"),
        );
        check(min, default, "default", min, ("min", "default"));
        check(default, max, "default", max, ("default", "max"));
    }
}

/// A resource quantity's value (`500m`, `2`, `1Gi`, `1e3`); `None` when it is not one.
fn quantity(s: &str) -> Option<f64> {
    const SUFFIXES: [(&str, f64); 14] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
    ];
    for (suffix, scale) in SUFFIXES {
        if let Some(n) = s.strip_suffix(suffix) {
            return n.parse::<f64>().ok().map(|n| n * scale);
        }
    }
    s.strip_suffix('E')
        .and_then(|n| n.parse::<f64>().ok().map(|n| n * 1e18))
        .or_else(|| s.parse::<f64>().ok())
}

/// The checks of an update of single kinds (the object as it would be stored, and as it is).
pub(crate) fn check_update(info: &TypeInfo, old: &Value, new: &Value) -> Result<(), ApiError> {
    if info.rt.custom {
        return Ok(());
    }
    let mut causes: Vec<String> = Vec::new();
    if info.rt.kind == "Job" {
        job_update(old, new, &mut causes);
    }
    if info.rt.kind == "Pod" {
        pod_update(&old["spec"], &new["spec"], &mut causes);
    }
    if info.rt.kind == "StorageClass" {
        storage_class_update(old, new, &mut causes);
    }
    if info.rt.kind == "Node" {
        let cidrs = |o: &Value| {
            o["spec"]["podCIDRs"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let before = cidrs(old);
        if !before.is_empty() && cidrs(new) != before {
            causes.push(
                "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"
                    .into(),
            );
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_all(&info.rt.kind, name_of(new), causes).in_group(&info.rt.group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert!(is_qualified_name("app"));
        assert!(is_qualified_name("example.com/app_1.x"));
        assert!(!is_qualified_name("-app"));
        assert!(!is_qualified_name("Example_.com/app"));
        assert!(!is_qualified_name("a/"));
        assert!(is_label_value(""));
        assert!(!is_label_value("bad value!"));
        assert!(!is_label_value(&"x".repeat(64)));
        assert!(is_data_key("config.yaml"));
        assert!(!is_data_key("a/b"));
        assert!(!is_data_key(".."));
        assert_eq!(quantity("500m"), Some(0.5));
        assert_eq!(quantity("2"), Some(2.0));
        assert_eq!(quantity("1Ki"), Some(1024.0));
        assert_eq!(quantity("x"), None);
    }
}
