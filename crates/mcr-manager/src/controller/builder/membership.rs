//! The builder's per-member hooks: `on_join`, `on_leave`, `sweep`.

use std::{
    fmt::Debug, future::Future, hash::Hash, panic::AssertUnwindSafe, sync::Arc, time::Duration,
};

use futures::FutureExt;
use kube::Resource;
use mcr_core::ClusterName;
use serde::de::DeserializeOwned;

use super::{Builder, IntoRequest};
use crate::controller::membership::{Departure, JoinFn, LeaveFn, Members, Sweep};

impl<K> Builder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    /// Queues what `join` returns each time a member joins this controller: once per
    /// engagement, when its caches have synced and its reconciles may start (a new instance
    /// of a member, after new credentials that need a new server or CA, is a new engagement;
    /// so is a member coming back after it left, or moving back to this replica). A member
    /// that has no object of the reconciled type still gets reconciled this way: return the
    /// key its reconciler writes from (a reconciler taking a [`Request<K>`](crate::Request)
    /// sees it even when no such object exists). [`ObjectRef`](kube::runtime::reflector::ObjectRef)s
    /// land in the member; [`Request`](crate::Request)s may name any cluster. The host never
    /// "joins". A second call replaces the first hook.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::runtime::reflector::ObjectRef;
    /// # fn demo(b: mcr_manager::Builder<ConfigMap>) {
    /// // Every member gets a first reconcile of default/platform, whether or not it exists.
    /// let b = b.on_join(|_member| Some(ObjectRef::<ConfigMap>::new("platform").within("default")));
    /// # }
    /// ```
    #[must_use]
    pub fn on_join<I>(mut self, join: impl Fn(&ClusterName) -> I + Send + Sync + 'static) -> Self
    where
        I: IntoIterator,
        I::Item: IntoRequest<K>,
    {
        let join: JoinFn<K> = Arc::new(move |member: &ClusterName| {
            join(member)
                .into_iter()
                .map(|r| r.into_request(member))
                .collect()
        });
        self.on_join = Some(join);
        self
    }

    /// Runs `leave` once per departure of a member from this controller, for cleanup outside
    /// the member (a summary entry on the host, an object named after it). It runs:
    ///
    /// - **after every reconcile of that member still running** has ended. A member that
    ///   leaves the fleet ([`DepartureReason::LeftFleet`](crate::DepartureReason::LeftFleet))
    ///   lets its running reconciles finish (for at most the
    ///   [shutdown grace](Self::shutdown_grace), then they are cut), so a write a reconcile
    ///   had sent lands before the cleanup, never after it: one delete is enough. Without a
    ///   leave hook they are cut at their next `.await`, as before.
    /// - **until it succeeds**: an error, a panic or an attempt running past the
    ///   [reconcile timeout](Self::reconcile_timeout) (60 s without one) is logged with the
    ///   cluster's name and retried with backoff (200 ms doubling up to 30 s). Other members'
    ///   reconciles and departures do not wait for it.
    ///
    /// Not a departure, and no hook: a member replaced by a new instance of itself (it is
    /// still wanted here); a member that never joined; the controller or manager stopping
    /// (which disengages every member: a rolling update leaves host state alone). A member
    /// that joins again before its hook succeeded stops its retries: its join waits for an
    /// attempt in flight, then its reconciles start.
    ///
    /// **Sharded** ([`Sharding`](crate::Sharding)): the hook runs on the replica the member
    /// was engaged on. A member handed to another replica is a departure from this one with
    /// [`DepartureReason::MovedAway`](crate::DepartureReason::MovedAway) (its reconciles are cut
    /// at once: the new owner may start), and a join on the new one: clean up only what this
    /// replica alone kept. A member that leaves the fleet is
    /// [`LeftFleet`](crate::DepartureReason::LeftFleet) on the replica that owned it.
    ///
    /// Members that left while no replica ran are never departures: see
    /// [`sweep`](Self::sweep). A second call replaces the first hook.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::api::{Api, Patch, PatchParams};
    /// use mcr_manager::Departure;
    ///
    /// async fn forget(departure: Departure) -> Result<(), kube::Error> {
    ///     if !departure.reason().left_fleet() {
    ///         return Ok(()); // moved to another replica: its entry stays
    ///     }
    ///     let summary: Api<ConfigMap> = Api::namespaced(departure.host().client(), "default");
    ///     let entry = serde_json::json!({"data": {departure.cluster_name().key(): null}});
    ///     summary.patch("fleet-summary", &PatchParams::default(), &Patch::Merge(&entry)).await?;
    ///     Ok(())
    /// }
    /// # fn demo(b: mcr_manager::Builder<ConfigMap>) {
    /// let b = b.on_leave(forget);
    /// # }
    /// ```
    #[must_use]
    pub fn on_leave<F, Fut, E>(mut self, leave: F) -> Self
    where
        F: Fn(Departure) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let leave = Arc::new(leave);
        let erased: LeaveFn = Arc::new(move |departure: Departure| {
            let leave = leave.clone();
            async move {
                // A panic while the hook makes its future is the hook's too.
                let made = std::panic::catch_unwind(AssertUnwindSafe(|| leave(departure)))
                    .map_err(|p| -> crate::BoxError {
                        format!(
                            "the leave hook panicked: {}",
                            mcr_core::panic_message(p.as_ref())
                        )
                        .into()
                    })?;
                made.await.map_err(|e| Box::new(e) as crate::BoxError)
            }
            .boxed()
        });
        self.on_leave = Some(erased);
        self
    }

    /// Runs `sweep` with the [`Members`] the fleet wants, every `period` (and once as soon as
    /// the fleet's membership is known at start): the level-triggered cleanup of what members
    /// that are no longer wanted left behind, whenever they left. It catches what no
    /// [leave hook](Self::on_leave) can see: members that left while no replica ran (during
    /// an upgrade, an outage), and departures whose hook never succeeded before the process
    /// stopped. Typical: delete the host objects labelled with a member key that
    /// [`Members::wants_key`] refuses, or the summary entries of such keys.
    ///
    /// The wanted members are those the manager's provider reports (engaged, pending, failed,
    /// or owned by another replica, so a sharded replica never sweeps what merely moved) and
    /// those engaged now. The first sweep waits until the provider has reported its members
    /// and none is still pending, so a provider that has not listed its source yet is never
    /// taken for an empty fleet; a fleet with no member at all is therefore not swept until
    /// one joins. Without a provider (members engaged by hand) nothing reports which members
    /// are wanted, and no sweep runs. A sweep that fails, panics or runs past the
    /// [reconcile timeout](Self::reconcile_timeout) (60 s without one) is logged and runs
    /// again at its next period. It runs where the controller runs (the leader, or every
    /// sharded replica: make it idempotent). A second call replaces the first sweep.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::api::{Api, Patch, PatchParams};
    /// use mcr_manager::Members;
    /// # fn demo(b: mcr_manager::Builder<ConfigMap>, host: kube::Client) {
    /// let summary: Api<ConfigMap> = Api::namespaced(host, "default");
    /// let b = b.sweep(std::time::Duration::from_secs(300), move |members: Members| {
    ///     let summary = summary.clone();
    ///     async move {
    ///         let Some(cm) = summary.get_opt("fleet-summary").await? else { return Ok(()) };
    ///         let gone: serde_json::Map<String, serde_json::Value> = cm.data.unwrap_or_default()
    ///             .into_keys()
    ///             .filter(|key| !members.wants_key(key))
    ///             .map(|key| (key, serde_json::Value::Null))
    ///             .collect();
    ///         if !gone.is_empty() {
    ///             let patch = serde_json::json!({"data": gone});
    ///             summary.patch("fleet-summary", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    ///         }
    ///         Ok::<_, kube::Error>(())
    ///     }
    /// });
    /// # }
    /// ```
    #[must_use]
    pub fn sweep<F, Fut, E>(mut self, period: Duration, sweep: F) -> Self
    where
        F: Fn(Members) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let sweep = Arc::new(sweep);
        let run = Arc::new(move |members: Members| {
            let sweep = sweep.clone();
            async move {
                let made = std::panic::catch_unwind(AssertUnwindSafe(|| sweep(members))).map_err(
                    |p| -> crate::BoxError {
                        format!(
                            "the sweep panicked: {}",
                            mcr_core::panic_message(p.as_ref())
                        )
                        .into()
                    },
                )?;
                made.await.map_err(|e| Box::new(e) as crate::BoxError)
            }
            .boxed()
        });
        self.sweep = Some(Sweep { period, run });
        self
    }
}
