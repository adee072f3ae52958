//! What the differential check draws: one row per served kind, each a valid object, the fields
//! requests change, the subresource requests, and the invalid shapes clients commonly provoke.
//!
//! The kinds themselves come from the emulator's discovery (see `served_kinds` in
//! `fidelity.rs`): a served kind with neither a row here nor an entry in [`NOT_DRAWN`] fails
//! the check, so a new kind is drawn as soon as it has a row.

use serde_json::{Value, json};

/// Placeholder for the object's name inside a body.
pub const NAME: &str = "$NAME";

/// Kinds with a row whose divergences are not fixed yet, with the first one the run found:
/// drawn only when `MCR_FIDELITY_ALL=1`, so that `cargo xtask fidelity` keeps failing on
/// nothing but new divergences. Each entry leaves the list with its fix.
pub const PENDING: &[(&str, &str, &str)] = &[(
    "",
    "Namespace",
    "by nature: kube-apiserver keeps a deleted Namespace `Terminating` until kube-controller-manager's namespace controller empties it and removes the `kubernetes` finalizer, while the emulator empties and removes it in the delete call; later requests on the name differ",
)];

/// A subresource request.
pub struct Sub {
    /// For reports: `status-patch`, `scale-put`...
    pub op: &'static str,
    /// `status`, `scale`, `token`...
    pub sub: &'static str,
    pub method: http::Method,
    pub content_type: &'static str,
    /// Bodies drawn from (`None` for a GET).
    pub bodies: Vec<Value>,
    /// The body is laid over a whole object of the kind (PUTs of the main type).
    pub whole: bool,
}

