//! The user's reconciler and error policy with their types erased at registration, so the
//! controller loop is generic only over the reconciled type and the user data.

use std::{panic::AssertUnwindSafe, sync::Arc};

use futures::future::BoxFuture;
use kube::{
    Resource,
    runtime::{controller::Action, reflector::ObjectRef},
};
use mcr_core::ClusterName;

use super::Target;
use crate::controller::context::Context;

/// A reconcile that returned an error: the error, and the error policy that says what next.
pub(crate) trait Failed: Send {
    /// The reconciler's error.
    fn error(&self) -> &(dyn std::error::Error + 'static);
    /// Runs the error policy (user code: the caller catches its panics).
    fn policy(self: Box<Self>) -> Action;
}

/// What a reconciler returned: an action, or an error with its error policy.
pub(crate) type Returned = Result<Action, Box<dyn Failed>>;

/// A reconcile's future, or the panic of the call that was to make it.
pub(crate) type Started = std::thread::Result<BoxFuture<'static, Returned>>;

/// Starts one reconcile of a key: `None` when the key is skipped (the object-keyed model and
/// an object missing from the cache, see `Target`).
pub(crate) type Reconciler<K, Ctx> = Box<
    dyn Fn(&ClusterName, &ObjectRef<K>, Option<Arc<K>>, Context<Ctx>) -> Option<Started>
        + Send
        + Sync,
>;

/// Erases `reconcile` and `error_policy` (their first argument `T` is the cached object or the
/// request, see `Target`).
pub(crate) fn erase<K, T, Ctx, R, P, Fut, E>(reconcile: R, error_policy: P) -> Reconciler<K, Ctx>
where
    K: Resource + 'static,
    T: Target<K>,
    Ctx: Send + Sync + 'static,
    R: Fn(T, Context<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + 'static,
    P: Fn(T, &E, Context<Ctx>) -> Action + Send + Sync + 'static,
{
    let policy = Arc::new(error_policy);
    Box::new(move |cluster, key, cached, ctx| {
        let obj = T::target(cluster, key, cached)?;
        let policy = policy.clone();
        // The reconciler is user code: a panic while it makes its future is caught too.
        let created =
            std::panic::catch_unwind(AssertUnwindSafe(|| reconcile(obj.clone(), ctx.clone())));
        Some(created.map(|fut| -> BoxFuture<'static, _> {
            Box::pin(async move {
                fut.await.map_err(|err| {
                    Box::new(Failure {
                        obj,
                        err,
                        ctx,
                        policy,
                    }) as Box<dyn Failed>
                })
            })
        }))
    })
}

/// What the error policy of one failed reconcile is called with.
struct Failure<T, E, Ctx, P> {
    obj: T,
    err: E,
    ctx: Context<Ctx>,
    policy: Arc<P>,
}

impl<T, E, Ctx, P> Failed for Failure<T, E, Ctx, P>
where
    T: Send,
    E: std::error::Error + Send + 'static,
    Ctx: Send + Sync + 'static,
    P: Fn(T, &E, Context<Ctx>) -> Action + Send + Sync,
{
    fn error(&self) -> &(dyn std::error::Error + 'static) {
        &self.err
    }

    fn policy(self: Box<Self>) -> Action {
        let Failure {
            obj,
            err,
            ctx,
            policy,
        } = *self;
        policy(obj, &err, ctx)
    }
}
