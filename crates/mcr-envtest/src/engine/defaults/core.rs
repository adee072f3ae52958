//! core/v1: `pkg/apis/core/v1/defaults.go` of Kubernetes v1.36 (`SetDefaults_*`), and the
//! conversions of `pkg/apis/core/v1/conversion.go` that change what a v1 object reads back
//! as (a Pod spec's `serviceAccount`, a Node's `podCIDR`, a Pod's `podIP`).

use serde_json::{Value, json};

use super::{Defaulters, Obj, child, get, items, nil, or_nil, or_unset, text, unset};

pub(super) const DEFAULTERS: Defaulters = &[
    (
        "io.k8s.api.core.v1.ReplicationController",
        replication_controller,
    ),
    ("io.k8s.api.core.v1.Volume", volume),
    ("io.k8s.api.core.v1.Container", container),
    ("io.k8s.api.core.v1.EphemeralContainer", container),
    ("io.k8s.api.core.v1.Service", service),
    ("io.k8s.api.core.v1.Pod", pod),
    ("io.k8s.api.core.v1.PodSpec", pod_spec),
    ("io.k8s.api.core.v1.Probe", probe),
    ("io.k8s.api.core.v1.SecretVolumeSource", default_mode),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", default_mode),
    ("io.k8s.api.core.v1.DownwardAPIVolumeSource", default_mode),
    ("io.k8s.api.core.v1.ProjectedVolumeSource", default_mode),
    ("io.k8s.api.core.v1.Secret", secret),
    (
        "io.k8s.api.core.v1.ServiceAccountTokenProjection",
        token_projection,
    ),
    ("io.k8s.api.core.v1.PersistentVolume", persistent_volume),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaim",
        persistent_volume_claim,
    ),
    ("io.k8s.api.core.v1.PersistentVolumeClaimSpec", volume_mode),
    ("io.k8s.api.core.v1.Endpoints", endpoints),
    ("io.k8s.api.core.v1.HTTPGetAction", http_get),
    ("io.k8s.api.core.v1.Namespace", namespace),
    ("io.k8s.api.core.v1.NamespaceStatus", namespace_status),
    ("io.k8s.api.core.v1.NodeStatus", node_status),
    ("io.k8s.api.core.v1.NodeSpec", node_spec),
    ("io.k8s.api.core.v1.ObjectFieldSelector", field_selector),
    ("io.k8s.api.core.v1.LimitRangeItem", limit_range_item),
    ("io.k8s.api.core.v1.ConfigMap", config_map),
    ("io.k8s.api.core.v1.HostPathVolumeSource", host_path),
    ("io.k8s.api.core.v1.PodStatus", pod_status),
];

/// `SetDefaults_ReplicationController`: the selector and labels default to the template's
/// labels.
fn replication_controller(rc: &mut Obj) {
    let labels = rc
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.is_object())
        .cloned();
    let Some(labels) = labels else {
        return;
    };
    let spec = child(rc, "spec");
    or_unset(spec, "selector", labels.clone());
    or_unset(child(rc, "metadata"), "labels", labels);
}

/// `SetDefaults_Volume`: a volume without a source is an `emptyDir`; an `image` volume's pull
/// policy follows its tag (the `ImageVolume` gate is on in v1.36).
fn volume(v: &mut Obj) {
    let has_source = v.iter().any(|(k, val)| k != "name" && !val.is_null());
    if !has_source {
        v.insert("emptyDir".into(), json!({}));
    }
    if let Some(image) = get(v, "image")
        && unset(image, "pullPolicy")
    {
        let policy = pull_policy(text(image, "reference"));
        image.insert("pullPolicy".into(), json!(policy));
    }
}

