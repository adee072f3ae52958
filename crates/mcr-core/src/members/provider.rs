//! [`MemberProvider`]: the [`Provider`] and [`ProviderRunnable`] implementations of every
//! provider built on [`Members`].

use std::future::Future;

use tokio_util::sync::CancellationToken;

use crate::{
    BoxFuture, Cluster, ClusterName, Engagements, Error, FieldIndex, MemberStatus, Provider,
    ProviderRunnable,
};

use super::Members;

/// A provider whose clusters are its [`Members`]. Implementing it (two methods) gives the
/// [`Provider`] implementation (`get` and `index_field` served by the members' clusters,
/// `runnable` returning the provider, `member_statuses` from [`Members::member_statuses`]) and
/// the [`ProviderRunnable`] one (`start` [binds](Members::bind) the members to the
/// [`Engagements`] table it is given, then runs [`run`](MemberProvider::run)).
///
/// A provider usually names its tracing span on `run`, e.g. with
/// `#[tracing::instrument(name = "my_provider", skip_all)]`.
///
/// ```
/// use std::sync::Arc;
/// use mcr_core::members::{MemberProvider, Members};
/// use mcr_core::{Error, Provider};
/// use tokio_util::sync::CancellationToken;
///
/// struct Fixed { members: Members }
/// impl MemberProvider for Fixed {
///     fn members(&self) -> &Members { &self.members }
///     async fn run(&self, token: CancellationToken) -> Result<(), Error> {
///         let _guard = self.members.start_run("fixed")?;
///         token.cancelled().await;
///         Ok(())
///     }
/// }
/// let provider: Arc<dyn Provider> = Arc::new(Fixed { members: Members::new(Default::default()) });
/// assert!(provider.runnable().is_some());
/// ```
pub trait MemberProvider: Send + Sync + 'static {
    /// The provider's members.
    fn members(&self) -> &Members;

    /// The discovery loop, with the contract of [`ProviderRunnable::start`] (which runs it):
    /// returns only when `token` is cancelled (then `Ok(())`) or on a fatal error.
    fn run(&self, token: CancellationToken) -> impl Future<Output = Result<(), Error>> + Send;
}

impl<T: MemberProvider> Provider for T {
    fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, Error>> {
        Box::pin(async move { self.members().engagements().get(name) })
    }

    fn index_field<'a>(&'a self, index: &'a FieldIndex) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { self.members().index_field(index) })
    }

    fn runnable(&self) -> Option<&dyn ProviderRunnable> {
        Some(self)
    }

    fn member_statuses(&self) -> Vec<MemberStatus> {
        self.members().member_statuses()
    }
}

impl<T: MemberProvider> ProviderRunnable for T {
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        engagements: Engagements,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.members().bind(&engagements)?;
            self.run(token).await
        })
    }
}
