//! What kube-apiserver creates in a new cluster, besides the four namespaces: the
//! `kubernetes` Service in `default` with its Endpoints and EndpointSlice, the two built-in
//! PriorityClasses, the bootstrap ClusterRoles and ClusterRoleBindings most clients rely on,
//! and an `APIService` per served built-in group-version.
//!
//! Each set is written the first time its resource is addressed in a cluster (any request that
//! resolves the type), so a cluster that never looks at Services or RBAC carries none of it:
//! fleets of thousands of clusters stay as small as before. The objects then behave like any
//! other (they can be changed or deleted; nothing recreates them).
//!
//! ClusterRoles: `cluster-admin`, `admin`, `edit`, `view` (the last three with their
//! aggregation rules and no rules of their own, as on a kube-apiserver whose
//! controller-manager has not aggregated them), `system:discovery`, `system:basic-user`,
//! `system:public-info-viewer`, `system:monitoring`, `system:auth-delegator`; a binding for
//! each but `admin`, `edit`, `view` and `system:auth-delegator`.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::managed::Operation;
use super::registry::{TypeInfo, builtin_types};
use super::write::create_locked;
use super::{Engine, WriteOptions};

/// The seed set of a resource: a bit of `State::seeded`, or `None` for resources with none.
fn seed_bit(res: &str) -> Option<u32> {
    Some(match res {
        "services" => 1,
        "endpoints" => 1 << 1,
        "endpointslices.discovery.k8s.io" => 1 << 2,
        "priorityclasses.scheduling.k8s.io" => 1 << 3,
        "clusterroles.rbac.authorization.k8s.io" => 1 << 4,
        "clusterrolebindings.rbac.authorization.k8s.io" => 1 << 5,
        "apiservices.apiregistration.k8s.io" => 1 << 6,
        _ => return None,
    })
}

impl Engine {
    /// Writes the bootstrap objects of `info`'s resource if this cluster has not yet.
    pub(crate) fn seed(&self, info: &TypeInfo) {
        let Some(bit) = seed_bit(&info.res) else {
            return;
        };
        if self.inner.seeded.load(Ordering::Acquire) & bit != 0 {
            return;
        }
        let mut store = self.inner.write();
        if self.inner.seeded.load(Ordering::Acquire) & bit == 0 {
            for (ns, body) in objects(bit) {
                // Cannot fail on a fresh resource; a failure would only leave one out.
                let opts = WriteOptions {
                    field_manager: Some("kube-apiserver".into()),
                    ..WriteOptions::default()
                };
                let _ = create_locked(&mut store, info, ns, body, &opts, Operation::Update);
            }
            self.inner.seeded.fetch_or(bit, Ordering::Release);
        }
        let rv = store.rv;
        drop(store);
        self.inner.wake(rv);
    }
}

/// Labels and annotations of the bootstrap RBAC objects.
fn rbac_meta(name: &str, labels: Value) -> Value {
    let mut all = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    if let (Some(all), Some(extra)) = (all.as_object_mut(), labels.as_object()) {
        all.extend(extra.clone());
    }
    json!({
        "name": name,
        "labels": all,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, labels: Value, rules: Value) -> (&'static str, Value) {
    (
        "",
        json!({"metadata": rbac_meta(name, labels), "rules": rules}),
    )
}

fn aggregated(name: &str, labels: Value, selector: &str) -> (&'static str, Value) {
    let body = json!({
        "metadata": rbac_meta(name, labels),
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{selector}"): "true"}}
        ]},
    });
    ("", body)
}

fn binding(role: &str, groups: &[&str]) -> (&'static str, Value) {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    let body = json!({
        "metadata": rbac_meta(role, json!({})),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    });
    ("", body)
}