/// `SetDefaults_Container` (also `SetDefaults_EphemeralContainer`).
fn container(c: &mut Obj) {
    if unset(c, "imagePullPolicy") {
        let policy = pull_policy(text(c, "image"));
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    // `v1.TerminationMessagePathDefault`, `v1.TerminationMessageReadFile`.
    or_unset(c, "terminationMessagePath", json!("/dev/termination-log"));
    or_unset(c, "terminationMessagePolicy", json!("File"));
}

/// The pull policy of an image: `Always` for `latest` (or no tag nor digest), else
/// `IfNotPresent`, also for a reference `parsers.ParseImageName` cannot parse.
pub(super) fn pull_policy(image: &str) -> &'static str {
    if !reference_parses(image) {
        return "IfNotPresent";
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    let tag = last.split_once(':').map(|(_, t)| t);
    match (tag, digest) {
        (Some("latest"), _) | (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

/// Whether a docker reference parses (`docker/reference` grammar: lower-case path
/// components, an optional registry host with port, tag and digest).
fn reference_parses(image: &str) -> bool {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let Some((algorithm, hex)) = d.split_once(':') else {
            return false;
        };
        if algorithm.is_empty() || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return false;
        }
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    let last = parts.pop().unwrap_or_default();
    let (last, tag) = match last.split_once(':') {
        Some((l, t)) => (l, Some(t)),
        None => (last, None),
    };
    if let Some(t) = tag
        && (t.is_empty()
            || t.len() > 128
            || t.starts_with(['.', '-'])
            || !t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)))
    {
        return false;
    }
    // The first part is a registry host when it has a dot, a port or is `localhost`.
    if let Some(first) = parts.first()
        && (first.contains(['.', ':'])
            || *first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase()))
    {
        parts.remove(0);
    }
    parts.push(last);
    parts.iter().all(|p| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && p.as_bytes()[0].is_ascii_alphanumeric()
            && p.as_bytes()[p.len() - 1].is_ascii_alphanumeric()
    })
}

