//! Test hooks of a [`TestCluster`]: stop and restart, network partitions, latency, injected
//! errors, watch-cache compaction and request counters.

use std::time::Duration;

use super::{Kind, TestCluster};
use crate::counters::RequestCounts;
use crate::faults::Faults;
use crate::faults::{ErrorRule, Mode, Partition};
use crate::server::Shared;
use crate::{Error, backend};

impl TestCluster {
    /// The emulator's state; panics naming `hook` on a real cluster.
    fn emulated(&self, hook: &str) -> &Shared {
        match &self.inner.kind {
            Kind::Emulated { shared, .. } => shared,
            Kind::Real(_) => backend::emulator_only(hook, self.name()),
        }
    }

    /// The link state of either backend.
    fn faults(&self) -> &Faults {
        match &self.inner.kind {
            Kind::Emulated { shared, .. } => &shared.faults,
            Kind::Real(control) => control.faults(),
        }
    }

    /// Opens or closes the HTTPS listener (or the real cluster's proxy) to match the link.
    fn sync_listener(&self, mode: Mode) -> Result<(), Error> {
        match &self.inner.kind {
            Kind::Emulated {
                https: Some(super::Endpoint::Own { server, .. }),
                ..
            } => {
                if mode == Mode::Down {
                    server.unbind();
                } else {
                    server.bind()?;
                }
            }
            // A shared port stays open for the other clusters: a request for this one is
            // refused by `Faults::admit`, and its watches end with the link's epoch.
            Kind::Emulated { .. } => {}
            Kind::Real(control) => control.apply(mode),
        }
        Ok(())
    }

    fn sync_listener_logged(&self, mode: Mode) {
        if let Err(err) = self.sync_listener(mode) {
            tracing::warn!(cluster = %self.name(), %err, "could not re-open the HTTPS listener");
        }
    }

    /// Stops serving: connections are refused, requests fail, open watches end. Data is kept.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// cluster.stop().await;
    /// assert!(cluster.client().apiserver_version().await.is_err());
    /// cluster.restart().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// On the real backend the proxy refuses connections and the API server process is
    /// stopped (SIGTERM, SIGKILL after 10 s); etcd keeps the data.
    pub async fn stop(&self) {
        tracing::info!(cluster = %self.name(), "stopping");
        if let Kind::Real(control) = &self.inner.kind {
            return control.stop().await;
        }
        let mode = self.faults().set_stopped(true);
        self.sync_listener_logged(mode);
    }

    /// Serves again after [`stop`](Self::stop): same port, token, CA and data.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// cluster.stop().await;
    /// cluster.restart().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// On the real backend this starts a new API server process and returns once it is ready
    /// (seconds).
    pub async fn restart(&self) -> Result<(), Error> {
        tracing::info!(cluster = %self.name(), "restarting");
        if let Kind::Real(control) = &self.inner.kind {
            return control.restart().await;
        }
        let mode = self.faults().set_stopped(false);
        self.sync_listener(mode)
    }

    /// Partitions the cluster from its clients (see [`Partition`]) until [`heal`](Self::heal).
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// cluster.partition(mcr_envtest::Partition::Refuse);
    /// assert!(cluster.client().apiserver_version().await.is_err());
    /// cluster.heal();
    /// # Ok(()) }
    /// ```
    pub fn partition(&self, mode: Partition) {
        tracing::info!(cluster = %self.name(), ?mode, "partitioned");
        let mode = self.faults().set_partition(Some(mode));
        self.sync_listener_logged(mode);
    }

    /// Ends a partition; requests hung by [`Partition::Hang`] proceed.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// cluster.partition(mcr_envtest::Partition::Hang);
    /// cluster.heal();
    /// # Ok(()) }
    /// ```
    pub fn heal(&self) {
        tracing::info!(cluster = %self.name(), "healed");
        let mode = self.faults().set_partition(None);
        self.sync_listener_logged(mode);
    }

    /// Forgets the watch history: a watch from an older resourceVersion gets 410 Expired.
    /// Emulator-only: panics on the real backend.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// cluster.compact();
    /// # Ok(()) }
    /// ```
    pub fn compact(&self) {
        self.emulated("compact").engine.compact();
    }

    /// Adds `latency` to every request (`None` removes it).
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// cluster.set_latency(Some(std::time::Duration::from_millis(50)));
    /// # Ok(()) }
    /// ```
    pub fn set_latency(&self, latency: Option<Duration>) {
        self.faults().set_latency(latency);
    }

    /// Answers matching requests with an error `Status` (see [`ErrorRule`]).
    /// Emulator-only: panics on the real backend.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// cluster.inject_error(mcr_envtest::ErrorRule::new(500).verb("list").times(1));
    /// # Ok(()) }
    /// ```
    pub fn inject_error(&self, rule: ErrorRule) {
        self.emulated("inject_error").faults.add_rule(rule);
    }

    /// Removes latency, error rules and any partition (a stopped cluster stays stopped).
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// cluster.clear_faults();
    /// # Ok(()) }
    /// ```
    pub fn clear_faults(&self) {
        let mode = self.faults().clear();
        self.sync_listener_logged(mode);
    }

    /// A snapshot of the request counters. Emulator-only: panics on the real backend.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// assert_eq!(cluster.requests().total(), 0);
    /// # Ok(()) }
    /// ```
    pub fn requests(&self) -> RequestCounts {
        self.emulated("requests").counters.snapshot()
    }

    /// How many `verb` requests went to `resource` (see [`RequestCounts`] for the names).
    /// Emulator-only: panics on the real backend.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// assert_eq!(cluster.request_count("watch", "configmaps"), 0);
    /// # Ok(()) }
    /// ```
    pub fn request_count(&self, verb: &str, resource: &str) -> u64 {
        self.emulated("request_count")
            .counters
            .snapshot()
            .get(verb, resource)
    }

    /// Sets every counter back to zero. Emulator-only: panics on the real backend.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start("a").await?;
    /// cluster.reset_request_counts();
    /// # Ok(()) }
    /// ```
    pub fn reset_request_counts(&self) {
        self.emulated("reset_request_counts").counters.reset();
    }

    /// Whether [`stop`](Self::stop) was called without a [`restart`](Self::restart) since.
    pub(crate) fn is_stopped(&self) -> bool {
        self.faults().is_stopped()
    }
}
