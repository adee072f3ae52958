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
                ("manualSelector", Value::Null),
            ] {
                if !value.is_null() {
                    spec.entry(field).or_insert(value);
                }
            }
            let template = object_at_map(spec, "template");
            pod_spec(object_at_map(template, "spec"));
        }
        _ => {}
    }
    Ok(())
}

/// What the server sets when it first stores the object.
pub(crate) fn on_create(store: &Store, info: &TypeInfo, obj: &mut Value) {
    match info.special {
        Special::Pod => {
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

/// The defaults of a Pod's spec (also a template's).
fn pod_spec(spec: &mut Map<String, Value>) {
    for (field, value) in [
        ("restartPolicy", json!("Always")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
        ("enableServiceLinks", json!(true)),
    ] {
        spec.entry(field).or_insert(value);
    }
    for list in ["initContainers", "containers"] {
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
    map.entry("resources").or_insert(json!({}));
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