/// `SetDefaults_Service`.
fn service(svc: &mut Obj) {
    let spec = child(svc, "spec");
    or_unset(spec, "sessionAffinity", json!("None"));
    match text(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.pointer("/clientIP/timeoutSeconds"));
            if timeout.is_none_or(Value::is_null) {
                // `v1.DefaultClientIPServiceAffinitySeconds`.
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    or_unset(spec, "type", json!("ClusterIP"));
    for port in items(spec, "ports") {
        or_unset(port, "protocol", json!("TCP"));
        if unset(port, "targetPort") {
            let number = port.get("port").cloned().unwrap_or(json!(0));
            port.insert("targetPort".into(), number);
        }
    }
    let kind = text(spec, "type").to_string();
    // `service.ExternallyAccessible`: a NodePort or LoadBalancer Service, or a ClusterIP one
    // with external IPs.
    let external = kind == "NodePort"
        || kind == "LoadBalancer"
        || (kind == "ClusterIP" && !unset(spec, "externalIPs"));
    if external {
        or_unset(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        or_nil(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        or_nil(spec, "allocateLoadBalancerNodePorts", json!(true));
        let ingress = svc
            .get_mut("status")
            .and_then(|s| s.pointer_mut("/loadBalancer/ingress"))
            .and_then(Value::as_array_mut);
        for ing in ingress
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            if !unset(ing, "ip") {
                or_nil(ing, "ipMode", json!("VIP"));
            }
        }
    }
}

/// `SetDefaults_Pod`: containers request what they limit; pod-level resources (the
/// `PodLevelResources` gate is on in v1.36); `enableServiceLinks`; host ports of a
/// host-network Pod.
fn pod(pod: &mut Obj) {
    let spec = child(pod, "spec");
    for list in ["containers", "initContainers"] {
        for c in items(spec, list) {
            let limits = c
                .get("resources")
                .and_then(|r| r.get("limits"))
                .and_then(Value::as_object)
                .cloned();
            let Some(limits) = limits else {
                continue;
            };
            let requests = child(child(c, "resources"), "requests");
            for (k, v) in limits {
                requests.entry(k).or_insert(v);
            }
        }
    }
    pod_level_resources(spec);
    // `v1.DefaultEnableServiceLinks`.
    or_nil(spec, "enableServiceLinks", json!(true));
    if spec.get("hostNetwork") == Some(&json!(true)) {
        for list in ["containers", "initContainers"] {
            for c in items(spec, list) {
                for port in items(c, "ports") {
                    if unset(port, "hostPort") {
                        let number = port.get("containerPort").cloned().unwrap_or(json!(0));
                        port.insert("hostPort".into(), number);
                    }
                }
            }
        }
    }
}

/// `defaultHugePagePodLimits` and `defaultPodRequests`: a Pod with pod-level resources gets
/// hugepage limits and requests from its containers' sums.
fn pod_level_resources(spec: &mut Obj) {
    use crate::engine::quantity::Quantity;
    let Some(resources) = spec.get("resources").and_then(Value::as_object) else {
        return;
    };
    let limits = resources.get("limits").and_then(Value::as_object).cloned();
    let requests = resources
        .get("requests")
        .and_then(Value::as_object)
        .cloned();
    if limits.as_ref().is_none_or(|l| l.is_empty())
        && requests.as_ref().is_none_or(|r| r.is_empty())
    {
        return;
    }
    // What the containers (not init containers) ask for, summed, per resource.
    let sum = |what: &str| {
        let mut out: std::collections::BTreeMap<String, Quantity> = Default::default();
        for c in spec["containers"].as_array().into_iter().flatten() {
            for (k, v) in c["resources"][what].as_object().into_iter().flatten() {
                if let Some(q) = v.as_str().and_then(Quantity::parse) {
                    let total = out.get(k).copied().map(|t| t.add(q)).unwrap_or(q);
                    out.insert(k.clone(), total);
                }
            }
        }
        out
    };
    let supported = |k: &str| matches!(k, "cpu" | "memory") || k.starts_with("hugepages-");
    let mut new_limits = limits.clone().unwrap_or_default();
    for (k, q) in sum("limits") {
        if !k.starts_with("hugepages-") || !supported(&k) {
            continue;
        }
        if requests.as_ref().is_some_and(|r| r.contains_key(&k)) {
            continue;
        }
        new_limits.entry(k).or_insert(json!(q.to_string()));
    }
    let mut new_requests = requests.clone().unwrap_or_default();
    if !new_limits.is_empty() {
        // Requests default from the containers' requests (for resources that may be
        // overcommitted: not hugepages), then from the pod's limits.
        for (k, q) in sum("requests") {
            if supported(&k) && !k.starts_with("hugepages-") {
                new_requests.entry(k).or_insert(json!(q.to_string()));
            }
        }
        for (k, v) in &new_limits {
            if supported(k) {
                new_requests.entry(k.clone()).or_insert(v.clone());
            }
        }
    }
    let resources = child(spec, "resources");
    let has_limits = !new_limits.is_empty();
    if has_limits && Some(&new_limits) != limits.as_ref() {
        resources.insert("limits".into(), Value::Object(new_limits));
    }
    if !new_requests.is_empty() && has_limits {
        resources.insert("requests".into(), Value::Object(new_requests));
    }
}

/// `SetDefaults_PodSpec`, and `Convert_v1_PodSpec_To_core_PodSpec` with its way back: the
/// deprecated `serviceAccount` names the service account (when `serviceAccountName` does
/// not) and reads back as `serviceAccountName`.
fn pod_spec(spec: &mut Obj) {
    or_unset(spec, "dnsPolicy", json!("ClusterFirst"));
    or_unset(spec, "restartPolicy", json!("Always"));
    or_nil(spec, "securityContext", json!({}));
    // `v1.DefaultTerminationGracePeriodSeconds`.
    or_nil(spec, "terminationGracePeriodSeconds", json!(30));
    // `v1.DefaultSchedulerName`.
    or_unset(spec, "schedulerName", json!("default-scheduler"));
    if unset(spec, "serviceAccountName") {
        let deprecated = spec.get("serviceAccount").cloned();
        if let Some(name) = deprecated.filter(|n| !n.is_null()) {
            spec.insert("serviceAccountName".into(), name);
        }
    }
    match spec.get("serviceAccountName").cloned() {
        Some(name) if !name.is_null() => spec.insert("serviceAccount".into(), name),
        _ => spec.remove("serviceAccount"),
    };
}

/// `SetDefaults_Probe`.
fn probe(p: &mut Obj) {
    or_unset(p, "timeoutSeconds", json!(1));
    or_unset(p, "periodSeconds", json!(10));
    or_unset(p, "successThreshold", json!(1));
    or_unset(p, "failureThreshold", json!(3));
}

/// `SetDefaults_{Secret,ConfigMap,DownwardAPI,Projected}VolumeSource`: `defaultMode` 0644
/// (`v1.*VolumeSourceDefaultMode`).
fn default_mode(source: &mut Obj) {
    or_nil(source, "defaultMode", json!(0o644));
}

/// `SetDefaults_Secret`.
fn secret(s: &mut Obj) {
    or_unset(s, "type", json!("Opaque"));
}

/// `SetDefaults_ServiceAccountTokenProjection`: an hour.
fn token_projection(p: &mut Obj) {
    or_nil(p, "expirationSeconds", json!(3600));
}

/// `SetDefaults_PersistentVolume`.
fn persistent_volume(pv: &mut Obj) {
    or_unset(child(pv, "status"), "phase", json!("Pending"));
    let spec = child(pv, "spec");
    or_unset(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
    or_nil(spec, "volumeMode", json!("Filesystem"));
}

/// `SetDefaults_PersistentVolumeClaim`.
fn persistent_volume_claim(pvc: &mut Obj) {
    or_unset(child(pvc, "status"), "phase", json!("Pending"));
}

/// `SetDefaults_PersistentVolumeClaimSpec`.
fn volume_mode(spec: &mut Obj) {
    or_nil(spec, "volumeMode", json!("Filesystem"));
}

/// `SetDefaults_Endpoints`.
fn endpoints(e: &mut Obj) {
    for subset in items(e, "subsets") {
        for port in items(subset, "ports") {
            or_unset(port, "protocol", json!("TCP"));
        }
    }
}

/// `SetDefaults_HTTPGetAction`.
fn http_get(a: &mut Obj) {
    or_unset(a, "path", json!("/"));
    or_unset(a, "scheme", json!("HTTP"));
}

/// `SetDefaults_Namespace`: the `kubernetes.io/metadata.name` label.
fn namespace(ns: &mut Obj) {
    let name = ns
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !name.is_empty() {
        let labels = child(child(ns, "metadata"), "labels");
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
}

/// `SetDefaults_NamespaceStatus`.
fn namespace_status(s: &mut Obj) {
    or_unset(s, "phase", json!("Active"));
}

/// `SetDefaults_NodeStatus`: allocatable is the capacity.
fn node_status(s: &mut Obj) {
    if nil(s, "allocatable")
        && let Some(capacity) = s.get("capacity").filter(|c| !c.is_null()).cloned()
    {
        s.insert("allocatable".into(), capacity);
    }
}

/// `Convert_v1_NodeSpec_To_core_NodeSpec` and back: `podCIDRs` holds the CIDRs, `podCIDR` is
/// its first.
fn node_spec(spec: &mut Obj) {
    let single = text(spec, "podCIDR").to_string();
    let first = spec
        .get("podCIDRs")
        .and_then(|l| l.get(0))
        .and_then(Value::as_str)
        .map(str::to_string);
    if !single.is_empty() && first.as_deref() != Some(&single) {
        spec.insert("podCIDRs".into(), json!([single]));
    }
    if let Some(first) = spec.get("podCIDRs").and_then(|l| l.get(0)).cloned() {
        spec.insert("podCIDR".into(), first);
    }
}

/// `Convert_v1_PodStatus_To_core_PodStatus` and back: `podIPs` holds the addresses, `podIP`
/// is its first.
fn pod_status(s: &mut Obj) {
    let single = text(s, "podIP").to_string();
    let first = s
        .get("podIPs")
        .and_then(|l| l.pointer("/0/ip"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if !single.is_empty() && first.as_deref() != Some(&single) {
        s.insert("podIPs".into(), json!([{"ip": single}]));
    }
    if let Some(first) = s.get("podIPs").and_then(|l| l.pointer("/0/ip")).cloned() {
        s.insert("podIP".into(), first);
    }
}

/// `SetDefaults_ObjectFieldSelector`.
fn field_selector(f: &mut Obj) {
    or_unset(f, "apiVersion", json!("v1"));
}

/// `SetDefaults_LimitRangeItem`: a `Container` item's default limits are its max, its default
/// requests its default limits, else its min.
fn limit_range_item(item: &mut Obj) {
    if text(item, "type") != "Container" {
        return;
    }
    for (from, to) in [
        ("max", "default"),
        ("default", "defaultRequest"),
        ("min", "defaultRequest"),
    ] {
        let source = item.get(from).and_then(Value::as_object).cloned();
        let target = child(item, to);
        for (k, v) in source.into_iter().flatten() {
            target.entry(k).or_insert(v);
        }
    }
}

/// `SetDefaults_ConfigMap`: `data` is an empty map (which is not written back).
fn config_map(_: &mut Obj) {}

/// `SetDefaults_HostPathVolumeSource`: `type` is `""` (`v1.HostPathUnset`), set.
fn host_path(h: &mut Obj) {
    or_nil(h, "type", json!(""));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag_as_kubernetes_parses_it() {
        assert_eq!(pull_policy("busybox"), "Always");
        assert_eq!(pull_policy("busybox:latest"), "Always");
        assert_eq!(pull_policy("localhost:5000/busybox"), "Always");
        assert_eq!(pull_policy("localhost:5000/busybox:1.36"), "IfNotPresent");
        assert_eq!(
            pull_policy(
                "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
            ),
            "IfNotPresent"
        );
        assert_eq!(pull_policy("Busybox"), "IfNotPresent");
        assert_eq!(pull_policy(""), "IfNotPresent");
        assert_eq!(pull_policy("registry.k8s.io/pause:3.10"), "IfNotPresent");
    }

    #[test]
    fn the_core_prefix_names_core_types() {
        assert!(
            DEFAULTERS
                .iter()
                .all(|(n, _)| n.starts_with("io.k8s.api.core.v1."))
        );
    }
}
