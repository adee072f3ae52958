//! Per-cluster credential gauges, refreshed from each cluster's
//! [`CredentialStatus`](mcr_core::credentials::CredentialStatus) on every scrape.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `mcr_cluster_credentials_expiry_timestamp_seconds` | gauge | cluster (Unix time the current credentials expire) |
//! | `mcr_cluster_credentials_expired` | gauge | cluster (1 past expiry: the cluster cannot authenticate) |
//! | `mcr_cluster_credentials_renewal_failing` | gauge | cluster (1 while renewal attempts fail) |
//! | `mcr_cluster_credentials_renewal_failures` | gauge | cluster (failed attempts since the last success) |
//!
//! Only clusters whose client renews credentials in place have these series; the credentials
//! themselves never appear.

use std::time::UNIX_EPOCH;

use mcr_core::credentials::CredentialStatus;
use prometheus_client::{
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

use super::label::LabelValue;

type Labels = [(&'static str, LabelValue); 1];

/// The credential gauges.
#[derive(Clone, Debug, Default)]
pub(crate) struct CredentialMetrics {
    expiry: Family<Labels, Gauge>,
    expired: Family<Labels, Gauge>,
    failing: Family<Labels, Gauge>,
    failures: Family<Labels, Gauge>,
}

impl CredentialMetrics {
    /// Registers the gauges on `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "mcr_cluster_credentials_expiry_timestamp_seconds",
            "Unix time at which the cluster's current credentials expire",
            m.expiry.clone(),
        );
        registry.register(
            "mcr_cluster_credentials_expired",
            "Whether the cluster's credentials are past their expiry (1) or not (0)",
            m.expired.clone(),
        );
        registry.register(
            "mcr_cluster_credentials_renewal_failing",
            "Whether renewing the cluster's credentials is failing (1) or not (0)",
            m.failing.clone(),
        );
        registry.register(
            "mcr_cluster_credentials_renewal_failures",
            "Failed credential renewal attempts since the last success",
            m.failures.clone(),
        );
        m
    }

    /// Replaces every series with `states` (departed clusters vanish).
    pub(crate) fn set(&self, states: &[(String, CredentialStatus)]) {
        self.expiry.clear();
        self.expired.clear();
        self.failing.clear();
        self.failures.clear();
        for (cluster, status) in states {
            let labels = [("cluster", LabelValue::from(cluster.as_str()))];
            if let Some(at) = status.expires_at {
                let secs = at
                    .duration_since(UNIX_EPOCH)
                    .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
                    .unwrap_or(0);
                self.expiry.get_or_create(&labels).set(secs);
            }
            self.expired
                .get_or_create(&labels)
                .set(i64::from(status.is_expired()));
            self.failing
                .get_or_create(&labels)
                .set(i64::from(status.is_renewal_failing()));
            self.failures
                .get_or_create(&labels)
                .set(i64::from(status.consecutive_failures));
        }
    }
}
