//! [`NopProvider`]: a provider that never has a cluster.

use crate::{BoxFuture, Cluster, ClusterName, Error, FieldIndex, Provider};

/// A provider that never returns a cluster: [`get`](Provider::get) is always
/// [`Error::ClusterNotFound`], indexes are accepted and ignored, and it has no discovery loop.
/// Useful for a manager that only works on its host cluster.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use mcr_core::{cluster_not_found, providers::nop::NopProvider, Provider};
///
/// let p = NopProvider;
/// let err = p.get(&"x".into()).await.unwrap_err();
/// assert!(cluster_not_found(&err).is_some());
/// assert!(p.runnable().is_none());
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NopProvider;

impl Provider for NopProvider {
    fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, Error>> {
        Box::pin(async move { Err(Error::ClusterNotFound(name.clone())) })
    }

    fn index_field<'a>(&'a self, _index: &'a FieldIndex) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }
}
