//! [`MemberProvider`]: the [`Provider`] implementation of every provider built on [`Members`].

use crate::{BoxFuture, Cluster, ClusterName, Error, FieldIndex, Provider, ProviderRunnable};

use super::Members;

/// A provider whose clusters are its [`Members`]. Implementing it gives the
/// [`Provider`] implementation: `get` and `index_field` served by the members' clusters,
/// `runnable` returning the provider's [`ProviderRunnable`].
///
/// ```
/// use std::sync::Arc;
/// use mcr_core::members::{MemberProvider, Members};
/// use mcr_core::{Aware, BoxFuture, Error, Provider, ProviderRunnable};
/// use tokio_util::sync::CancellationToken;
///
/// struct Fixed { members: Members }
/// impl MemberProvider for Fixed {
///     fn members(&self) -> &Members { &self.members }
/// }
/// impl ProviderRunnable for Fixed {
///     fn start<'a>(&'a self, token: CancellationToken, _: Arc<dyn Aware>) -> BoxFuture<'a, Result<(), Error>> {
///         Box::pin(async move { token.cancelled().await; Ok(()) })
///     }
/// }
/// let provider: Arc<dyn Provider> = Arc::new(Fixed { members: Members::new(Default::default()) });
/// assert!(provider.runnable().is_some());
/// ```
pub trait MemberProvider: ProviderRunnable + Send + Sync + 'static {
    /// The provider's members.
    fn members(&self) -> &Members;
}

impl<T: MemberProvider> Provider for T {
    fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, Error>> {
        Box::pin(async move { self.members().clusters().get(name) })
    }

    fn index_field<'a>(&'a self, index: &'a FieldIndex) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.members().clusters().index_field(index))
    }

    fn runnable(&self) -> Option<&dyn ProviderRunnable> {
        Some(self)
    }
}
