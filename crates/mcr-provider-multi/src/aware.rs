//! [`PrefixedAware`]: the adapter through which a child provider engages its clusters.

use std::sync::Arc;

use mcr_core::{Aware, Cluster, ClusterName, Error};
use tokio_util::sync::CancellationToken;

/// An [`Aware`] that engages every cluster with the outer `Aware` under
/// `<provider><separator><name>`.
///
/// [`MultiProvider`](crate::MultiProvider) starts each runnable child with one, so a provider
/// that runs as a controller on the host cluster (the kubeconfig provider, the namespace
/// provider, …) lives inside the multi provider unchanged. The cluster keeps its own
/// [`Cluster::name`]; the engagement name is prefixed, and the manager names the cluster's
/// cache (its logs and errors) by it. Tokens pass through untouched, so
/// cancelling one disengages the prefixed cluster.
///
/// ```
/// use std::sync::Arc;
/// use mcr_core::Registry;
/// use mcr_provider_multi::PrefixedAware;
///
/// let registry = Registry::new();
/// let aware = PrefixedAware::new("kind", "#", Arc::new(registry.clone()));
/// assert_eq!(aware.prefix(), "kind#");
/// ```
#[derive(Clone)]
pub struct PrefixedAware {
    prefix: String,
    outer: Arc<dyn Aware>,
}

impl std::fmt::Debug for PrefixedAware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefixedAware")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl PrefixedAware {
    /// Engages with `outer` under `<provider><separator><name>`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// let a = mcr_provider_multi::PrefixedAware::new("p", "/", Arc::new(mcr_core::Registry::new()));
    /// assert_eq!(a.prefix(), "p/");
    /// ```
    pub fn new(provider: &str, separator: &str, outer: Arc<dyn Aware>) -> Self {
        Self {
            prefix: format!("{provider}{separator}"),
            outer,
        }
    }

    /// The prefix put before every name (`<provider><separator>`).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// let a = mcr_provider_multi::PrefixedAware::new("p", "#", Arc::new(mcr_core::Registry::new()));
    /// assert_eq!(a.prefix(), "p#");
    /// ```
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

impl Aware for PrefixedAware {
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), Error> {
        let full = ClusterName::from(format!("{}{}", self.prefix, name));
        tracing::debug!(cluster = %full, "engaging child cluster");
        self.outer.engage(token, full, cluster)
    }

    /// The outer sharder, asked about the prefixed name.
    fn sharder(&self) -> Option<Arc<dyn mcr_core::shard::Sharder>> {
        let outer = self.outer.sharder()?;
        let prefix = self.prefix.clone();
        Some(Arc::new(mcr_core::shard::Mapped::new(outer, move |name| {
            ClusterName::from(format!("{prefix}{name}"))
        })))
    }

    fn shared(&self) -> Option<Arc<dyn Aware>> {
        Some(Arc::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use mcr_core::shard::{Ownership, Sharder};
    use tokio::sync::watch;

    use super::*;

    /// Owns `kind#a` only.
    struct Outer(watch::Sender<u64>);

    impl Sharder for Outer {
        fn owner(&self, name: &ClusterName) -> Ownership {
            if name.as_str() == "kind#a" {
                Ownership::Owned
            } else {
                Ownership::Elsewhere {
                    owner: Some("r2".into()),
                }
            }
        }
        fn changes(&self) -> watch::Receiver<u64> {
            self.0.subscribe()
        }
    }

    struct Sharded(Arc<Outer>);

    impl Aware for Sharded {
        fn engage(&self, _: CancellationToken, _: ClusterName, _: Cluster) -> Result<(), Error> {
            Ok(())
        }
        fn sharder(&self) -> Option<Arc<dyn Sharder>> {
            Some(self.0.clone())
        }
    }

    #[test]
    fn a_child_asks_the_outer_sharder_about_the_prefixed_name() {
        let outer = Arc::new(Sharded(Arc::new(Outer(watch::channel(0).0))));
        let child = PrefixedAware::new("kind", "#", outer);
        let sharder = child.sharder().expect("the outer sharder, mapped");
        assert!(sharder.owner(&"a".into()).is_owned());
        assert_eq!(sharder.owner(&"b".into()).owner(), Some("r2"));
        assert!(child.shared().is_some());
        // Without an outer sharder, none.
        let plain = PrefixedAware::new("kind", "#", Arc::new(mcr_core::Registry::new()));
        assert!(plain.sharder().is_none());
    }
}
