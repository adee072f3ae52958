//! What the server sets itself when it stores an object, owned by no one: the registry
//! strategies' and admission plugins' values (a Pod's initial status and QoS class, its
//! priority and default tolerations, a Service's cluster IP and node ports, a Job's generated
//! selector and labels, a new Node's not-ready taint, the protection finalizers of volumes
//! and claims, a CSR's requester).

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use crate::engine::meta::{name_of, uid_of};
use crate::engine::registry::{Special, TypeInfo};
use crate::engine::state::Store;

/// The first address of the emulated service range (`10.96.0.0/12`); `.1` is the
/// `kubernetes` Service's.
const SERVICE_NET: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 0);
/// How many addresses the service range holds.
const SERVICE_NET_SIZE: u32 = 1 << 20;

/// The tolerations kube-apiserver's `DefaultTolerationSeconds` admission gives every Pod.
const DEFAULT_TOLERATIONS: [(&str, &str); 2] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
];

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
            json!({"lastPhaseTransitionTime": crate::engine::meta::now(), "phase": "Pending"}),
            "kubernetes.io/pv-protection",
        ),
        _ => return None,
    })
}

/// What the server sets when it first stores the object.
pub(crate) fn on_create(store: &Store, info: &TypeInfo, obj: &mut Value) {
    if !info.rt.custom && info.rt.group == "networking.k8s.io" && info.rt.kind == "Ingress" {
        default_ingress_class(store, obj);
    }
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
            health_check_node_port(store, obj);
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
                let user = crate::engine::answered::USER;
                spec.insert("username".into(), json!(user));
                spec.insert("uid".into(), json!(user));
                spec.insert("groups".into(), json!(crate::engine::answered::GROUPS));
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
        Special::None if !info.rt.custom && info.rt.kind == "APIService" => {
            crate::engine::apiservice::converge(store, obj);
        }
        _ => {}
    }
}

/// The `DefaultIngressClass` admission plugin: a new Ingress that names no class (neither
/// `spec.ingressClassName` nor the `kubernetes.io/ingress.class` annotation) gets the
/// default IngressClass, the newest when several are marked (then by name).
fn default_ingress_class(store: &Store, obj: &mut Value) {
    let named = !obj["spec"]["ingressClassName"].is_null()
        || obj["metadata"]["annotations"]["kubernetes.io/ingress.class"].is_string();
    if named {
        return;
    }
    let mut defaults: Vec<(&str, &str)> = store
        .objects
        .get("ingressclasses.networking.k8s.io")
        .into_iter()
        .flat_map(|all| all.values())
        .filter(|c| {
            c["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"] == "true"
        })
        .map(|c| {
            (
                c["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default(),
                c["metadata"]["name"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    // Newest first (RFC 3339 times of one server compare as text), then by name.
    defaults.sort_by(|a, b| b.0.cmp(a.0).then(a.1.cmp(b.1)));
    if let Some((_, name)) = defaults.first() {
        let name = name.to_string();
        object_at(obj, "spec").insert("ingressClassName".into(), json!(name));
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
pub(crate) fn on_update(store: &Store, info: &TypeInfo, obj: &mut Value, old: &Value) {
    match info.special {
        Special::Pod => pod_admission(obj, Some(old)),
        Special::Service => health_check_node_port(store, obj),
        _ => {}
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
    let mut used = used_node_ports(store);
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

/// Every node port the cluster's Services hold: their ports' and health checks'.
fn used_node_ports(store: &Store) -> HashSet<i64> {
    let services = store
        .objects
        .get("services")
        .into_iter()
        .flat_map(|all| all.values());
    let mut used = HashSet::new();
    for svc in services {
        used.extend(
            svc["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["nodePort"].as_i64()),
        );
        used.extend(svc["spec"]["healthCheckNodePort"].as_i64());
    }
    used
}

/// A `LoadBalancer` Service with `externalTrafficPolicy: Local` gets a health check node
/// port (`service.NeedsHealthCheck`), the lowest free one unless it names its own; any other
/// Service has none.
pub(crate) fn health_check_node_port(store: &Store, obj: &mut Value) {
    let spec = &obj["spec"];
    let needed = spec["type"] == "LoadBalancer" && spec["externalTrafficPolicy"] == "Local";
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if !needed {
        spec.remove("healthCheckNodePort");
        return;
    }
    if spec
        .get("healthCheckNodePort")
        .and_then(Value::as_i64)
        .is_some()
    {
        return;
    }
    let mut used = used_node_ports(store);
    used.extend(
        spec.get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p["nodePort"].as_i64()),
    );
    if let Some(free) = NODE_PORTS.clone().find(|p| !used.contains(p)) {
        spec.insert("healthCheckNodePort".into(), json!(free));
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
