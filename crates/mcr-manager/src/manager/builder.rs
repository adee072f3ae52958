//! Building a [`Manager`]: [`ManagerBuilder`], [`Manager::new`] and [`Manager::builder`].

use std::{
    net::SocketAddr,
    sync::{Arc, atomic::AtomicBool},
};

use mcr_core::{Cluster, ClusterName, Provider};
use parking_lot::Mutex;

use super::{Inner, Manager, State};
#[cfg(feature = "leader-election")]
use crate::LeaderElection;
use crate::Metrics;

/// Builds a [`Manager`].
///
/// ```no_run
/// # async fn demo(client: kube::Client) {
/// let mgr = mcr_manager::Manager::builder(client)
///     .metrics_address(([0, 0, 0, 0], 8080).into())
///     .build();
/// # }
/// ```
#[must_use]
pub struct ManagerBuilder {
    host: Cluster,
    provider: Option<Arc<dyn Provider>>,
    metrics: Option<Metrics>,
    metrics_addr: Option<SocketAddr>,
    http_options: crate::HttpOptions,
    endpoints: crate::health::Endpoints,
    #[cfg(feature = "leader-election")]
    leader_election: Option<LeaderElection>,
    sharding: Option<crate::Sharding>,
    default_namespaces: Vec<String>,
    max_syncing: Option<usize>,
}

impl std::fmt::Debug for ManagerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerBuilder").finish_non_exhaustive()
    }
}