/// The objects of one seed set, with their namespaces.
fn objects(bit: u32) -> Vec<(&'static str, Value)> {
    let https = json!({"name": "https", "port": 6443, "protocol": "TCP"});
    match bit {
        1 => vec![(
            "default",
            json!({
                "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": "10.96.0.1",
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                },
            }),
        )],
        2 => vec![(
            "default",
            json!({
                "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [https]}],
            }),
        )],
        4 => vec![(
            "default",
            json!({
                "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
                "ports": [https],
            }),
        )],
        8 => [
            ("system-node-critical", 2_000_001_000),
            ("system-cluster-critical", 2_000_000_000),
        ]
        .into_iter()
        .map(|(name, value)| {
            let body = json!({
                "metadata": {"name": name},
                "value": value,
                "globalDefault": false,
                "preemptionPolicy": "PreemptLowerOrEqual",
                "description": format!("Built-in priority class {name} (created by the API server)."),
            });
            ("", body)
        })
        .collect(),
        16 => {
            let get = json!(["get"]);
            vec![
                cluster_role(
                    "cluster-admin",
                    json!({}),
                    json!([
                        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                        {"nonResourceURLs": ["*"], "verbs": ["*"]},
                    ]),
                ),
                aggregated("admin", json!({}), "admin"),
                aggregated(
                    "edit",
                    json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
                    "edit",
                ),
                aggregated(
                    "view",
                    json!({"rbac.authorization.k8s.io/aggregate-to-edit": "true"}),
                    "view",
                ),
                cluster_role(
                    "system:discovery",
                    json!({}),
                    json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": get}]),
                ),
                cluster_role(
                    "system:basic-user",
                    json!({}),
                    json!([
                        {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
                    ]),
                ),
                cluster_role(
                    "system:public-info-viewer",
                    json!({}),
                    json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": get}]),
                ),
                cluster_role(
                    "system:monitoring",
                    json!({}),
                    json!([{"nonResourceURLs": ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"], "verbs": get}]),
                ),
                cluster_role(
                    "system:auth-delegator",
                    json!({}),
                    json!([
                        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
                    ]),
                ),
            ]
        }
        32 => vec![
            binding("cluster-admin", &["system:masters"]),
            binding("system:discovery", &["system:authenticated"]),
            binding("system:basic-user", &["system:authenticated"]),
            binding(
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
            binding("system:monitoring", &["system:monitoring"]),
        ],
        64 => api_services(),
        _ => Vec::new(),
    }
}

/// An `APIService` per built-in group-version, as the aggregator registers the local ones.
fn api_services() -> Vec<(&'static str, Value)> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for t in builtin_types() {
        let gv = (t.rt.group.clone(), t.rt.version.clone());
        if !seen.contains(&gv) {
            seen.push(gv);
        }
    }
    seen.iter()
        .enumerate()
        .map(|(i, (group, version))| {
            let priority = 18_000 - 100 * i64::try_from(i).unwrap_or(0);
            let body = json!({
                "metadata": {
                    "name": format!("{version}.{group}"),
                    "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"},
                },
                "spec": {
                    "group": group,
                    "version": version,
                    "groupPriorityMinimum": priority,
                    "versionPriority": 15,
                },
            });
            ("", body)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serving more kinds costs a cluster nothing until it uses them: the type table is shared,
    /// and a kind without bootstrap objects stores nothing when addressed.
    #[test]
    fn addressing_a_kind_without_bootstrap_objects_stores_nothing() {
        let engine = Engine::new();
        let kinds = |e: &Engine| {
            let store = e.inner.read();
            (
                store.objects.keys().cloned().collect::<Vec<_>>(),
                store.history.len(),
            )
        };
        let fresh = kinds(&engine);
        assert_eq!(fresh, (vec![std::sync::Arc::from("namespaces")], 4));
        for t in builtin_types()
            .iter()
            .filter(|t| seed_bit(&t.res).is_none())
        {
            let rt = &t.rt;
            engine.resolve(&rt.group, &rt.version, &rt.plural).unwrap();
            engine
                .list(rt, None, &super::super::ListParams::default())
                .unwrap();
        }
        assert_eq!(kinds(&engine), fresh);
    }

    #[test]
    fn bootstrap_objects_appear_when_first_addressed() {
        let engine = Engine::new();
        let untouched = |res: &str| !engine.inner.read().objects.contains_key(res);
        assert!(untouched("services"), "nothing before the first request");
        assert!(untouched("clusterroles.rbac.authorization.k8s.io"));
        let rv = engine.resource_version();
        let svc = engine.resolve("", "v1", "services").unwrap();
        assert!(engine.resource_version() > rv);
        let kubernetes = engine.get(&svc, Some("default"), "kubernetes").unwrap();
        assert_eq!(kubernetes["spec"]["clusterIP"], "10.96.0.1");
        assert!(untouched("clusterroles.rbac.authorization.k8s.io"));
        // Seeded once: resolving again writes nothing.
        let rv = engine.resource_version();
        engine.resolve("", "v1", "services").unwrap();
        assert_eq!(engine.resource_version(), rv);
        // A deleted bootstrap object stays deleted.
        engine
            .delete(&svc, Some("default"), "kubernetes", &Default::default())
            .unwrap();
        engine.resolve("", "v1", "services").unwrap();
        assert_eq!(
            engine
                .get(&svc, Some("default"), "kubernetes")
                .unwrap_err()
                .code,
            404
        );
    }
}
