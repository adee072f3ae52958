//! The builder's bounds on reconciles: per-cluster cap, reconcile timeout, shutdown grace.

use std::{fmt::Debug, hash::Hash, time::Duration};

use kube::Resource;
use serde::de::DeserializeOwned;

use super::Builder;

impl<K> Builder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    /// At most `n` reconciles of one cluster at once (at least 1, at most
    /// [`concurrency`](Self::concurrency)). Default: three quarters of the concurrency, so one
    /// cluster whose API server hangs can never take every slot. Lower it for a large fleet
    /// where several members may hang at once.
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.concurrency(32).max_in_flight_per_cluster(4);
    /// # }
    /// ```
    #[must_use]
    pub fn max_in_flight_per_cluster(mut self, n: usize) -> Self {
        self.limits.per_cluster = Some(n);
        self
    }

    /// Drops a reconcile still running after `timeout` and retries it with backoff (counted as
    /// an error). Default: no timeout (member clients still time out their requests).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.reconcile_timeout(std::time::Duration::from_secs(60));
    /// # }
    /// ```
    #[must_use]
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.limits.reconcile_timeout = Some(timeout);
        self
    }

    /// How long a stopping controller (shutdown, leadership lost) lets in-flight reconciles
    /// finish before it drops them (default 30 s). With leader election the manager drops them
    /// sooner if the Lease requires it (see `LeaderElection`).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.shutdown_grace(std::time::Duration::from_secs(5));
    /// # }
    /// ```
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.limits.shutdown_grace = grace;
        self
    }
}