impl ManagerBuilder {
    /// Adds the provider whose clusters controllers reconcile. A provider with a discovery
    /// loop is started by [`Manager::run`].
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(client: kube::Client) {
    /// let provider = Arc::new(mcr_core::providers::clusters::ClustersProvider::new());
    /// let mgr = mcr_manager::Manager::builder(client).provider(provider).build();
    /// # }
    /// ```
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on this address while running (port 0
    /// picks a free port; see [`Manager::http_addr`]).
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client).metrics_address(([127, 0, 0, 1], 0).into()).build();
    /// # }
    /// ```
    pub fn metrics_address(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Limits of the HTTP server started by [`metrics_address`](Self::metrics_address)
    /// (header timeout, connection cap, connection age); see [`HttpOptions`](crate::HttpOptions).
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let opts = mcr_manager::HttpOptions::default().max_connections(16);
    /// let mgr = mcr_manager::Manager::builder(client).http_options(opts).build();
    /// # }
    /// ```
    pub fn http_options(mut self, options: crate::HttpOptions) -> Self {
        self.http_options = options;
        self
    }

    /// Uses this metrics registry (e.g. one shared with other parts of the program).
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let metrics = mcr_manager::Metrics::new();
    /// let mgr = mcr_manager::Manager::builder(client).metrics(metrics.clone()).build();
    /// # }
    /// ```
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Runs controllers and the provider only while holding this Lease on the host cluster.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let le = mcr_manager::LeaderElection::new("my-controller", "kube-system");
    /// let mgr = mcr_manager::Manager::builder(client).leader_election(le).build();
    /// # }
    /// ```
    #[cfg(feature = "leader-election")]
    pub fn leader_election(mut self, config: LeaderElection) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// Shards the fleet with the other replicas of the same group: this replica engages and
    /// reconciles only the clusters it owns (see [`shard`](crate::shard) for the protocol and
    /// its guarantees). Off by default (this replica owns every cluster). Controllers and the
    /// provider run on every replica; with [`leader_election`](Self::leader_election) too,
    /// runnables that need a leader run on the elected replica only. [`Manager::run_until`]
    /// refuses settings that fail [`Sharding::validate`](crate::Sharding::validate)
    /// ([`Error::InvalidSharding`](crate::Error::InvalidSharding)).
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let sharding = mcr_manager::Sharding::new("my-controller").namespace("controllers");
    /// let mgr = mcr_manager::Manager::builder(client).sharding(sharding).build();
    /// # }
    /// ```
    pub fn sharding(mut self, sharding: crate::Sharding) -> Self {
        self.sharding = Some(sharding);
        self
    }

    /// Watches only these namespaces, unless a watch says otherwise
    /// ([`WatchOptions::namespace`](crate::WatchOptions::namespace),
    /// [`all_namespaces`](crate::WatchOptions::all_namespaces)): controller-runtime's
    /// `cache.Options.DefaultNamespaces`. Every watch of a namespaced type that the manager's
    /// controllers open, in the host and in every member, becomes one namespaced watch per
    /// namespace (`GET /api/v1/namespaces/<ns>/configmaps`), so a Role in each namespace is
    /// enough where a cluster-wide watch needs a ClusterRole. Watches of cluster-scoped types
    /// stay cluster-wide. Default: none, every watch is cluster-wide.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client).default_namespaces(["team-a", "team-b"]).build();
    /// assert_eq!(mgr.default_namespaces(), ["team-a", "team-b"]);
    /// # }
    /// ```
    pub fn default_namespaces<I, S>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.default_namespaces = namespaces.into_iter().map(Into::into).collect();
        self
    }

    /// At most `max` members open their informers and list at a time (default 64). A provider that discovers
    /// thousands of members at once brings them up `max` at a time; the others wait their turn,
    /// and the wait does not count against the provider's sync timeout (see
    /// [`Engagements::with_max_syncing`](mcr_core::Engagements::with_max_syncing)). Raise it on
    /// a large machine with fast members; lower it when members are slow to list.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client).max_syncing(16).build();
    /// # }
    /// ```
    pub fn max_syncing(mut self, max: usize) -> Self {
        self.max_syncing = Some(max);
        self
    }

    /// Adds a liveness check to `/healthz` (and `/livez`): a named async function, run on
    /// every request, bounded by [`HttpOptions::check_timeout`](crate::HttpOptions::check_timeout)
    /// (5 s by default; a check that takes longer fails). All checks run at once; `/healthz`
    /// answers 503 naming each failing check and its reason, else `ok`.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client)
    ///     .health_check("worker-loop", || async { Ok::<(), String>(()) })
    ///     .build();
    /// # }
    /// ```
    pub fn health_check<F, Fut, E>(mut self, name: impl Into<String>, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display,
    {
        self.endpoints.add_health(name.into(), check);
        self
    }

    /// Adds a readiness check to `/readyz`, next to the manager's own (host cache synced,
    /// provider started), with the same bound as [`health_check`](Self::health_check).
    /// Readiness never waits on a member cluster unless a check of yours does: keep member
    /// clusters out of readiness checks, or one unreachable member makes every replica unready.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let db = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    /// let mgr = mcr_manager::Manager::builder(client)
    ///     .ready_check("database", move || {
    ///         let up = db.load(std::sync::atomic::Ordering::Relaxed);
    ///         async move { if up { Ok(()) } else { Err("no connection") } }
    ///     })
    ///     .build();
    /// # }
    /// ```
    pub fn ready_check<F, Fut, E>(mut self, name: impl Into<String>, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display,
    {
        self.endpoints.add_ready(name.into(), check);
        self
    }

    /// Serves `handler` at `path` on the manager's HTTP endpoint (exact path match; the
    /// handler gets the request head, the body is not read). The manager's own paths
    /// (`/metrics`, `/clusters`, `/healthz`, `/livez`, `/readyz`) cannot be taken: such a
    /// handler is logged as an error and ignored.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client)
    ///     .http_handler("/version", |_req| async { http::Response::new("v1.2.3\n".to_owned()) })
    ///     .build();
    /// # }
    /// ```
    pub fn http_handler<F, Fut>(mut self, path: impl Into<String>, handler: F) -> Self
    where
        F: Fn(http::request::Parts) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = http::Response<String>> + Send + 'static,
    {
        self.endpoints.handler(path.into(), handler);
        self
    }

    /// The manager.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client).build();
    /// # }
    /// ```
    pub fn build(self) -> Manager {
        let metrics = self.metrics.unwrap_or_default();
        let shard = self.sharding.map(|opts| {
            let coordinator = crate::shard::Coordinator::new(opts);
            let m = crate::shard::ShardMetrics::new();
            metrics.with_registry(|r| m.register(r));
            coordinator.set_metrics(m);
            Arc::new(coordinator)
        });
        // The process's one table of engaged clusters: the provider adds to it, the fleet
        // reads it, controllers and runnables subscribe to it.
        let mut table = mcr_core::Engagements::new();
        if let Some(max) = self.max_syncing {
            table = table.with_max_syncing(max);
        }
        if let Some(c) = &shard {
            let _ = table.coordinate(c.clone());
        }
        table.subscribe(Arc::new(super::clusters::Observer {
            metrics: metrics.clone(),
            shard: shard.clone(),
        }));
        Manager {
            inner: Arc::new(Inner {
                fleet: super::Fleet::over(self.host.clone(), table, shard.is_some()),
                host: self.host,
                provider: self.provider,
                metrics,
                metrics_addr: self.metrics_addr,
                http_options: self.http_options,
                endpoints: self.endpoints,
                #[cfg(feature = "leader-election")]
                leader_election: self.leader_election,
                leader: AtomicBool::new(false),
                shard,
                default_namespaces: self.default_namespaces,
                state: Mutex::new(State::default()),
            }),
        }
    }
}

impl Manager {
    /// A manager for the host cluster reached by `client`, with an optional provider.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), kube::Error> {
    /// let mgr = mcr_manager::Manager::new(kube::Client::try_default().await?, None);
    /// # Ok(()) }
    /// ```
    pub fn new(client: kube::Client, provider: Option<Arc<dyn Provider>>) -> Manager {
        let mut builder = Self::builder(client);
        builder.provider = provider;
        builder.build()
    }

    /// A [`ManagerBuilder`] for more options.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let mgr = mcr_manager::Manager::builder(client).build();
    /// # }
    /// ```
    pub fn builder(client: kube::Client) -> ManagerBuilder {
        Self::builder_with_host(Cluster::new(ClusterName::host(), client))
    }

    /// A [`ManagerBuilder`] around an existing host [`Cluster`], so that a provider which
    /// watches the host too (such as the namespace provider) shares the manager's host cache
    /// and its watches instead of opening a second set. [`Manager::host`] returns this
    /// cluster; `cluster(ClusterName::host())` answers with it.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let host = mcr_core::Cluster::new(mcr_core::ClusterName::host(), client);
    /// // e.g. NamespaceProvider::new(host.clone(), options) as the provider:
    /// let mgr = mcr_manager::Manager::builder_with_host(host.clone()).build();
    /// assert!(mgr.host().same_instance(&host));
    /// # }
    /// ```
    pub fn builder_with_host(host: Cluster) -> ManagerBuilder {
        ManagerBuilder {
            host,
            provider: None,
            metrics: None,
            metrics_addr: None,
            http_options: crate::HttpOptions::default(),
            endpoints: crate::health::Endpoints::default(),
            #[cfg(feature = "leader-election")]
            leader_election: None,
            sharding: None,
            default_namespaces: Vec::new(),
            max_syncing: None,
        }
    }
}
