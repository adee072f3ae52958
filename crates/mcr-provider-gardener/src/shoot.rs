//! Reading a Shoot: readiness, hibernation, deletion, advertised addresses.

use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

/// `core.gardener.cloud/v1beta1` `Shoot`.
pub(crate) fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("core.gardener.cloud", "v1beta1", "Shoot"),
        "shoots",
    )
}

/// Ready as Gardener's own provider decides: `status.lastOperation` is set, and it is not a
/// `Create` that has yet to succeed.
pub(crate) fn is_ready(shoot: &DynamicObject) -> bool {
    let Some(op) = shoot.data.pointer("/status/lastOperation") else {
        return false;
    };
    if op.is_null() {
        return false;
    }
    let field = |f: &str| op.get(f).and_then(Value::as_str);
    field("type") != Some("Create") || field("state") == Some("Succeeded")
}

/// `status.hibernated`.
pub(crate) fn is_hibernated(shoot: &DynamicObject) -> bool {
    shoot
        .data
        .pointer("/status/hibernated")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The URL of the advertised address named `name`.
pub(crate) fn address(shoot: &DynamicObject, name: &str) -> Option<String> {
    shoot
        .data
        .pointer("/status/advertisedAddresses")?
        .as_array()?
        .iter()
        .find(|a| a.get("name").and_then(Value::as_str) == Some(name))?
        .get("url")?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shoot(status: Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "a", "namespace": "garden-dev"}, "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn readiness_follows_gardener() {
        assert!(!is_ready(&shoot(serde_json::json!({}))));
        let op =
            |t: &str, s: &str| shoot(serde_json::json!({"lastOperation": {"type": t, "state": s}}));
        assert!(!is_ready(&op("Create", "Processing")));
        assert!(is_ready(&op("Create", "Succeeded")));
        assert!(is_ready(&op("Reconcile", "Processing")));
        assert!(is_ready(&op("Reconcile", "Failed")));
    }

    #[test]
    fn hibernation_and_addresses() {
        let s = shoot(
            serde_json::json!({"hibernated": true, "advertisedAddresses": [
            {"name": "external", "url": "https://e"}, {"name": "internal", "url": "https://i"}]}),
        );
        assert!(is_hibernated(&s));
        assert_eq!(address(&s, "internal").as_deref(), Some("https://i"));
        assert_eq!(address(&s, "nope"), None);
    }
}
