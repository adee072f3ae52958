//! The emulator's discovery against kube-apiserver's, group by group and resource by
//! resource: scope, kind, verbs, short names, categories and subresources with their verbs.
//!
//! `discovery_matches_kube_apiserver` needs a real control plane (`cargo xtask assets`, or
//! `KUBEBUILDER_ASSETS`), so it runs only with `MCR_ENVTEST=real`, which
//! `cargo xtask e2e --conformance` (CI) sets. It compares the built-in kinds and a custom
//! resource with status and scale. The differences it
//! accepts are the ones the crate README lists: subresources that need a kubelet or proxy a
//! connection, and versions other than a group's preferred one.
//! `the_emulator_agrees_with_itself` runs the same comparison emulator against emulator, so
//! the machinery is checked on every `cargo test`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use mcr_envtest::wait::eventually_async;
use mcr_envtest::{Backend, TestCluster};
use serde_json::json;

/// A custom resource with status and scale subresources, so custom kinds are compared too.
fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                      "shortNames": ["gd"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                                               "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}},
            }],
        },
    }))
    .unwrap()
}

/// Installs [`gadget_crd`] and waits until discovery lists it.
async fn install_gadgets(cluster: &TestCluster) {
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    crds.create(&PostParams::default(), &gadget_crd())
        .await
        .unwrap();
    let client = cluster.client();
    eventually_async("gadgets in discovery", Duration::from_secs(60), || {
        let client = client.clone();
        async move {
            rows(client)
                .await
                .contains_key("example.com/v1 gadgets/scale")
        }
    })
    .await;
}

/// Subresources the emulator does not serve: they need a kubelet or proxy a connection.
const UNSERVED_SUBRESOURCES: &[&str] = &[
    "pods/attach",
    "pods/exec",
    "pods/log",
    "pods/portforward",
    "pods/proxy",
    "nodes/proxy",
    "services/proxy",
];

/// `group/version resource[/sub]` -> what discovery says of it.
async fn rows(client: kube::Client) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let core = client.list_core_api_versions_aggregated().await.unwrap();
    let rest = client.list_api_groups_aggregated().await.unwrap();
    for group in core.items.into_iter().chain(rest.items) {
        let name = group
            .metadata
            .as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_default();
        for version in group.versions {
            let gv = format!("{name}/{}", version.version.clone().unwrap_or_default());
            for r in version.resources {
                let sorted = |mut v: Vec<String>| {
                    v.sort();
                    v
                };
                let kind = r
                    .response_kind
                    .as_ref()
                    .and_then(|k| k.kind.clone())
                    .unwrap_or_default();
                let resource = r.resource.clone().unwrap_or_default();
                out.insert(
                    format!("{gv} {resource}"),
                    format!(
                        "kind={kind} scope={:?} verbs={:?} short={:?} categories={:?}",
                        r.scope,
                        sorted(r.verbs.clone()),
                        sorted(r.short_names.clone()),
                        sorted(r.categories.clone()),
                    ),
                );
                for sub in r.subresources {
                    let kind = sub.response_kind.as_ref().map(|k| {
                        format!(
                            "{}/{}/{}",
                            k.group.clone().unwrap_or_default(),
                            k.version.clone().unwrap_or_default(),
                            k.kind.clone().unwrap_or_default()
                        )
                    });
                    out.insert(
                        format!(
                            "{gv} {resource}/{}",
                            sub.subresource.clone().unwrap_or_default()
                        ),
                        format!("kind={kind:?} verbs={:?}", sorted(sub.verbs.clone())),
                    );
                }
            }
        }
    }
    out
}

/// Whether a difference is one the README lists.
fn accepted(key: &str, ours: &BTreeMap<String, String>) -> bool {
    let (gv, resource) = key.split_once(' ').unwrap_or((key, ""));
    if UNSERVED_SUBRESOURCES.contains(&resource) {
        return true;
    }
    // A version the emulator does not serve, of a resource it serves at another version.
    let group = gv.rsplit_once('/').map_or("", |(g, _)| g);
    !ours.keys().any(|k| k.starts_with(&format!("{gv} ")))
        && ours
            .keys()
            .any(|k| k.starts_with(&format!("{group}/")) && k.ends_with(&format!(" {resource}")))
}

fn differences(ours: &BTreeMap<String, String>, theirs: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for key in ours.keys().chain(theirs.keys()) {
        let (a, b) = (ours.get(key), theirs.get(key));
        if a != b && !accepted(key, ours) && !out.iter().any(|d: &String| d.starts_with(key)) {
            out.push(format!(
                "{key}:\n  emulator:       {a:?}\n  kube-apiserver: {b:?}"
            ));
        }
    }
    out
}

#[tokio::test]
async fn the_emulator_agrees_with_itself() {
    let a = TestCluster::start_on(Backend::Emulator, "disc-a")
        .await
        .unwrap();
    let b = TestCluster::start_on(Backend::Emulator, "disc-b")
        .await
        .unwrap();
    let (ours, theirs) = (rows(a.client()).await, rows(b.client()).await);
    assert!(ours.contains_key("/v1 pods/eviction"), "{:#?}", ours.keys());
    assert!(ours.contains_key("apps/v1 statefulsets/scale"));
    assert!(differences(&ours, &theirs).is_empty());
    // The acceptance rules accept what they should and nothing else.
    assert!(accepted("/v1 pods/exec", &ours));
    assert!(accepted("autoscaling/v1 horizontalpodautoscalers", &ours));
    assert!(!accepted("autoscaling/v2 horizontalpodautoscalers", &ours));
    assert!(!accepted("/v1 pods/status", &ours));
}

/// Runs with `MCR_ENVTEST=real` (as `cargo xtask e2e --conformance` does in CI); on the
/// emulator backend it says so and passes.
#[tokio::test]
async fn discovery_matches_kube_apiserver() {
    if !mcr_envtest::backend().is_real() {
        eprintln!(
            "SKIPPED on the emulator backend: discovery_matches_kube_apiserver needs \
             MCR_ENVTEST=real (kube-apiserver from cargo xtask assets)"
        );
        return;
    }
    let a = TestCluster::start_on(Backend::Emulator, "discovery")
        .await
        .unwrap();
    let b = TestCluster::start_on(Backend::Real, "discovery")
        .await
        .unwrap();
    install_gadgets(&a).await;
    install_gadgets(&b).await;
    let (ours, theirs) = (rows(a.client()).await, rows(b.client()).await);
    let diff = differences(&ours, &theirs);
    assert!(
        diff.is_empty(),
        "{} differences from kube-apiserver's discovery:\n{}",
        diff.len(),
        diff.join("\n")
    );
}
