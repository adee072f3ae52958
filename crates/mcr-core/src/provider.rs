//! The provider contract: [`Provider`], [`ProviderRunnable`] and [`Aware`].
//!
//! A *provider* knows a source of truth for the fleet (Secrets, files, ClusterProfiles, …). It
//! builds a [`Cluster`] for each member and hands it to the process's one table of engaged
//! clusters, [`Engagements::add`], which starts its cache, engages it with every subscriber
//! ([`Aware::engage`]: the manager's controllers and runnables), applies field indexes, waits
//! for sync and activates it. The traits are object-safe: the manager holds an
//! `Arc<dyn Provider>` and hands the provider its [`Engagements`] when it starts.

use tokio_util::sync::CancellationToken;

use crate::{Cluster, ClusterName, Engagements, Error, FieldIndex, MemberStatus};

/// A boxed, `Send` future (re-exported from `futures` so providers need no extra import).
pub type BoxFuture<'a, T> = futures::future::BoxFuture<'a, T>;

/// A source of clusters.
///
/// Implementations answer `get` and `index_field` from the [`Engagements`] handle they were
/// started with. See the crate documentation for a complete custom provider.
///
/// ```
/// use mcr_core::{BoxFuture, Cluster, ClusterName, Error, FieldIndex, Provider};
///
/// /// A provider without clusters.
/// struct Empty;
///
/// impl Provider for Empty {
///     fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, Error>> {
///         Box::pin(async move { Err(Error::ClusterNotFound(name.clone())) })
///     }
///     fn index_field<'a>(&'a self, _index: &'a FieldIndex) -> BoxFuture<'a, Result<(), Error>> {
///         Box::pin(async { Ok(()) })
///     }
/// }
/// let provider: std::sync::Arc<dyn Provider> = std::sync::Arc::new(Empty);
/// ```
pub trait Provider: Send + Sync + 'static {
    /// The engaged cluster of that name.
    ///
    /// Contract: returns `Err(Error::ClusterNotFound(name))` when no cluster of that name is
    /// currently engaged (never joined, not yet synced, or already left). Never blocks on the
    /// network: a lookup in memory.
    fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, Error>>;

    /// Registers a field index on every cluster, current and future, exactly once each.
    ///
    /// Contract: registering the same index (name and type) again is a no-op; the same name for
    /// a different type is `Err(Error::Index { .. })`. Clusters engaged later get the index
    /// before they are engaged.
    fn index_field<'a>(&'a self, index: &'a FieldIndex) -> BoxFuture<'a, Result<(), Error>>;

    /// `Some(self)` for providers that run a discovery loop, which the manager then starts.
    /// Defaults to `None` (a provider whose clusters are added by other means).
    fn runnable(&self) -> Option<&dyn ProviderRunnable> {
        None
    }

    /// Every member the provider knows, with where it stands: engaged, pending (being built
    /// or synced) or failed (with the redacted reason). The manager shows them in
    /// `cluster_statuses()`, `/clusters` and the `mcr_members` gauge, so a member that never
    /// engages is visible outside the logs.
    ///
    /// Contract: a lookup in memory; names as they are (or would be) engaged. Defaults to
    /// none (a provider whose clusters are added by other means: the manager still sees the
    /// engaged ones). Every provider built on [`members`](crate::members)
    /// ([`MemberProvider`](crate::members::MemberProvider)) reports its members.
    fn member_statuses(&self) -> Vec<MemberStatus> {
        Vec::new()
    }
}

/// The discovery loop of a provider.
///
/// ```
/// use mcr_core::{BoxFuture, Engagements, Error, ProviderRunnable};
/// use tokio_util::sync::CancellationToken;
///
/// struct Idle;
/// impl ProviderRunnable for Idle {
///     fn start<'a>(
///         &'a self,
///         token: CancellationToken,
///         _engagements: Engagements,
///     ) -> BoxFuture<'a, Result<(), Error>> {
///         Box::pin(async move {
///             token.cancelled().await;
///             Ok(())
///         })
///     }
/// }
/// ```
pub trait ProviderRunnable: Send + Sync {
    /// Runs discovery: adds clusters to `engagements` ([`Engagements::add`]) as they appear
    /// and removes them as they go. A provider narrows the handle with
    /// [`prefixed("")`](Engagements::prefixed), so that it lists and removes only its own.
    ///
    /// Contract: returns only when `token` is cancelled (then `Ok(())`) or on a fatal error.
    /// A failing *member* cluster is logged and retried, never fatal. Clusters engaged by the
    /// loop use child tokens of `token`, so cancelling it stops them all.
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        engagements: Engagements,
    ) -> BoxFuture<'a, Result<(), Error>>;
}

/// Something that wants to know about engaged clusters: a controller, a runnable, anything
/// [subscribed](Engagements::subscribe) to the table. [`Engagements`] is one too: engaging
/// with it by hand records a started cluster as active.
///
/// ```
/// use mcr_core::{Aware, Cluster, ClusterName, Error};
/// use tokio_util::sync::CancellationToken;
///
/// struct Log;
/// impl Aware for Log {
///     fn engage(&self, _t: CancellationToken, name: ClusterName, _c: Cluster) -> Result<(), Error> {
///         println!("engaged {name}");
///         Ok(())
///     }
/// }
/// ```
pub trait Aware: Send + Sync + 'static {
    /// Tells that `cluster` is engaged under `name`.
    ///
    /// Contract: non-blocking (spawn work, do not await the network) and re-entrant. `token` is
    /// the lifetime of this engagement: when it is cancelled the cluster has left. Engaging the
    /// same instance ([`Cluster::same_instance`]) again is a no-op; a new instance under the same
    /// name replaces the old one. An error makes the caller remove the cluster again.
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), Error>;
}

impl<T: Aware + ?Sized> Aware for std::sync::Arc<T> {
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), Error> {
        (**self).engage(token, name, cluster)
    }
}
