//! What a reconciler gets besides the object: the cluster and the user's data.

use std::{ops::Deref, sync::Arc};

use mcr_core::{Cluster, ClusterName};
use tokio_util::sync::CancellationToken;

/// The context of one reconcile: the cluster the object lives in, and the user's data.
///
/// It dereferences to the user's data, so kube-runtime code that reads `ctx.some_field` keeps
/// compiling; what changes is that the client comes from [`Context::client`] (the object's
/// cluster) instead of a single global client.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::{Api, runtime::controller::Action};
/// use mcr_manager::Context;
///
/// struct Data { greeting: String }
///
/// async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, kube::Error> {
///     let api: Api<ConfigMap> = Api::default_namespaced(ctx.client());
///     tracing::info!(cluster = %ctx.cluster_name(), "{}", ctx.greeting);
///     Ok(Action::await_change())
/// }
/// ```
pub struct Context<T> {
    cluster: Cluster,
    name: ClusterName,
    data: Arc<T>,
    cancel: CancellationToken,
}

impl<T> Context<T> {
    /// A context for a reconcile in `cluster` (built by the runtime; public for tests).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(cluster: mcr_core::Cluster) {
    /// let ctx = mcr_manager::Context::new(cluster.clone(), Arc::new(()));
    /// assert_eq!(ctx.cluster_name(), cluster.name());
    /// # }
    /// ```
    pub fn new(cluster: Cluster, data: Arc<T>) -> Self {
        let name = cluster.name().clone();
        Self::engaged_as(name, cluster, data)
    }

    /// A context for a reconcile in `cluster`, engaged under `name`: the name the fleet knows
    /// it by, which may differ from [`Cluster::name`] (e.g. `kind#dev` under the multi
    /// provider, where the cluster itself is `dev`).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(cluster: mcr_core::Cluster) {
    /// let ctx = mcr_manager::Context::engaged_as("kind#dev".into(), cluster, Arc::new(()));
    /// assert_eq!(ctx.cluster_name().as_str(), "kind#dev");
    /// # }
    /// ```
    pub fn engaged_as(name: ClusterName, cluster: Cluster, data: Arc<T>) -> Self {
        Self {
            cluster,
            name,
            data,
            cancel: CancellationToken::new(),
        }
    }

    /// This context with `token` as its cluster's cancellation (see [`Context::cancellation`]).
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # fn demo(cluster: mcr_core::Cluster) {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let ctx = mcr_manager::Context::new(cluster, Arc::new(())).with_cancellation(token.clone());
    /// token.cancel();
    /// assert!(ctx.cancellation().is_cancelled());
    /// # }
    /// ```
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The token cancelled when the object's cluster leaves the controller (removed, or
    /// replaced by a new instance), and at the latest once the controller has stopped. When the
    /// cluster leaves, the runtime drops the reconcile at its next await; hand the token to
    /// work the reconcile spawns so that it stops too.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let token = ctx.cancellation().clone();
    /// tokio::spawn(async move {
    ///     tokio::select! {
    ///         () = token.cancelled() => {}
    ///         () = async { /* long-running side work */ } => {}
    ///     }
    /// });
    /// # }
    /// ```
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Completes when [`cancellation`](Self::cancellation) fires.
    ///
    /// ```no_run
    /// # async fn demo(ctx: mcr_manager::Context<()>) {
    /// ctx.cancelled().await;
    /// # }
    /// ```
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// The cluster the object lives in (its client, cache and indexes).
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let synced = ctx.cluster().cache().is_synced();
    /// # }
    /// ```
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The name the cluster is engaged under, the same as in the request (empty for the host
    /// cluster). Pass it to `Manager::cluster` to reach this cluster again.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// println!("reconciling in {}", ctx.cluster_name());
    /// # }
    /// ```
    pub fn cluster_name(&self) -> &ClusterName {
        &self.name
    }

    /// A client for the object's cluster.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// let api: kube::Api<ConfigMap> = kube::Api::default_namespaced(ctx.client());
    /// # }
    /// ```
    pub fn client(&self) -> kube::Client {
        self.cluster.client()
    }

    /// The user's data, shared by every reconcile of the controller.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<String>) {
    /// let data: std::sync::Arc<String> = ctx.data().clone();
    /// # }
    /// ```
    pub fn data(&self) -> &Arc<T> {
        &self.data
    }
}

impl<T> Clone for Context<T> {
    fn clone(&self) -> Self {
        Self {
            cluster: self.cluster.clone(),
            name: self.name.clone(),
            data: self.data.clone(),
            cancel: self.cancel.clone(),
        }
    }
}

impl<T> Deref for Context<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T> std::fmt::Debug for Context<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cluster", &self.name)
            .finish_non_exhaustive()
    }
}
