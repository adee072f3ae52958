//! Things the manager runs: controllers and user tasks.

use std::sync::Arc;

use mcr_core::{Aware, BoxFuture, MemberStatus};
use tokio_util::sync::CancellationToken;

use crate::error::BoxError;

/// A long-running task owned by the [`Manager`](crate::Manager).
///
/// `start` runs until `token` is cancelled, then cleans up and returns. Runnables that return
/// true from [`needs_leader_election`](Runnable::needs_leader_election) (the default) run only
/// while this manager holds the leader lease. A runnable that wants to know about clusters
/// implements [`Aware`] (the one trait for being told about clusters) and returns itself from
/// [`aware`](Runnable::aware): the manager engages every cluster with it, including the ones
/// engaged before it was added.
///
/// ```
/// use std::sync::Arc;
/// use mcr_core::BoxFuture;
/// use mcr_manager::{BoxError, Runnable};
/// use tokio_util::sync::CancellationToken;
///
/// struct Heartbeat;
///
/// impl Runnable for Heartbeat {
///     fn name(&self) -> &str { "heartbeat" }
///     fn start(self: Arc<Self>, token: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
///         Box::pin(async move {
///             token.cancelled().await;
///             Ok(())
///         })
///     }
/// }
/// ```
pub trait Runnable: Send + Sync + 'static {
    /// A name for logs and errors.
    fn name(&self) -> &str;

    /// Runs until `token` is cancelled.
    fn start(self: Arc<Self>, token: CancellationToken)
    -> BoxFuture<'static, Result<(), BoxError>>;

    /// Whether this runs only on the elected leader (default: yes).
    fn needs_leader_election(&self) -> bool {
        true
    }

    /// Whether this runnable serves the members on every replica, leader or not (a webhook
    /// server answering the members' reviews: every replica behind its Service is called).
    /// With leader election and no sharding, the manager then runs the provider on every
    /// replica, so that standbys engage the members too, read-only: their caches open and
    /// sync, while the controllers and every other runnable that needs the leader still wait
    /// for the Lease (as controller-runtime starts its caches, and serves its webhooks, on
    /// every replica). Asked when the manager starts. Default: no.
    fn serves_members(&self) -> bool {
        false
    }

    /// The runnable's side that is told about clusters, if it wants them: the manager calls
    /// [`Aware::engage`] on it for every engaged cluster (`token` fires when the cluster
    /// leaves), so it must not block. Default: none.
    fn aware(&self) -> Option<&dyn Aware> {
        None
    }

    /// What this runnable knows about members that the provider does not: for example the
    /// webhook configurations it writes into each member, and a departed member whose cleanup
    /// keeps failing. The manager reports them with the provider's in
    /// [`Manager::member_statuses`](crate::Manager::member_statuses) (and so in
    /// `cluster_statuses`, `/clusters` and the `mcr_members` gauge), each under its own
    /// [`MemberStatus::provider`] name. Contract: a lookup in memory, it must not block.
    /// Default: none.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcr_core::{BoxFuture, MemberState, MemberStatus};
    /// use mcr_manager::{BoxError, Runnable};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// struct Cleanup;
    ///
    /// impl Runnable for Cleanup {
    ///     fn name(&self) -> &str { "cleanup" }
    ///     fn start(self: Arc<Self>, token: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
    ///         Box::pin(async move { token.cancelled().await; Ok(()) })
    ///     }
    ///     fn member_statuses(&self) -> Vec<MemberStatus> {
    ///         let failed = MemberState::Failed { reason: "member unreachable".into(), retry_in: None };
    ///         vec![MemberStatus::new("cleanup", "gone".into(), failed)]
    ///     }
    /// }
    /// ```
    fn member_statuses(&self) -> Vec<MemberStatus> {
        Vec::new()
    }
}
