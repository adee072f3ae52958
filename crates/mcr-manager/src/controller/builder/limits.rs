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
    /// cluster whose API server hangs can never take every slot. Several hung clusters are
    /// handled by [`stalled_after`](Self::stalled_after).
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

    /// A cluster that has reconciles in flight and none of whose reconciles finished for
    /// `period` (default **10 s**) is *stalled*: it starts no new reconcile until one of its
    /// reconciles finishes, and its in-flight reconciles stop counting against
    /// [`concurrency`](Self::concurrency), so their slots go to the clusters that make
    /// progress. This is what keeps any number of hung members (an API server that accepts
    /// requests and never answers) from starving the healthy ones with default settings: they
    /// hold no slot of the others once `period` has passed. A slow cluster that keeps finishing
    /// reconciles never stalls. Stalled reconciles keep running (at most `concurrency` plus
    /// what stalled clusters held, each at most its
    /// [per-cluster cap](Self::max_in_flight_per_cluster)); a
    /// [`reconcile_timeout`](Self::reconcile_timeout) cuts them short.
    ///
    /// Raise it when reconciles legitimately run longer than 10 s each while none of their
    /// cluster's others finishes; a `period` of zero counts a cluster as stalled as soon as a
    /// check runs while nothing of it finished since its reconciles started.
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.stalled_after(std::time::Duration::from_secs(30));
    /// # }
    /// ```
    #[must_use]
    pub fn stalled_after(mut self, period: Duration) -> Self {
        self.limits.stalled_after = period;
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
