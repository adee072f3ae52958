//! Defaulting of the common built-ins, as kube-apiserver does it.
//!
//! Two steps, because kube-apiserver does them at two moments: [`apply`] fills the defaults
//! while a request is decoded (so the writer's field manager owns them), and [`on_create`]
//! sets what the server itself decides when the object is first stored (owned by no one): a
//! Pod's initial status, a Service's cluster IP, a Job's generated selector.
//!
//! Covered: Pod (`restartPolicy`, `dnsPolicy`, `terminationGracePeriodSeconds`,
//! `schedulerName`, `securityContext`, `enableServiceLinks`, containers'
//! `terminationMessagePath`/`Policy`, `imagePullPolicy`, `resources`, and the same inside a
//! Job's template), Service (`type`, `sessionAffinity`, ports' `protocol` and `targetPort`,
//! IP families, `internalTrafficPolicy`; a cluster IP from `10.96.0.0/12`, node ports from
//! `30000-32767`), Job
//! (`completions`, `parallelism`, `backoffLimit`, `completionMode`, `suspend`, the
//! controller-uid selector and labels).

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use super::ApiError;
use super::meta::{name_of, uid_of};
use super::registry::{Special, TypeInfo};
use super::state::Store;

/// The first address of the emulated service range (`10.96.0.0/12`); `.1` is the
/// `kubernetes` Service's.
const SERVICE_NET: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 0);
/// How many addresses the service range holds.
const SERVICE_NET_SIZE: u32 = 1 << 20;

/// The defaults filled while a request is decoded; 422 for shapes kube-apiserver refuses.
pub(crate) fn apply(info: &TypeInfo, obj: &mut Value) -> Result<(), ApiError> {
    match info.special {
        Special::Pod => {
            let name = name_of(obj).to_string();
            let spec = object_at(obj, "spec");
            if spec
                .get("containers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                return Err(ApiError::invalid(
                    "Pod",
                    &name,
                    "spec.containers: Required value",
                ));
            }
            pod_spec(spec);
            requests_from_limits(spec);
            spec.entry("enableServiceLinks").or_insert(json!(true));
        }
        Special::Service => service(obj),
        Special::Job => {
            let spec = object_at(obj, "spec");
            for (field, value) in [
                ("parallelism", json!(1)),
                ("completions", json!(1)),
                ("backoffLimit", json!(6)),
                ("completionMode", json!("NonIndexed")),
                ("suspend", json!(false)),
                ("manualSelector", json!(false)),
                ("podReplacementPolicy", json!("TerminatingOrFailed")),
            ] {
                spec.entry(field).or_insert(value);
            }
            let template = object_at_map(spec, "template");
            pod_spec(object_at_map(template, "spec"));
        }
        Special::None if !info.rt.custom => by_table(&info.rt.kind, obj),
        _ => {}
    }
    Ok(())
}

/// The tolerations kube-apiserver's `DefaultTolerationSeconds` admission gives every Pod.
const DEFAULT_TOLERATIONS: [(&str, &str); 2] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
];

