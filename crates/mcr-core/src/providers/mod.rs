//! Small providers: [`single`] (one fixed cluster), [`nop`] (no cluster) and [`clusters`]
//! (clusters added and removed by code, for tests and embedding).
//!
//! ```no_run
//! # async fn f(client: kube::Client) {
//! use std::sync::Arc;
//! use mcr_core::{Cluster, Provider, providers::single::SingleProvider};
//!
//! let provider: Arc<dyn Provider> = Arc::new(SingleProvider::new("local", Cluster::new("local", client)));
//! # }
//! ```

/// Implements [`Provider`](crate::Provider) for a provider that looks its clusters up through
/// its `engagements()` handle and runs itself as its
/// [`ProviderRunnable`](crate::ProviderRunnable).
macro_rules! provider_over_clusters {
    ($provider:ty) => {
        impl $crate::Provider for $provider {
            fn get<'a>(
                &'a self,
                name: &'a $crate::ClusterName,
            ) -> $crate::BoxFuture<'a, Result<$crate::Cluster, $crate::Error>> {
                Box::pin(async move { self.engagements().get(name) })
            }

            fn index_field<'a>(
                &'a self,
                index: &'a $crate::FieldIndex,
            ) -> $crate::BoxFuture<'a, Result<(), $crate::Error>> {
                Box::pin(async move { self.engagements().register_index(index) })
            }

            fn runnable(&self) -> Option<&dyn $crate::ProviderRunnable> {
                Some(self)
            }
        }
    };
}
use provider_over_clusters;

pub mod clusters;
pub mod nop;
pub mod single;
