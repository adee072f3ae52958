//! [`Builder::register`]: the builder's checks, then the hand-over to the manager.

use std::{fmt::Debug, future::Future, hash::Hash, sync::Arc};

use kube::{Resource, runtime::controller::Action};
use serde::de::DeserializeOwned;

use super::Builder;
use crate::{
    Error,
    controller::{
        ClusterScope,
        context::Context,
        input::Scope,
        runner::{ControllerTask, Data, Spec, erase},
        target::Target,
    },
    error::BuilderError,
};

impl<K> Builder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    /// Checks the controller and hands it to the manager. It starts when the manager runs (or
    /// at once if the manager is already running) and receives every cluster engaged so far.
    ///
    /// `reconcile` and `error_policy` have kube-runtime's shapes, with [`Context`] in place of
    /// `Arc<Ctx>`. Their first argument chooses how keys are reconciled (see [`Target`]):
    ///
    /// - `Arc<K>`, kube-runtime's model: the cached object; a key whose object is not in the
    ///   cache (deleted, or not created in that cluster yet) is skipped;
    /// - [`Request<K>`](crate::Request), Go controller-runtime's model: the cluster and object
    ///   reference, for **every** queued key, also when the object is gone. The reconciler reads
    ///   the object with [`Context::cached`] (or the API): what sync-style controllers need to
    ///   create copies and clean up after deleted sources.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::controller::Action;
    /// use mcr_manager::{Context, Controller, Request};
    ///
    /// // kube-runtime's model: the object.
    /// async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
    ///     Ok(Action::await_change())
    /// }
    /// fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<()>) -> Action {
    ///     Action::await_change()
    /// }
    ///
    /// // The request, also when its object is gone.
    /// async fn sync(req: Request<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
    ///     if ctx.cached(&req.object).is_none() {
    ///         tracing::info!(%req, "gone: cleaning up");
    ///     }
    ///     Ok(Action::await_change())
    /// }
    /// fn sync_policy(_: Request<ConfigMap>, _: &kube::Error, _: Context<()>) -> Action {
    ///     Action::requeue(std::time::Duration::from_secs(5))
    /// }
    /// # fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_manager::Error> {
    /// Controller::new(&mgr).for_::<ConfigMap>().register(reconcile, error_policy, Arc::new(()))?;
    /// Controller::new(&mgr)
    ///     .named("sync")
    ///     .for_::<ConfigMap>()
    ///     .register(sync, sync_policy, Arc::new(()))?;
    /// # Ok(()) }
    /// ```
    pub fn register<T, Ctx, R, P, Fut, E>(
        self,
        reconcile: R,
        error_policy: P,
        data: Arc<Ctx>,
    ) -> Result<(), Error>
    where
        T: Target<K>,
        Ctx: Send + Sync + 'static,
        R: Fn(T, Context<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + 'static,
        P: Fn(T, &E, Context<Ctx>) -> Action + Send + Sync + 'static,
    {
        self.hand_over(reconcile, error_policy, Data::Shared(data))
    }

    pub(super) fn hand_over<T, Ctx, R, P, Fut, E>(
        self,
        reconcile: R,
        error_policy: P,
        data: Data<Ctx>,
    ) -> Result<(), Error>
    where
        T: Target<K>,
        Ctx: Send + Sync + 'static,
        R: Fn(T, Context<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + 'static,
        P: Fn(T, &E, Context<Ctx>) -> Action + Send + Sync + 'static,
    {
        let controller = self.name.clone();
        if let Err(source) = crate::controller::action::check() {
            return Err(BuilderError::UnreadableAction { controller, source }.into());
        }
        if self.inputs.is_empty() && self.triggers.is_empty() {
            return Err(BuilderError::NoWatches { controller }.into());
        }
        // Every input without a scope of its own takes the controller's default.
        let default = self.scope;
        let primary_scope = self.primary_scope.unwrap_or(default);
        let mut inputs = self.inputs;
        for input in &mut inputs {
            if let Scope::In(scope) = &mut input.scope {
                scope.get_or_insert(default);
            }
        }
        // A kind of cluster is engaged at all if the reconciled type or any input is there.
        let wanted = |host: bool| {
            primary_scope.includes(host) || inputs.iter().any(|i| i.scope.watches(host, false))
        };
        // The reconciled type's scope is in it, so the union is never empty.
        let engaged =
            ClusterScope::from_flags(wanted(true), wanted(false)).unwrap_or(primary_scope);
        let spec = Spec {
            name: self.name,
            primary: self.primary,
            dyntype: self.dyntype,
            primary_scope,
            primary_filter: self.primary_filter,
            inputs,
            triggers: self.triggers,
            // kube-runtime's meaning: 0 is unbounded.
            concurrency: if self.concurrency == 0 {
                usize::MAX
            } else {
                self.concurrency
            },
            debounce: self.debounce,
            engaged,
            filter: self.filter,
            sharded: self.mgr.shard().is_some(),
            retry_when_gone: self.retry_when_gone,
            live_first: self.live_first,
            on_outcome: self.on_outcome,
            on_join: self.on_join,
            on_leave: self.on_leave,
            sweep: self.sweep,
            limits: self.limits,
            provider: self.mgr.provider().cloned(),
            host: self.mgr.host().clone(),
            fleet: self.mgr.fleet().clone(),
            metrics: self.mgr.metrics().clone(),
        };
        let task = ControllerTask::new(spec, erase(reconcile, error_policy), data);
        self.mgr.add_controller(Arc::new(task))
    }
}
