//! The builder's settings: name, concurrency, debounce, engage options, triggers.

use std::{fmt::Debug, hash::Hash, sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use kube::Resource;
use mcr_core::{Cluster, ClusterName};
use serde::de::DeserializeOwned;

use super::Builder;
use crate::controller::request::Request;

impl<K> Builder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    /// Renames the controller (metrics, logs, uniqueness within the manager).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.named("configmap-copier");
    /// # }
    /// ```
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// At most `n` reconciles at once across all clusters; `0` means unbounded. The same
    /// meaning as kube-runtime's `controller::Config::concurrency`. The default is **16**
    /// (kube-runtime's is 0, unbounded: one mcr controller spans a whole fleet, so it starts
    /// bounded; pass 0 for kube-runtime's behaviour).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.concurrency(4);
    /// # }
    /// ```
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Holds each request until no new request for the same object (in the same cluster)
    /// arrived for this long, so bursts collapse into one reconcile (default: none).
    ///
    /// Same rule as kube-runtime's `Controller::with_config(Config::default().debounce(..))`:
    /// every request, requeues included, is due at its time plus the period; a new event within
    /// the window pushes the reconcile back by a full period; a request already due (or a
    /// running object's follow-up that is already due) is not delayed further.
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.debounce(std::time::Duration::from_millis(200));
    /// # }
    /// ```
    #[must_use]
    pub fn debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// The controller's default [scope](crate::ClusterScope): where every input that does not
    /// choose one with [`WatchOptions::scope`](crate::WatchOptions::scope) watches, and so,
    /// for the reconciled type, where reconciles run. Default: the provider's clusters, or,
    /// when the manager has no provider, every cluster (the host and any engaged by hand).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// use mcr_manager::ClusterScope;
    /// let b = b.scope(ClusterScope::All); // the host too
    /// # }
    /// ```
    #[must_use]
    pub fn scope(mut self, scope: crate::ClusterScope) -> Self {
        self.scope = scope;
        self
    }

    /// Engage only the provider clusters for which `filter` returns true, for every input
    /// whatever its [scope](crate::ClusterScope). The filter picks among provider clusters;
    /// whether the host is watched is said by the scope alone ([`scope`](Self::scope)).
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.cluster_filter(|name, _cluster| name.as_str().starts_with("prod-"));
    /// # }
    /// ```
    #[must_use]
    pub fn cluster_filter(
        mut self,
        filter: impl Fn(&ClusterName, &Cluster) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.filter = Some(Arc::new(filter));
        self
    }

    /// Keep retrying (through the error policy) when a reconcile fails because its own
    /// cluster is gone (`mcr_core::cluster_not_found` names the request's cluster). Default:
    /// such reconciles end quietly. A `ClusterNotFound` for any other cluster always goes
    /// through the error policy.
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.retry_when_cluster_gone(true);
    /// # }
    /// ```
    #[must_use]
    pub fn retry_when_cluster_gone(mut self, retry: bool) -> Self {
        self.retry_when_gone = retry;
        self
    }

    /// Serve live changes before the work of initial lists (default: `true`). Requests from an
    /// informer's first list, from the replay to a new subscription and from a relist that
    /// found an object unchanged wait in a second queue, served (fairly across clusters) only
    /// when no live change is ready, so a live change in a synced cluster does not queue behind
    /// the initial reconciles of clusters that are joining (controller-runtime's priority
    /// queue). A live change for a key that waits there moves it ahead. `false` serves both in
    /// one line.
    ///
    /// ```no_run
    /// # fn demo(b: mcr_manager::Builder<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let b = b.live_changes_first(false);
    /// # }
    /// ```
    #[must_use]
    pub fn live_changes_first(mut self, first: bool) -> Self {
        self.live_first = first;
        self
    }

    /// Stop `for_` from triggering reconciles: the primary cache is still kept (the reconciler
    /// gets its objects from it), but only `owns`, `watches` and `reconcile_on` trigger.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// # use kube::runtime::reflector::ObjectRef;
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let b = mcr_manager::Controller::new(&mgr)
    ///     .for_::<ConfigMap>()
    ///     .without_primary_watch()
    ///     .watches::<Secret, _>(|s: Arc<Secret>, _| {
    ///         Some(ObjectRef::<ConfigMap>::new(s.metadata.name.as_deref().unwrap_or_default()))
    ///     });
    /// # }
    /// ```
    #[must_use]
    pub fn without_primary_watch(mut self) -> Self {
        // `for_*` always adds the primary watch first.
        if self.primary_watch && !self.inputs.is_empty() {
            self.inputs.remove(0);
            self.primary_watch = false;
        }
        self
    }

    /// Also reconcile every request this stream yields (any engaged cluster), like
    /// kube-runtime's `reconcile_on`.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::reflector::ObjectRef;
    /// # fn demo(b: mcr_manager::Builder<ConfigMap>) {
    /// let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    /// let b = b.reconcile_on(tokio_stream_like(rx));
    /// tx.send(mcr_manager::Request::new("east", ObjectRef::new("cm").within("default"))).ok();
    /// # }
    /// # fn tokio_stream_like<T: Send + 'static>(mut rx: tokio::sync::mpsc::UnboundedReceiver<T>)
    /// #   -> impl futures::Stream<Item = T> + Send + 'static {
    /// #   futures::stream::poll_fn(move |cx| rx.poll_recv(cx)) }
    /// ```
    #[must_use]
    pub fn reconcile_on(
        mut self,
        trigger: impl Stream<Item = Request<K>> + Send + 'static,
    ) -> Self {
        self.triggers.push(trigger.boxed());
        self
    }

    /// Calls `hook` with the outcome of every reconcile (its request, result and duration),
    /// like the stream kube-runtime's `Controller::run` yields: for tests, audits and custom
    /// metrics. Hooks run on the controller's loop: keep them short (send to a channel for
    /// anything slow). A panicking hook is logged and ignored. A reconcile cut short — by
    /// [`reconcile_timeout`](Self::reconcile_timeout) or because its cluster left — has no
    /// result and is not reported.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// use mcr_manager::ReconcileResult;
    /// # fn demo(b: mcr_manager::Builder<ConfigMap>) {
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let b = b.on_outcome(move |o| {
    ///     let ok = matches!(o.result, ReconcileResult::Ok(_));
    ///     let _ = tx.send((o.request.to_string(), ok));
    /// });
    /// # }
    /// ```
    #[must_use]
    pub fn on_outcome(
        mut self,
        hook: impl Fn(&crate::ReconcileOutcome<'_, K>) + Send + Sync + 'static,
    ) -> Self {
        self.on_outcome.push(Arc::new(hook));
        self
    }
}