/// Where a kind keeps a Pod template's spec, and the defaults of its own fields: JSON
/// pointers and values, each filled when absent (a pointer's parents are made as needed).
fn table(kind: &str) -> (Option<&'static str>, Vec<(&'static str, Value)>) {
    match kind {
        "Deployment" => (
            Some("/spec/template/spec"),
            vec![
                ("/spec/replicas", json!(1)),
                ("/spec/revisionHistoryLimit", json!(10)),
                ("/spec/progressDeadlineSeconds", json!(600)),
                ("/spec/strategy/type", json!("RollingUpdate")),
            ],
        ),
        "ReplicaSet" | "ReplicationController" => (
            Some("/spec/template/spec"),
            vec![("/spec/replicas", json!(1))],
        ),
        "StatefulSet" => (
            Some("/spec/template/spec"),
            vec![
                ("/spec/replicas", json!(1)),
                ("/spec/podManagementPolicy", json!("OrderedReady")),
                ("/spec/revisionHistoryLimit", json!(10)),
                ("/spec/serviceName", json!("")),
                ("/spec/updateStrategy/type", json!("RollingUpdate")),
                (
                    "/spec/persistentVolumeClaimRetentionPolicy",
                    json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
                ),
            ],
        ),
        "DaemonSet" => (
            Some("/spec/template/spec"),
            vec![
                ("/spec/revisionHistoryLimit", json!(10)),
                ("/spec/updateStrategy/type", json!("RollingUpdate")),
            ],
        ),
        "CronJob" => (
            Some("/spec/jobTemplate/spec/template/spec"),
            vec![
                ("/spec/concurrencyPolicy", json!("Allow")),
                ("/spec/suspend", json!(false)),
                ("/spec/successfulJobsHistoryLimit", json!(3)),
                ("/spec/failedJobsHistoryLimit", json!(1)),
                ("/spec/jobTemplate/metadata", json!({})),
                ("/spec/jobTemplate/spec/template/metadata", json!({})),
            ],
        ),
        "PodTemplate" => (Some("/template/spec"), vec![]),
        "PersistentVolumeClaim" => (None, vec![("/spec/volumeMode", json!("Filesystem"))]),
        "PersistentVolume" => (
            None,
            vec![
                ("/spec/persistentVolumeReclaimPolicy", json!("Retain")),
                ("/spec/volumeMode", json!("Filesystem")),
            ],
        ),
        "PriorityClass" => (
            None,
            vec![("/preemptionPolicy", json!("PreemptLowerPriority"))],
        ),
        "StorageClass" => (
            None,
            vec![
                ("/reclaimPolicy", json!("Delete")),
                ("/volumeBindingMode", json!("Immediate")),
            ],
        ),
        "HorizontalPodAutoscaler" => (
            None,
            vec![
                ("/spec/minReplicas", json!(1)),
                (
                    "/spec/metrics",
                    json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
                ),
            ],
        ),
        "NetworkPolicy" => (None, vec![("/spec/policyTypes", json!(["Ingress"]))]),
        _ => (None, vec![]),
    }
}

