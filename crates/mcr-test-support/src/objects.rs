//! Test objects, small API helpers, and the checks of a credential rotation.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use mcr_core::{Cluster, FieldIndex, Informer};
use mcr_envtest::wait::eventually;
use mcr_envtest::{RequestCounts, TestCluster};

use crate::WAIT;

/// A ConfigMap named `name` with `labels` and `data.value = <value>`, in no namespace (the
/// `Api` it is written through places it).
pub fn configmap(name: &str, labels: &[(&str, &str)], value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(crate::string_map(labels)),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("value".to_string(), value.to_string())])),
        ..Default::default()
    }
}

/// A ConfigMap `default/<name>` with `data.animal = <animal>`, what [`animal_index`] reads.
pub fn animal_configmap(name: &str, animal: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("animal".to_string(), animal.to_string())])),
        ..Default::default()
    }
}

/// A field index over ConfigMaps named `name`: their `data.animal`.
pub fn animal_index(name: &str) -> FieldIndex {
    FieldIndex::new::<ConfigMap>(name, |cm: &ConfigMap| {
        cm.data
            .as_ref()
            .and_then(|d| d.get("animal"))
            .cloned()
            .into_iter()
            .collect()
    })
}

/// A field index over ConfigMaps named `label`: the value of their label `label`.
pub fn label_index(label: &str) -> FieldIndex {
    let key = label.to_string();
    FieldIndex::new::<ConfigMap>(label, move |cm: &ConfigMap| {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(&key).cloned())
            .into_iter()
            .collect()
    })
}

/// A kubeconfig for `member` (emulated) authenticating `user` of `system:masters` with a
/// client certificate valid for ten minutes.
pub fn minted_kubeconfig(member: &TestCluster, user: &str) -> String {
    member
        .client_certificate_kubeconfig(user, &["system:masters"], Duration::from_secs(600))
        .unwrap()
        .0
}

/// Waits until the credentials of `cluster` were renewed in place `renewals` times.
pub async fn wait_renewals(cluster: &Cluster, renewals: u64, what: &str) {
    eventually(what, WAIT, || {
        cluster
            .credentials()
            .is_some_and(|c| c.status().renewals == renewals)
    })
    .await;
}

/// Checks that the ConfigMap watch of a member survived a rotation: a ConfigMap `after`
/// created on `member` reaches `informer`, and `member` served no list of ConfigMaps since it
/// counted `lists`.
pub async fn assert_watch_kept(member: &TestCluster, informer: &Informer<ConfigMap>, lists: u64) {
    Api::<ConfigMap>::namespaced(member.client(), "default")
        .create(&PostParams::default(), &animal_configmap("after", "owl"))
        .await
        .unwrap();
    eventually("the informer keeps working", WAIT, || {
        informer.get(Some("default"), "after").is_some()
    })
    .await;
    assert_eq!(
        member.request_count("list", "configmaps"),
        lists,
        "no relist"
    );
}

/// Deletes the Secret `ns/name` (panics when that fails, a missing Secret included).
pub async fn delete_secret(client: &kube::Client, ns: &str, name: &str) {
    Api::<Secret>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

/// The HTTP status code of a kube API error, if it is one.
pub fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// The cluster's request counters on the emulator; `None` on the real backend, which keeps
/// none. A test checks counters inside `if let Some(..)`, so the rest of it runs on both.
pub fn request_counts(cluster: &TestCluster) -> Option<RequestCounts> {
    (!cluster.backend().is_real()).then(|| cluster.requests())
}
