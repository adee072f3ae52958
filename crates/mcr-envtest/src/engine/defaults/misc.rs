//! The smaller groups, each from its `pkg/apis/<group>/v1/defaults.go` of Kubernetes v1.36:
//! rbac, storage, scheduling, discovery, flowcontrol, authentication and resource.

use serde_json::json;

use super::{Defaulters, Obj, child, or_nil, or_unset, text, unset};

pub(super) const DEFAULTERS: Defaulters = &[
    ("io.k8s.api.rbac.v1.ClusterRoleBinding", role_binding),
    ("io.k8s.api.rbac.v1.RoleBinding", role_binding),
    ("io.k8s.api.rbac.v1.Subject", subject),
    ("io.k8s.api.storage.v1.StorageClass", storage_class),
    ("io.k8s.api.storage.v1.CSIDriver", csi_driver),
    ("io.k8s.api.scheduling.v1.PriorityClass", priority_class),
    ("io.k8s.api.discovery.v1.EndpointPort", endpoint_port),
    ("io.k8s.api.flowcontrol.v1.FlowSchemaSpec", flow_schema_spec),
    (
        "io.k8s.api.flowcontrol.v1.ExemptPriorityLevelConfiguration",
        exempt_priority_level,
    ),
    (
        "io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration",
        limited_priority_level,
    ),
    ("io.k8s.api.flowcontrol.v1.QueuingConfiguration", queuing),
    (
        "io.k8s.api.authentication.v1.TokenRequestSpec",
        token_request_spec,
    ),
    ("io.k8s.api.resource.v1.ExactDeviceRequest", device_request),
    ("io.k8s.api.resource.v1.DeviceSubRequest", device_request),
    ("io.k8s.api.resource.v1.DeviceTaint", device_taint),
];

/// rbac `SetDefaults_ClusterRoleBinding`, `SetDefaults_RoleBinding`.
fn role_binding(b: &mut Obj) {
    or_unset(
        child(b, "roleRef"),
        "apiGroup",
        json!("rbac.authorization.k8s.io"),
    );
}

/// rbac `SetDefaults_Subject`: users and groups are of the rbac group.
fn subject(s: &mut Obj) {
    if unset(s, "apiGroup") && matches!(text(s, "kind"), "User" | "Group") {
        s.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
    }
}

/// storage `SetDefaults_StorageClass`.
fn storage_class(c: &mut Obj) {
    or_nil(c, "reclaimPolicy", json!("Delete"));
    or_nil(c, "volumeBindingMode", json!("Immediate"));
}

/// storage `SetDefaults_CSIDriver` (`SELinuxMountReadWriteOncePod` is on in v1.36,
/// `VolumeLimitScaling` off).
fn csi_driver(d: &mut Obj) {
    let spec = child(d, "spec");
    or_nil(spec, "attachRequired", json!(true));
    or_nil(spec, "podInfoOnMount", json!(false));
    or_nil(spec, "storageCapacity", json!(false));
    or_nil(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
    or_unset(spec, "volumeLifecycleModes", json!(["Persistent"]));
    or_nil(spec, "requiresRepublish", json!(false));
    or_nil(spec, "seLinuxMount", json!(false));
}

/// scheduling `SetDefaults_PriorityClass`.
fn priority_class(c: &mut Obj) {
    or_nil(c, "preemptionPolicy", json!("PreemptLowerPriority"));
}

/// discovery `SetDefaults_EndpointPort`: an empty name and TCP.
fn endpoint_port(p: &mut Obj) {
    or_nil(p, "name", json!(""));
    or_nil(p, "protocol", json!("TCP"));
}

/// flowcontrol `SetDefaults_FlowSchemaSpec` (`FlowSchemaDefaultMatchingPrecedence`).
fn flow_schema_spec(s: &mut Obj) {
    or_unset(s, "matchingPrecedence", json!(1000));
}

/// flowcontrol `SetDefaults_ExemptPriorityLevelConfiguration`.
fn exempt_priority_level(c: &mut Obj) {
    or_nil(c, "nominalConcurrencyShares", json!(0));
    or_nil(c, "lendablePercent", json!(0));
}

/// flowcontrol `SetDefaults_LimitedPriorityLevelConfiguration`
/// (`PriorityLevelConfigurationDefaultNominalConcurrencyShares`).
fn limited_priority_level(c: &mut Obj) {
    or_nil(c, "nominalConcurrencyShares", json!(30));
    or_nil(c, "lendablePercent", json!(0));
}

/// flowcontrol `SetDefaults_QueuingConfiguration` (`PriorityLevelConfigurationDefault*`).
fn queuing(q: &mut Obj) {
    or_unset(q, "handSize", json!(8));
    or_unset(q, "queues", json!(64));
    or_unset(q, "queueLengthLimit", json!(50));
}

/// authentication `SetDefaults_TokenRequestSpec`: an hour.
fn token_request_spec(s: &mut Obj) {
    or_nil(s, "expirationSeconds", json!(3600));
}

/// resource `SetDefaults_ExactDeviceRequest`, `SetDefaults_DeviceSubRequest`.
fn device_request(r: &mut Obj) {
    or_unset(r, "allocationMode", json!("ExactCount"));
    if text(r, "allocationMode") == "ExactCount" {
        or_unset(r, "count", json!(1));
    }
}

/// resource `SetDefaults_DeviceTaint`: added now (to the second).
fn device_taint(t: &mut Obj) {
    or_nil(t, "timeAdded", json!(crate::engine::meta::now()));
}