/// One drawn kind.
pub struct Row {
    pub group: &'static str,
    pub kind: &'static str,
    /// A valid object's fields besides `apiVersion`, `kind` and `metadata`.
    pub body: Value,
    /// Fields requests set, as JSON pointers into the object, with the values drawn for each
    /// (`null`: the field is left out).
    pub fields: Vec<(&'static str, Vec<Value>)>,
    pub subs: Vec<Sub>,
    /// Invalid objects: a pointer and the value that makes the object invalid.
    pub invalid: Vec<(&'static str, Value)>,
}

/// Kinds drawn as one object per namespace (`o1` only), and whose end marker is created after
/// the others'. kube-apiserver's `LimitRanger` and `ResourceQuota` admission take a
/// namespace's LimitRanges and ResourceQuotas from an informer's index, in Go map order,
/// which changes from one request to the next: with two LimitRanges whose defaults differ, a
/// Pod gets either default (and the other's `max` may then refuse it), and a Pod counted by
/// two quotas has them written in either order (their watch events swap). No server can
/// match that request for request, so the check draws one of each per namespace, where the
/// order is fixed; the emulator's own order (by name) is covered by a unit test of
/// `engine::admission`. Left:
/// kube-apiserver's informer may not have seen a LimitRange created by the request just before
/// a Pod's create (seen once, seed 42 with 200 steps; a rerun matched).
pub const ONE_PER_NAMESPACE: &[&str] = &["LimitRange", "ResourceQuota"];

/// Served kinds that are not drawn, with the reason.
pub const NOT_DRAWN: &[(&str, &str, &str)] = &[
    ("", "Binding", "posted to pods/binding, which Pod rows draw"),
    (
        "",
        "ComponentStatus",
        "read-only and computed, with no writes to draw; builtin_kinds.rs compares its reads",
    ),
    (
        "",
        "Event",
        "written by controllers and recorders; events.k8s.io is not drawn either",
    ),
    (
        "events.k8s.io",
        "Event",
        "written by controllers and recorders",
    ),
    (
        "authentication.k8s.io",
        "SelfSubjectReview",
        "answered from the caller's identity, which differs by design",
    ),
    (
        "authentication.k8s.io",
        "TokenReview",
        "answered from signing keys, which differ by design",
    ),
    (
        "authorization.k8s.io",
        "LocalSubjectAccessReview",
        "answered by the authorizer",
    ),
    (
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "answered by the authorizer",
    ),
    (
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        "answered by the authorizer",
    ),
    (
        "authorization.k8s.io",
        "SubjectAccessReview",
        "answered by the authorizer",
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "the Gadget CRD is installed once and its resource drawn",
    ),
    (
        "apiregistration.k8s.io",
        "APIService",
        "an APIService for a missing service changes what the server serves",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "a webhook would be called by kube-apiserver",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "a webhook would be called by kube-apiserver",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicy",
        "CEL policies are compiled by kube-apiserver",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
        "binds CEL policies",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        "CEL policies are compiled by kube-apiserver",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        "binds CEL policies",
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "FlowSchema",
        "kube-apiserver's own configuration, reconciled by it",
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "PriorityLevelConfiguration",
        "kube-apiserver's own configuration, reconciled by it",
    ),
    (
        "networking.k8s.io",
        "IPAddress",
        "allocated by the Service IP allocator, which differs by design",
    ),
    (
        "networking.k8s.io",
        "ServiceCIDR",
        "changes the Service IP allocator's ranges",
    ),
    ("resource.k8s.io", "DeviceClass", "no row yet"),
    ("resource.k8s.io", "ResourceClaim", "no row yet"),
    ("resource.k8s.io", "ResourceClaimTemplate", "no row yet"),
    ("resource.k8s.io", "ResourceSlice", "no row yet"),
    ("storage.k8s.io", "CSIDriver", "no row yet"),
    ("storage.k8s.io", "CSINode", "no row yet"),
    ("storage.k8s.io", "CSIStorageCapacity", "no row yet"),
    ("storage.k8s.io", "VolumeAttachment", "no row yet"),
    ("storage.k8s.io", "VolumeAttributesClass", "no row yet"),
];

fn sub(
    op: &'static str,
    sub: &'static str,
    method: http::Method,
    ct: &'static str,
    bodies: Vec<Value>,
) -> Sub {
    Sub {
        op,
        sub,
        method,
        content_type: ct,
        bodies,
        whole: false,
    }
}

const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON: &str = "application/json";

fn status(bodies: Vec<Value>) -> Sub {
    sub(
        "status-patch",
        "status",
        http::Method::PATCH,
        MERGE,
        bodies.into_iter().map(|s| json!({"status": s})).collect(),
    )
}

/// Scale writes set replica counts that no other request draws (0, 3, 4), so each changes
/// `spec.replicas` or repeats the last scale write. A scale write that leaves a count another
/// write set makes kube-apiserver split the `Update` entry that owns it in two with the same
/// identity (the Scale round trip renames the entry's version), and which of them the next
/// write keeps depends on Go's map order.
fn scale() -> Vec<Sub> {
    vec![
        sub("scale-get", "scale", http::Method::GET, JSON, vec![]),
        sub(
            "scale-patch",
            "scale",
            http::Method::PATCH,
            MERGE,
            vec![
                json!({"spec": {"replicas": 0}}),
                json!({"spec": {"replicas": 3}}),
            ],
        ),
        sub(
            "scale-put",
            "scale",
            http::Method::PUT,
            JSON,
            vec![
                json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": NAME}, "spec": {"replicas": 4}}),
            ],
        ),
    ]
}

fn container() -> Value {
    json!({"name": "c", "image": "nginx:1.27"})
}

fn pod_template() -> Value {
    json!({"metadata": {"labels": {"app": "fid"}}, "spec": {"containers": [container()]}})
}

const IMAGES: &[&str] = &[
    "nginx:1.27",
    "nginx",
    "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000",
];

fn images() -> Vec<Value> {
    IMAGES.iter().map(|i| json!(i)).collect()
}

fn workload_status() -> Sub {
    status(vec![
        json!({"observedGeneration": 1}),
        json!({"replicas": 2, "readyReplicas": 1}),
    ])
}

const CSR: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlISE1IQUNBUUF3RGpFTU1Bb0dBMVVFQXd3RFptbGtNRmt3RXdZSEtvWkl6ajBDQVFZSUtvWkl6ajBEQVFjRApRZ0FFWEpFd25ITWVHdFVUaXBuY3JXOFpPUTMySlF3clo2OEZ6TUNzSVV2SmRIVVc4SnVldkR6VmI3N2M0ckMvCitVbWdWU3JxOTB1YzhMSjg0SENURXlmcSs2QUFNQW9HQ0NxR1NNNDlCQU1DQTBjQU1FUUNJQkdLTkNIQmNiOTQKSUJWYlVFaXNlR0J4emxDOFVtTzFXZzc4eFNEa3JEc1BBaUFWYVBkSk0xNGRYbjV3OFJ4VHBpQzVLRnZrUzRYNgpvS3lPU3ZCa3MxcUU1UT09Ci0tLS0tRU5EIENFUlRJRklDQVRFIFJFUVVFU1QtLS0tLQo=";

/// Every drawn kind.
pub fn rows() -> Vec<Row> {
    let data = || {
        vec![
            ("/data/a", vec![json!("1"), json!("2"), Value::Null]),
            ("/data/b", vec![json!("1"), Value::Null]),
        ]
    };
    let labels = json!({"app": "fid"});
    vec![
        Row { group: "", kind: "ConfigMap", body: json!({}), fields: data(), subs: vec![], invalid: vec![("/data/a b", json!("x"))] },
        Row {
            group: "",
            kind: "Secret",
            body: json!({}),
            fields: vec![("/data/a", vec![json!("MQ=="), json!("Mg=="), Value::Null]), ("/stringData/b", vec![json!("x"), Value::Null])],
            subs: vec![],
            invalid: vec![("/data/a b", json!("MQ=="))],
        },
        Row {
            group: "",
            kind: "Pod",
            body: json!({"spec": {"containers": [container()]}}),
            fields: vec![
                ("/spec/containers/0/image", images()),
                ("/spec/activeDeadlineSeconds", vec![json!(60), Value::Null]),
                ("/metadata/annotations/note", vec![json!("x"), Value::Null]),
                // Next to a LimitRange with `max.cpu` 1 or 2 (see its row): within, above.
                ("/spec/containers/0/resources/limits/cpu", vec![json!("500m"), json!("2"), Value::Null]),
            ],
            subs: vec![
                status(vec![json!({"phase": "Running"}), json!({"message": "m"})]),
                sub(
                    "ephemeral-patch",
                    "ephemeralcontainers",
                    http::Method::PATCH,
                    STRATEGIC,
                    vec![json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox", "targetContainerName": "c"}]}})],
                ),
                sub("ephemeral-get", "ephemeralcontainers", http::Method::GET, JSON, vec![]),
                // Without a grace period, as the deletes of Pods (a bound Pod otherwise waits
                // for a kubelet on kube-apiserver; see DELETED_WITHOUT_GRACE in fidelity.rs).
                sub(
                    "evict",
                    "eviction",
                    http::Method::POST,
                    JSON,
                    vec![json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": NAME}, "deleteOptions": {"gracePeriodSeconds": 0}})],
                ),
                sub(
                    "bind",
                    "binding",
                    http::Method::POST,
                    JSON,
                    vec![json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": NAME}, "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}})],
                ),
            ],
            invalid: vec![("/spec/containers", json!([])), ("/spec/containers/0/image", json!(""))],
        },
        Row {
            group: "",
            kind: "Service",
            body: json!({"spec": {"selector": labels, "ports": [{"port": 80}]}}),
            fields: vec![
                ("/spec/ports/0/targetPort", vec![json!(8080), json!("http"), Value::Null]),
                ("/spec/sessionAffinity", vec![json!("ClientIP"), json!("None"), Value::Null]),
                ("/spec/selector/tier", vec![json!("web"), Value::Null]),
            ],
            subs: vec![],
            invalid: vec![("/spec/ports", json!([])), ("/spec/type", json!("Bogus"))],
        },
        Row {
            group: "",
            kind: "ServiceAccount",
            body: json!({}),
            fields: vec![("/automountServiceAccountToken", vec![json!(false), json!(true), Value::Null])],
            subs: vec![sub(
                "token",
                "token",
                http::Method::POST,
                JSON,
                vec![
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": ["a"], "expirationSeconds": 3600}}),
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": []}}),
                ],
            )],
            invalid: vec![],
        },
        Row {
            group: "",
            kind: "PersistentVolumeClaim",
            body: json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
            fields: vec![("/metadata/annotations/note", vec![json!("x"), Value::Null])],
            subs: vec![status(vec![json!({"phase": "Bound"}), json!({"phase": "Pending"})])],
            invalid: vec![("/spec/accessModes", json!([]))],
        },
        Row {
            group: "",
            kind: "Node",
            body: json!({}),
            fields: vec![("/spec/unschedulable", vec![json!(true), json!(false), Value::Null]), ("/spec/podCIDR", vec![json!("10.244.0.0/24"), Value::Null])],
            subs: vec![status(vec![json!({"capacity": {"cpu": "4"}}), json!({"conditions": [{"type": "Ready", "status": "True"}]})])],
            invalid: vec![],
        },
        Row {
            group: "",
            kind: "Namespace",
            body: json!({}),
            fields: vec![("/metadata/annotations/note", vec![json!("x"), Value::Null])],
            subs: vec![
                status(vec![json!({"phase": "Active"})]),
                Sub {
                    op: "finalize",
                    sub: "finalize",
                    method: http::Method::PUT,
                    content_type: JSON,
                    bodies: vec![json!({"spec": {"finalizers": []}}), json!({"spec": {"finalizers": ["kubernetes"]}})],
                    whole: true,
                },
            ],
            invalid: vec![],
        },
        Row {
            group: "apps",
            kind: "Deployment",
            body: json!({"spec": {"selector": {"matchLabels": labels}, "template": pod_template()}}),
            fields: vec![("/spec/replicas", vec![json!(1), json!(2), Value::Null]), ("/spec/template/spec/containers/0/image", images())],
            subs: [vec![workload_status()], scale()].into_iter().flatten().collect(),
            invalid: vec![("/spec/selector/matchLabels/app", json!("other"))],
        },
        Row {
            group: "apps",
            kind: "ReplicaSet",
            body: json!({"spec": {"selector": {"matchLabels": labels}, "template": pod_template()}}),
            fields: vec![("/spec/replicas", vec![json!(1), json!(2), Value::Null]), ("/spec/template/spec/containers/0/image", images())],
            subs: [vec![workload_status()], scale()].into_iter().flatten().collect(),
            invalid: vec![("/spec/selector/matchLabels/app", json!("other"))],
        },
        Row {
            group: "apps",
            kind: "StatefulSet",
            body: json!({"spec": {"selector": {"matchLabels": labels}, "template": pod_template()}}),
            fields: vec![("/spec/replicas", vec![json!(1), json!(2), Value::Null]), ("/spec/template/spec/containers/0/image", images())],
            subs: [vec![workload_status()], scale()].into_iter().flatten().collect(),
            invalid: vec![("/spec/selector/matchLabels/app", json!("other"))],
        },
        Row {
            group: "batch",
            kind: "Job",
            body: json!({"spec": {"template": {"spec": {"containers": [container()], "restartPolicy": "Never"}}}}),
            fields: vec![("/spec/backoffLimit", vec![json!(2), Value::Null]), ("/spec/suspend", vec![json!(true), json!(false), Value::Null])],
            subs: vec![],
            invalid: vec![("/spec/template/spec/restartPolicy", json!("Always"))],
        },
        Row {
            group: "batch",
            kind: "CronJob",
            body: json!({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [container()], "restartPolicy": "OnFailure"}}}}}}),
            fields: vec![("/spec/schedule", vec![json!("0 * * * *"), json!("@hourly")]), ("/spec/suspend", vec![json!(true), Value::Null])],
            subs: vec![],
            invalid: vec![("/spec/schedule", json!("not a schedule"))],
        },
        Row {
            group: "rbac.authorization.k8s.io",
            kind: "Role",
            body: json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
            fields: vec![("/rules/0/verbs", vec![json!(["get"]), json!(["get", "list"])])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "rbac.authorization.k8s.io",
            kind: "ClusterRole",
            body: json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
            fields: vec![("/rules/0/verbs", vec![json!(["get"]), json!(["get", "list"])])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "rbac.authorization.k8s.io",
            kind: "RoleBinding",
            body: json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
            fields: vec![("/subjects/0/name", vec![json!("sa"), json!("sb")])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "rbac.authorization.k8s.io",
            kind: "ClusterRoleBinding",
            body: json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
            fields: vec![("/subjects/0/name", vec![json!("sa"), json!("sb")])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "networking.k8s.io",
            kind: "NetworkPolicy",
            body: json!({"spec": {"podSelector": {"matchLabels": labels}}}),
            fields: vec![("/spec/policyTypes", vec![json!(["Ingress"]), json!(["Ingress", "Egress"]), Value::Null])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "networking.k8s.io",
            kind: "Ingress",
            body: json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}),
            fields: vec![("/spec/ingressClassName", vec![json!("nginx"), Value::Null])],
            subs: vec![status(vec![json!({"loadBalancer": {"ingress": [{"ip": "10.1.2.3"}]}})])],
            invalid: vec![],
        },
        Row {
            group: "policy",
            kind: "PodDisruptionBudget",
            body: json!({"spec": {"selector": {"matchLabels": labels}, "minAvailable": 1}}),
            fields: vec![("/spec/minAvailable", vec![json!(1), json!("50%")])],
            subs: vec![status(vec![json!({"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1})])],
            invalid: vec![],
        },
        Row {
            group: "certificates.k8s.io",
            kind: "CertificateSigningRequest",
            body: json!({"spec": {"request": CSR, "signerName": "example.com/fid", "usages": ["digital signature"]}}),
            fields: vec![("/metadata/annotations/note", vec![json!("x"), Value::Null])],
            subs: vec![Sub {
                op: "approval",
                sub: "approval",
                method: http::Method::PUT,
                content_type: JSON,
                bodies: vec![
                    json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Fid", "message": "ok"}]}}),
                    json!({"status": {"conditions": [{"type": "Denied", "status": "True", "reason": "Fid"}]}}),
                ],
                whole: true,
            }],
            invalid: vec![],
        },
        Row {
            group: "coordination.k8s.io",
            kind: "Lease",
            body: json!({"spec": {"holderIdentity": "a"}}),
            fields: vec![("/spec/holderIdentity", vec![json!("a"), json!("b"), Value::Null]), ("/spec/leaseDurationSeconds", vec![json!(15), Value::Null])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "",
            kind: "Endpoints",
            body: json!({"subsets": [{"addresses": [{"ip": "10.1.0.1"}], "ports": [{"port": 80}]}]}),
            fields: vec![("/subsets/0/ports/0/port", vec![json!(80), json!(8080)])],
            subs: vec![],
            invalid: vec![("/subsets/0/addresses/0/ip", json!("not-an-ip"))],
        },
        Row {
            group: "",
            kind: "LimitRange",
            body: json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}),
            fields: vec![("/spec/limits/0/max/cpu", vec![json!("1"), json!("2")])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "",
            kind: "ResourceQuota",
            body: json!({"spec": {"hard": {"pods": "10"}}}),
            fields: vec![("/spec/hard/pods", vec![json!("10"), json!("5")])],
            // What a quota controller would write: room for Pods, room for one more Pod (the
            // next creates are refused), and a count without usage (`status unknown`).
            subs: vec![status(vec![
                json!({"hard": {"pods": "10"}, "used": {"pods": "1"}}),
                json!({"hard": {"pods": "2"}, "used": {"pods": "1"}}),
                json!({"hard": {"count/pods": "10", "pods": "10"}, "used": {"pods": "1"}}),
            ])],
            invalid: vec![],
        },
        Row {
            group: "",
            kind: "PodTemplate",
            body: json!({"template": pod_template()}),
            fields: vec![("/template/spec/containers/0/image", images())],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "",
            kind: "ReplicationController",
            body: json!({"spec": {"selector": labels, "template": pod_template()}}),
            fields: vec![("/spec/replicas", vec![json!(1), json!(2), Value::Null]), ("/spec/template/spec/containers/0/image", images())],
            subs: [vec![workload_status()], scale()].into_iter().flatten().collect(),
            invalid: vec![],
        },
        Row {
            group: "",
            kind: "PersistentVolume",
            body: json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/fid"}}}),
            fields: vec![("/spec/persistentVolumeReclaimPolicy", vec![json!("Retain"), json!("Delete"), Value::Null])],
            subs: vec![status(vec![json!({"phase": "Available"})])],
            invalid: vec![],
        },
        Row {
            group: "apps",
            kind: "DaemonSet",
            body: json!({"spec": {"selector": {"matchLabels": labels}, "template": pod_template()}}),
            fields: vec![("/spec/template/spec/containers/0/image", images()), ("/spec/minReadySeconds", vec![json!(5), Value::Null])],
            subs: vec![],
            invalid: vec![("/spec/selector/matchLabels/app", json!("other"))],
        },
        Row {
            group: "apps",
            kind: "ControllerRevision",
            body: json!({"revision": 1, "data": {"a": 1}}),
            fields: vec![("/metadata/annotations/note", vec![json!("x"), Value::Null])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "autoscaling",
            kind: "HorizontalPodAutoscaler",
            body: json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxReplicas": 3}}),
            fields: vec![("/spec/maxReplicas", vec![json!(3), json!(5)]), ("/spec/minReplicas", vec![json!(1), json!(2), Value::Null])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "discovery.k8s.io",
            kind: "EndpointSlice",
            body: json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.1"]}]}),
            fields: vec![("/endpoints/0/addresses", vec![json!(["10.1.0.1"]), json!(["10.1.0.2"])])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "networking.k8s.io",
            kind: "IngressClass",
            body: json!({"spec": {"controller": "example.com/fid"}}),
            fields: vec![("/metadata/annotations/note", vec![json!("x"), Value::Null])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "node.k8s.io",
            kind: "RuntimeClass",
            body: json!({"handler": "runc"}),
            fields: vec![("/metadata/annotations/note", vec![json!("x"), Value::Null])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "scheduling.k8s.io",
            kind: "PriorityClass",
            body: json!({"value": 100}),
            fields: vec![("/description", vec![json!("d"), Value::Null])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "storage.k8s.io",
            kind: "StorageClass",
            body: json!({"provisioner": "example.com/fid"}),
            fields: vec![("/allowVolumeExpansion", vec![json!(true), Value::Null])],
            subs: vec![],
            invalid: vec![],
        },
        Row {
            group: "fid.example.com",
            kind: "Gadget",
            body: json!({"spec": {}}),
            fields: vec![
                ("/spec/settings/a", vec![json!("1"), json!("2"), Value::Null]),
                ("/spec/items", vec![json!([{"name": "a", "size": 1}]), json!([{"name": "a", "size": 2}, {"name": "b", "size": 1}]), Value::Null]),
                ("/spec/tags", vec![json!(["x"]), json!(["x", "y"]), Value::Null]),
                ("/spec/replicas", vec![json!(1), json!(2), Value::Null]),
            ],
            subs: [
                vec![
                    status(vec![json!({"phase": "Ready"}), json!({"phase": "Busy"})]),
                    sub(
                        "status-apply",
                        "status",
                        http::Method::PATCH,
                        "application/apply-patch+yaml",
                        vec![json!({"apiVersion": "fid.example.com/v1", "kind": "Gadget", "metadata": {"name": NAME}, "status": {"phase": "Ready"}})],
                    ),
                ],
                scale(),
            ]
            .into_iter()
            .flatten()
            .collect(),
            invalid: vec![],
        },
    ]
}

/// The CustomResourceDefinition of `Gadget`: a keyed list, a set, a map, and the status and
/// scale subresources.
pub fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.fid.example.com"},
        "spec": {
            "group": "fid.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                }},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "items": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "size": {"type": "integer"},
                            }},
                        },
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                        "settings": {"type": "object", "additionalProperties": {"type": "string"}},
                        "replicas": {"type": "integer"},
                    }},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"}, "replicas": {"type": "integer"},
                    }},
                }}},
            }],
        },
    })
}