/// The defaults of [`table`], and those inside lists: Endpoints ports' protocol, an
/// EndpointSlice endpoint's conditions, a LimitRange's default limits and requests.
fn by_table(kind: &str, obj: &mut Value) {
    let (template, fields) = table(kind);
    for (ptr, value) in fields {
        fill(obj, ptr, value);
    }
    if let Some(ptr) = template
        && let Some(Value::Object(spec)) = obj.pointer_mut(ptr)
    {
        pod_spec(spec);
    }
    let rolling = match kind {
        "Deployment" => Some((
            "strategy",
            json!({"maxUnavailable": "25%", "maxSurge": "25%"}),
        )),
        "StatefulSet" => Some(("updateStrategy", json!({"partition": 0}))),
        "DaemonSet" => Some((
            "updateStrategy",
            json!({"maxUnavailable": 1, "maxSurge": 0}),
        )),
        _ => None,
    };
    if let Some((field, value)) = rolling
        && obj["spec"][field]["type"] == "RollingUpdate"
    {
        fill(&mut obj["spec"][field], "/rollingUpdate", value);
    }
    match kind {
        "PersistentVolume" if obj["spec"]["hostPath"].is_object() => {
            fill(&mut obj["spec"]["hostPath"], "/type", json!(""));
        }
        "Node" => {
            // A Node's spec is a Go struct: `{}` when empty, never left out.
            if !obj["spec"].is_object() {
                obj["spec"] = json!({});
            }
            // kube-apiserver keeps only `podCIDRs`; `podCIDR` is its first item.
            let cidr = obj["spec"]["podCIDR"].clone();
            if cidr.is_string() {
                fill(obj, "/spec/podCIDRs", json!([cidr]));
            }
            let first = obj["spec"]["podCIDRs"][0].clone();
            if first.is_string() {
                obj["spec"]["podCIDR"] = first;
            }
            // `unschedulable` is an `omitempty` bool: `false` is not stored.
            if obj["spec"]["unschedulable"] == false
                && let Some(spec) = obj["spec"].as_object_mut()
            {
                spec.remove("unschedulable");
            }
            let capacity = obj["status"]["capacity"].clone();
            if capacity.is_object() {
                fill(obj, "/status/allocatable", capacity);
            }
        }
        "Endpoints" => {
            for subset in obj["subsets"].as_array_mut().into_iter().flatten() {
                for port in subset["ports"].as_array_mut().into_iter().flatten() {
                    fill(port, "/protocol", json!("TCP"));
                }
            }
        }
        "EndpointSlice" => {
            for endpoint in obj["endpoints"].as_array_mut().into_iter().flatten() {
                fill(endpoint, "/conditions", json!({}));
            }
        }
        "LimitRange" => {
            for limit in obj["spec"]["limits"].as_array_mut().into_iter().flatten() {
                if limit["type"] != "Container" {
                    continue;
                }
                // Key by key: a missing default limit is the max, a missing default request
                // the default limit, else the min.
                for (from, to) in [
                    ("max", "default"),
                    ("default", "defaultRequest"),
                    ("min", "defaultRequest"),
                ] {
                    let Some(source) = limit[from].as_object().cloned().filter(|m| !m.is_empty())
                    else {
                        continue;
                    };
                    if !limit[to].is_object() {
                        limit[to] = json!({});
                    }
                    if let Some(target) = limit[to].as_object_mut() {
                        for (k, v) in source {
                            target.entry(k).or_insert(v);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// Sets the value at JSON pointer `ptr` if nothing is there, making parent objects.
fn fill(obj: &mut Value, ptr: &str, value: Value) {
    let mut at = obj;
    let mut parts = ptr.split('/').skip(1).peekable();
    while let Some(part) = parts.next() {
        if !at.is_object() {
            if !at.is_null() {
                return;
            }
            *at = json!({});
        }
        let Some(map) = at.as_object_mut() else {
            return;
        };
        if parts.peek().is_none() {
            match map.get(part) {
                Some(v) if !v.is_null() => {}
                _ => {
                    map.insert(part.to_string(), value);
                }
            }
            return;
        }
        at = map.entry(part.to_string()).or_insert(Value::Null);
    }
}

/// The status kube-apiserver gives a new object of a kind (as its registry's strategy or the
/// type's zero value does), and the finalizers its admission adds.
fn initial(kind: &str) -> Option<(Value, &'static str)> {
    Some(match kind {
        "Deployment" | "ResourceQuota" | "CronJob" | "CertificateSigningRequest" => (json!({}), ""),
        "ReplicaSet" | "ReplicationController" => (json!({"replicas": 0}), ""),
        "StatefulSet" => (json!({"availableReplicas": 0, "replicas": 0}), ""),
        "DaemonSet" => (
            json!({"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}),
            "",
        ),
        "PodDisruptionBudget" => (
            json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}),
            "",
        ),
        "Ingress" => (json!({"loadBalancer": {}}), ""),
        "HorizontalPodAutoscaler" => (json!({"currentMetrics": null, "desiredReplicas": 0}), ""),
        "PersistentVolumeClaim" => (json!({"phase": "Pending"}), "kubernetes.io/pvc-protection"),
        "PersistentVolume" => (
            json!({"lastPhaseTransitionTime": super::meta::now(), "phase": "Pending"}),
            "kubernetes.io/pv-protection",
        ),
        _ => return None,
    })
}

/// What the server sets when it first stores the object.
pub(crate) fn on_create(store: &Store, info: &TypeInfo, obj: &mut Value) {
    match info.special {
        Special::Pod => {
            pod_admission(obj, None);
            let qos = qos_class(&obj["spec"]);
            if let Some(map) = obj.as_object_mut() {
                map.insert(
                    "status".into(),
                    json!({"phase": "Pending", "qosClass": qos}),
                );
            }
        }
        Special::Service => {
            allocate_cluster_ip(store, obj);
            if let Some(map) = obj.as_object_mut() {
                map.insert("status".into(), json!({"loadBalancer": {}}));
            }
        }
        Special::Job => {
            if let Some(map) = obj.as_object_mut() {
                map.insert("status".into(), json!({}));
            }
            let uid = uid_of(obj).to_string();
            let name = name_of(obj).to_string();
            let manual = obj["spec"]["manualSelector"].as_bool() == Some(true);
            if manual {
                return;
            }
            let generated = [
                ("batch.kubernetes.io/controller-uid", uid.clone()),
                ("batch.kubernetes.io/job-name", name.clone()),
                ("controller-uid", uid.clone()),
                ("job-name", name),
            ];
            let spec = object_at(obj, "spec");
            if spec.get("selector").is_none_or(Value::is_null) {
                spec.insert(
                    "selector".into(),
                    json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
                );
            }
            let template = object_at_map(spec, "template");
            let labels = object_at_map(object_at_map(template, "metadata"), "labels");
            for (k, v) in &generated {
                labels.entry(k.to_string()).or_insert(json!(v));
            }
            let template_labels = Value::Object(labels.clone());
            let meta = object_at(obj, "metadata");
            if meta
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
            {
                meta.insert("labels".into(), template_labels);
            }
        }
        Special::None if !info.rt.custom && info.rt.kind == "Node" => {
            // The `TaintNodesByCondition` admission plugin: a new Node is not ready yet.
            let spec = object_at(obj, "spec");
            let taints = spec.entry("taints").or_insert(json!([]));
            if let Some(list) = taints.as_array_mut()
                && !list
                    .iter()
                    .any(|t| t["key"] == "node.kubernetes.io/not-ready")
            {
                list.push(json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}));
            }
        }
        Special::None if !info.rt.custom && initial(&info.rt.kind).is_some() => {
            let Some((status, finalizer)) = initial(&info.rt.kind) else {
                return;
            };
            if let Some(map) = obj.as_object_mut() {
                map.insert("status".into(), status);
            }
            if info.rt.kind == "CertificateSigningRequest" {
                // Who asked, from the request's user (the emulator's one user).
                let spec = object_at(obj, "spec");
                let user = super::answered::USER;
                spec.insert("username".into(), json!(user));
                spec.insert("uid".into(), json!(user));
                spec.insert("groups".into(), json!(super::answered::GROUPS));
            }
            if !finalizer.is_empty() {
                let meta = object_at(obj, "metadata");
                let list = meta.entry("finalizers").or_insert(json!([]));
                if let Some(list) = list.as_array_mut()
                    && !list.iter().any(|f| f == finalizer)
                {
                    list.push(json!(finalizer));
                }
            }
        }
        Special::None
            if !info.rt.custom
                && info.rt.kind == "APIService"
                && obj["spec"]["service"].is_null() =>
        {
            // A local APIService is served by this server, hence available.
            if let Some(map) = obj.as_object_mut() {
                map.insert(
                    "status".into(),
                    super::bootstrap::local_api_service_status(),
                );
            }
        }
        _ => {}
    }
}

/// What the `Priority` and `DefaultTolerationSeconds` admission plugins set on a Pod's
/// create and update (an update keeps the priority the create gave).
fn pod_admission(obj: &mut Value, old: Option<&Value>) {
    let spec = object_at(obj, "spec");
    for (field, value) in [
        ("priority", json!(0)),
        ("preemptionPolicy", json!("PreemptLowerPriority")),
    ] {
        let kept = old.and_then(|o| o["spec"].get(field)).cloned();
        spec.entry(field).or_insert(kept.unwrap_or(value));
    }
    let tolerations = spec.entry("tolerations").or_insert(json!([]));
    if let Some(list) = tolerations.as_array_mut() {
        for (key, effect) in DEFAULT_TOLERATIONS {
            if !list
                .iter()
                .any(|t| t["key"] == key && t["effect"] == effect)
            {
                list.push(json!({"key": key, "operator": "Exists", "effect": effect, "tolerationSeconds": 300}));
            }
        }
    }
}

/// What the server's admission sets on an update of the main resource (owned by no one).
pub(crate) fn on_update(info: &TypeInfo, obj: &mut Value, old: &Value) {
    if info.special == Special::Pod {
        pod_admission(obj, Some(old));
    }
}

/// The defaults of a Pod's spec (also a template's).
fn pod_spec(spec: &mut Map<String, Value>) {
    for (field, value) in [
        ("restartPolicy", json!("Always")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
    ] {
        spec.entry(field).or_insert(value);
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            container(c);
        }
    }
}

/// A Pod's containers (not a template's) request what they limit unless they say otherwise.
fn requests_from_limits(spec: &mut Map<String, Value>) {
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(limits) = c["resources"]["limits"].as_object().cloned() else {
                continue;
            };
            if limits.is_empty() {
                continue;
            }
            let resources = &mut c["resources"];
            if !resources["requests"].is_object() {
                resources["requests"] = json!({});
            }
            if let Some(requests) = resources["requests"].as_object_mut() {
                for (k, v) in limits {
                    requests.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// The defaults of a container.
fn container(c: &mut Value) {
    let pull = match c["image"].as_str() {
        Some(image) if !latest(image) => "IfNotPresent",
        _ => "Always",
    };
    let Some(map) = c.as_object_mut() else {
        return;
    };
    map.entry("terminationMessagePath")
        .or_insert(json!("/dev/termination-log"));
    map.entry("terminationMessagePolicy")
        .or_insert(json!("File"));
    map.entry("imagePullPolicy").or_insert(json!(pull));
    let resources = map.entry("resources").or_insert(json!({}));
    // Empty requests and limits are left out, as kube-apiserver encodes them.
    if let Some(resources) = resources.as_object_mut() {
        resources.retain(|k, v| {
            !(matches!(k.as_str(), "requests" | "limits")
                && v.as_object().is_some_and(Map::is_empty))
        });
    }
    for port in map
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(port) = port.as_object_mut() {
            port.entry("protocol").or_insert(json!("TCP"));
        }
    }
}

/// Whether an image reference pulls `latest` (no tag, or the tag `latest`, and no digest).
fn latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// The QoS class of a Pod from its containers' requests and limits.
pub(crate) fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .flat_map(|l| spec[*l].as_array().into_iter().flatten())
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = c["resources"]["requests"].as_object();
        let limits = c["resources"]["limits"].as_object();
        any |= requests.is_some_and(|r| !r.is_empty()) || limits.is_some_and(|l| !l.is_empty());
        for resource in ["cpu", "memory"] {
            let limit = limits.and_then(|l| l.get(resource));
            let request = requests.and_then(|r| r.get(resource)).or(limit);
            if limit.is_none() || request != limit {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// The defaults of a Service.
fn service(obj: &mut Value) {
    let spec = object_at(obj, "spec");
    spec.entry("type").or_insert(json!("ClusterIP"));
    let kind = spec["type"].as_str().unwrap_or_default().to_string();
    if kind != "ExternalName" {
        spec.entry("sessionAffinity").or_insert(json!("None"));
        if spec["sessionAffinity"] == "None" {
            spec.remove("sessionAffinityConfig");
        } else if spec["sessionAffinity"] == "ClientIP" {
            let config = object_at_map(spec, "sessionAffinityConfig");
            let client = object_at_map(config, "clientIP");
            client.entry("timeoutSeconds").or_insert(json!(10800));
        }
        spec.entry("internalTrafficPolicy")
            .or_insert(json!("Cluster"));
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        spec.entry("externalTrafficPolicy")
            .or_insert(json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        spec.entry("allocateLoadBalancerNodePorts")
            .or_insert(json!(true));
    }
    for port in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let number = port["port"].clone();
        if let Some(port) = port.as_object_mut() {
            port.entry("protocol").or_insert(json!("TCP"));
            port.entry("targetPort").or_insert(number);
        }
    }
}

/// Gives a `ClusterIP`, `NodePort` or `LoadBalancer` Service without one the lowest free
/// address of the service range, with its IP family fields.
fn allocate_cluster_ip(store: &Store, obj: &mut Value) {
    let kind = obj["spec"]["type"]
        .as_str()
        .unwrap_or("ClusterIP")
        .to_string();
    if kind == "ExternalName" {
        return;
    }
    let requested = obj["spec"]["clusterIP"].as_str().unwrap_or_default();
    let ip = if requested.is_empty() {
        let used: HashSet<&str> = store
            .objects
            .get("services")
            .into_iter()
            .flat_map(|all| all.values())
            .filter_map(|svc| svc["spec"]["clusterIP"].as_str())
            .collect();
        let base = u32::from(SERVICE_NET);
        let free = (1..SERVICE_NET_SIZE - 1)
            .map(|i| Ipv4Addr::from(base + i).to_string())
            .find(|ip| !used.contains(ip.as_str()));
        let Some(free) = free else {
            return;
        };
        free
    } else {
        requested.to_string()
    };
    let headless = ip == "None";
    if kind == "NodePort"
        || (kind == "LoadBalancer"
            && obj["spec"]["allocateLoadBalancerNodePorts"].as_bool() != Some(false))
    {
        allocate_node_ports(store, obj);
    }
    let spec = object_at(obj, "spec");
    spec.insert("clusterIP".into(), json!(ip));
    spec.entry("clusterIPs").or_insert(json!([ip]));
    if !headless || spec.contains_key("selector") {
        spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
        spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
    }
}

/// The node ports Services get (kube-apiserver's default range).
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

/// Gives each port of a `NodePort` or `LoadBalancer` Service without a `nodePort` the lowest
/// one no Service of the cluster uses.
fn allocate_node_ports(store: &Store, obj: &mut Value) {
    let mut used: HashSet<i64> = store
        .objects
        .get("services")
        .into_iter()
        .flat_map(|all| all.values())
        .flat_map(|svc| svc["spec"]["ports"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["nodePort"].as_i64())
        .collect();
    for port in obj["spec"]["ports"].as_array_mut().into_iter().flatten() {
        if let Some(taken) = port["nodePort"].as_i64() {
            used.insert(taken);
            continue;
        }
        if let Some(free) = NODE_PORTS.clone().find(|p| !used.contains(p)) {
            used.insert(free);
            port["nodePort"] = json!(free);
        }
    }
}

/// The object at `obj[field]`, made an object if it is not one.
fn object_at<'a>(obj: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    match obj {
        Value::Object(map) => object_at_map(map, field),
        _ => unreachable!("made an object above"),
    }
}

/// The object at `map[field]`, made an object if it is not one.
fn object_at_map<'a>(map: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    let slot = map.entry(field).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    match slot {
        Value::Object(inner) => inner,
        _ => unreachable!("made an object above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_pull_policy_follows_the_tag() {
        assert!(latest("busybox"));
        assert!(latest("busybox:latest"));
        assert!(latest("localhost:5000/busybox"));
        assert!(!latest("localhost:5000/busybox:1.36"));
        assert!(!latest("busybox@sha256:abc"));
    }

    #[test]
    fn qos_classes() {
        let none = json!({"containers": [{"name": "a"}]});
        assert_eq!(qos_class(&none), "BestEffort");
        let equal =
            json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&equal), "Guaranteed");
        let some = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(&some), "Burstable");
    }
}
