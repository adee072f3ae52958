//! kube-apiserver's APIService availability controller, converged on every change of an
//! APIService, a Service or an EndpointSlice: an APIService served locally is `Available`;
//! one backed by a Service is not, and says why, as kube-apiserver says it when nothing
//! answers behind the Service (no controller-manager fills EndpointSlices, no Pod runs):
//! the Service is missing, it has no EndpointSlices, or they have no address for its port.
//! The status is written by `kube-apiserver` (a status `Update` in `managedFields`); its
//! transition time moves only when the condition's status does.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::{meta_mut, now};
use super::state::{ResKey, Store};

/// The storage key of APIServices.
const APISERVICES: &str = "apiservices.apiregistration.k8s.io";
/// The storage key of EndpointSlices.
const SLICES: &str = "endpointslices.discovery.k8s.io";

/// The `Available` condition of an APIService now (without its transition time).
fn available(store: &Store, apiservice: &Value) -> Value {
    let service = &apiservice["spec"]["service"];
    if service.is_null() {
        return json!({"type": "Available", "status": "True", "reason": "Local",
            "message": "Local APIServices are always available"});
    }
    let ns = service["namespace"].as_str().unwrap_or_default();
    let name = service["name"].as_str().unwrap_or_default();
    let unavailable = |reason: &str, message: String| json!({"type": "Available", "status": "False", "reason": reason, "message": message});
    let Some(svc) = store.peek("services", &(ns.to_string(), name.to_string())) else {
        return unavailable(
            "ServiceNotFound",
            format!("service/{name} in {ns:?} is not present"),
        );
    };
    let slices: Vec<&Arc<Value>> = store
        .objects
        .get(SLICES)
        .into_iter()
        .flat_map(|all| all.values())
        .filter(|s| {
            s["metadata"]["namespace"] == ns
                && s["metadata"]["labels"]["kubernetes.io/service-name"] == name
        })
        .collect();
    if slices.is_empty() {
        return unavailable(
            "EndpointsNotFound",
            format!("cannot find endpointslices for service/{name} in {ns:?}"),
        );
    }
    let port = service["port"].as_i64().unwrap_or(443);
    let port_name = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_i64() == Some(port))
        .and_then(|p| p["name"].as_str())
        .unwrap_or_default()
        .to_string();
    unavailable(
        "MissingEndpoints",
        format!(
            "endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"
        ),
    )
}

/// Sets the APIService's status as the controller would now; whether it changed. The status
/// of an APIService backed by a Service is recorded as `kube-apiserver`'s (a local one's
/// is written with it, as kube-apiserver registers them).
pub(crate) fn converge(store: &Store, apiservice: &mut Value) -> bool {
    let mut condition = available(store, apiservice);
    let old = apiservice["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .cloned();
    let time = match &old {
        Some(o) if o["status"] == condition["status"] => o["lastTransitionTime"].clone(),
        _ => json!(now()),
    };
    condition["lastTransitionTime"] = time;
    if old.as_ref() == Some(&condition) {
        return false;
    }
    let status = json!({"conditions": [condition]});
    if apiservice["spec"]["service"].is_null() {
        apiservice["status"] = status;
        return true;
    }
    let schema = super::schema::builtin("apiregistration.k8s.io", "v1", "APIService");
    let entry = super::managed::created_entry(
        &json!({"status": status}),
        &schema,
        Some("kube-apiserver"),
        "apiregistration.k8s.io/v1",
        "status",
    );
    apiservice["status"] = status;
    let meta = meta_mut(apiservice);
    let entries = meta.entry("managedFields").or_insert_with(|| json!([]));
    if let Some(list) = entries.as_array_mut() {
        list.retain(|e| !(e["manager"] == "kube-apiserver" && e["subresource"] == "status"));
        list.insert(0, entry);
    }
    true
}

/// After a Service or EndpointSlice in `namespace` changed: converges every APIService
/// backed by a Service there (stored again when its status changes).
pub(crate) fn after_change(store: &mut Store, res: &str, namespace: &str) {
    if res != "services" && res != SLICES {
        return;
    }
    let key: ResKey = Arc::from(APISERVICES);
    let backed: Vec<Arc<Value>> = store
        .objects
        .get(&key)
        .into_iter()
        .flat_map(|all| all.values())
        .filter(|a| a["spec"]["service"]["namespace"] == namespace)
        .cloned()
        .collect();
    for apiservice in backed {
        let mut updated = (*apiservice).clone();
        if converge(store, &mut updated) {
            store.put(&key, updated);
        }
    }
}
