//! How far a [`Cache`] is: its informers' initial lists, and how many watches it holds.

use std::{sync::Arc, time::Duration};

use super::{Cache, ErasedInformer, shared::Ready};
use crate::Error;

impl Cache {
    fn erased(&self) -> Vec<Arc<dyn ErasedInformer>> {
        self.inner
            .state
            .lock()
            .informers
            .values()
            .map(|e| e.erased.clone())
            .collect()
    }

    /// Waits until every informer requested so far has completed its initial list.
    ///
    /// Errors with [`Error::Refused`] as soon as the API server refuses an informer's list or
    /// watch with 401, 403, or 404 of the resource (naming the verb, the resource and the
    /// namespace), with [`Error::SyncTimeout`] (naming the cluster and a resource that did not
    /// sync) after `timeout` when nothing better is known, or [`Error::Stopped`] once the
    /// cluster's token has fired.
    ///
    /// ```no_run
    /// # async fn f(c: mcr_core::Cluster) -> Result<(), mcr_core::Error> {
    /// c.cache().wait_for_sync(std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), Error> {
        // `Duration::MAX` (or any timeout past the clock's range) waits without a deadline.
        let deadline = tokio::time::Instant::now().checked_add(timeout);
        for informer in self.erased() {
            let ready = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, informer.wait_ready()).await,
                None => Ok(informer.wait_ready().await),
            };
            match ready {
                Ok(Ready::Synced) => {}
                Ok(Ready::Stopped) => return Err(Error::Stopped(self.cluster().clone())),
                Ok(Ready::Refused(refusal)) => {
                    return Err(refusal.error(
                        self.cluster(),
                        informer.resource(),
                        informer.namespace(),
                    ));
                }
                Err(_) => {
                    return Err(Error::SyncTimeout {
                        cluster: self.cluster().clone(),
                        resource: informer.resource().to_owned(),
                        timeout,
                        last_error: informer.last_error(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether every informer has completed its initial list (true when there are none).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// let ready = c.cache().is_synced();
    /// # }
    /// ```
    pub fn is_synced(&self) -> bool {
        self.erased().iter().all(|i| i.is_synced())
    }

    /// How many watches this cache has (an informer over several namespaces counts one per
    /// namespace; see [`InformerOptions::namespaces`](crate::cache::InformerOptions::namespaces)).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// println!("{} watches", c.cache().informer_count());
    /// # }
    /// ```
    pub fn informer_count(&self) -> usize {
        self.inner.state.lock().informers.len()
    }

    /// How many watches this cache has in `namespace`, or, for `None`, across every namespace
    /// (cluster-wide watches, which need a ClusterRole). Each namespace scope of a type and set
    /// of options has one watch, however many informers share it.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// let cluster_wide = c.cache().watch_count(None);
    /// let in_team_a = c.cache().watch_count(Some("team-a"));
    /// # }
    /// ```
    pub fn watch_count(&self, namespace: Option<&str>) -> usize {
        self.inner
            .state
            .lock()
            .informers
            .values()
            .filter(|e| e.erased.namespace() == namespace)
            .count()
    }
}
