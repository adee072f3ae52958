//! The name a cache goes by: the one its cluster was engaged under ([`Cache::engaged_as`]).

use super::Cache;
use crate::ClusterName;

impl Cache {
    /// The name of the cluster this cache belongs to, as its logs and errors give it: the name
    /// it was engaged under (the first one, when the engagement table engaged it under
    /// several), else the name it was built with.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// assert_eq!(c.cache().cluster(), c.name()); // before any engagement
    /// # }
    /// ```
    pub fn cluster(&self) -> &ClusterName {
        self.inner.engaged_as.get().unwrap_or(&self.inner.cluster)
    }

    /// Records the name the cluster was engaged under (the engagement table calls it), so that
    /// this cache's logs and errors, and those of informers opened from now on, use it: a
    /// cluster engaged through the multi provider as `kind#dev` is `kind#dev` everywhere, not
    /// `dev`. The first engagement's name stays.
    pub(crate) fn engaged_as(&self, name: &ClusterName) {
        if self.inner.engaged_as.set(name.clone()).is_err() && self.cluster() != name {
            tracing::debug!(cluster = %self.cluster(), also = %name, "cluster engaged under a second name");
        }
    }
}
