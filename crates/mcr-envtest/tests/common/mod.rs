//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

/// Generous deadline for conditions; tests never rely on it being reached.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A ConfigMap with a name, labels and one data entry.
pub fn configmap(name: &str, labels: &[(&str, &str)], value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        data: Some([("value".to_string(), value.to_string())].into()),
        ..ConfigMap::default()
    }
}

/// The HTTP status code of a kube API error, if it is one.
pub fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// The cluster's request counters on the emulator; `None` on the real backend, which has
/// none. Counter checks go inside `if let Some(..)`, so the rest of a test runs on both.
pub fn counts(cluster: &mcr_envtest::TestCluster) -> Option<mcr_envtest::RequestCounts> {
    (!cluster.backend().is_real()).then(|| cluster.requests())
}
