//! kube-runtime's own shape: [`Builder::register_per_cluster`] (the reconciler takes
//! `Arc<Data>`, built per cluster) and [`Builder::run`] (a stream of outcomes that drives the
//! manager).

use std::{fmt::Debug, future::Future, hash::Hash, pin::Pin, sync::Arc};

use futures::Stream;
use kube::{Resource, runtime::controller::Action};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use super::Builder;
use crate::{
    Error,
    controller::{context::Context, outcome::ReconcileResult, request::Request, runner::Data},
};

/// What [`Builder::run`] yields when a reconcile did not return an action, or when the
/// manager stopped with an error. The reconciler's own error type `E` is kept (shared with the
/// error policy, which saw it first), as kube-runtime's `controller::Error` keeps it.
///
/// ```
/// use std::sync::Arc;
/// use mcr_manager::RunError;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("quota exceeded")]
/// struct Quota;
///
/// let err = RunError::ReconcilerFailed { request: "cluster://east/ns/cm".into(), error: Arc::new(Quota) };
/// if let RunError::ReconcilerFailed { error, .. } = &err {
///     let typed: &Quota = error; // the reconciler's own type, not a string
///     assert_eq!(typed.to_string(), "quota exceeded");
/// }
/// assert_eq!(err.to_string(), "reconcile of cluster://east/ns/cm failed: quota exceeded");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError<E: std::error::Error + 'static> {
    /// The reconciler returned an error.
    #[error("reconcile of {request} failed: {error}")]
    ReconcilerFailed {
        /// The request (`cluster/namespace/name`).
        request: String,
        /// The reconciler's error, as it returned it.
        error: Arc<E>,
    },
    /// The reconciler panicked.
    #[error("reconcile of {request} panicked: {message}")]
    Panicked {
        /// The request (`cluster/namespace/name`).
        request: String,
        /// The panic's message.
        message: String,
    },
    /// Registering the controller or running the manager failed.
    #[error(transparent)]
    Manager(#[from] Error),
}

type RunFuture = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;
type Item<K, E> = Result<(Request<K>, Action), RunError<E>>;

/// The reconciler's error, shared between the error policy and the stream of [`Builder::run`].
struct Shared<E>(Arc<E>);

impl<E: std::fmt::Debug> std::fmt::Debug for Shared<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: std::fmt::Display> std::fmt::Display for Shared<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: std::error::Error> std::error::Error for Shared<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl<K> Builder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    /// Like [`register`](Self::register), with kube-runtime's reconciler shapes unchanged:
    /// `reconcile(Arc<K>, Arc<Data>)` and `error_policy(Arc<K>, &E, Arc<Data>)`. `data` builds
    /// each cluster's `Data` (put in an `Arc` for you) once, when the controller engages the cluster (from its
    /// [`Context`]: client, name, host, fleet), so a `Data { client }` holds **that cluster's**
    /// client, as it did in the single-cluster controller. A `data` that panics is logged and
    /// the cluster is not reconciled.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::controller::Action;
    /// struct Data { client: kube::Client }
    ///
    /// async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Data>) -> Result<Action, kube::Error> {
    ///     let client = ctx.client.clone(); // the ConfigMap's own cluster
    ///     Ok(Action::await_change())
    /// }
    /// fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Arc<Data>) -> Action {
    ///     Action::requeue(std::time::Duration::from_secs(5))
    /// }
    /// # fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_manager::Error> {
    /// mcr_manager::Controller::new(&mgr).for_::<ConfigMap>().register_per_cluster(
    ///     reconcile,
    ///     error_policy,
    ///     |cluster: &mcr_manager::Context| Data { client: cluster.client() },
    /// )?;
    /// # Ok(()) }
    /// ```
    pub fn register_per_cluster<D, R, P, Fut, E>(
        self,
        reconcile: R,
        error_policy: P,
        data: impl Fn(&Context) -> D + Send + Sync + 'static,
    ) -> Result<(), Error>
    where
        D: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<D>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + 'static,
        P: Fn(Arc<K>, &E, Arc<D>) -> Action + Send + Sync + 'static,
    {
        self.hand_over(
            move |obj: Arc<K>, ctx: Context<D>| reconcile(obj, ctx.data().clone()),
            move |obj: Arc<K>, err: &E, ctx: Context<D>| error_policy(obj, err, ctx.data().clone()),
            Data::PerCluster(Arc::new(move |ctx: &Context| Arc::new(data(ctx)))),
        )
    }

    /// kube-runtime's `Controller::run`: [`register_per_cluster`](Self::register_per_cluster)
    /// this controller, then run the manager ([`Manager::run`](crate::Manager::run): until
    /// Ctrl-C / SIGTERM, with every other registered controller) while yielding the outcome of
    /// each of this controller's reconciles. The stream ends when the manager stops, after an
    /// `Err(RunError::Manager(..))` if it stopped with an error (or could not register the
    /// controller). Poll it to completion (`for_each`), as with kube-runtime.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kube::runtime::controller::Action;
    /// use futures::StreamExt;
    /// # struct Data { client: kube::Client }
    /// # async fn reconcile(_: Arc<ConfigMap>, _: Arc<Data>) -> Result<Action, kube::Error> { Ok(Action::await_change()) }
    /// # fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Arc<Data>) -> Action { Action::await_change() }
    /// # async fn demo(mgr: mcr_manager::Manager) {
    /// mcr_manager::Controller::new(&mgr)
    ///     .for_::<ConfigMap>()
    ///     .run(reconcile, error_policy, |cluster| Data { client: cluster.client() })
    ///     .for_each(|res| async move {
    ///         match res {
    ///             Ok((request, action)) => tracing::info!(%request, ?action, "reconciled"),
    ///             Err(err) => tracing::warn!(%err, "reconcile failed"),
    ///         }
    ///     })
    ///     .await;
    /// # }
    /// ```
    pub fn run<D, R, P, Fut, E>(
        self,
        reconcile: R,
        error_policy: P,
        data: impl Fn(&Context) -> D + Send + Sync + 'static,
    ) -> impl Stream<Item = Item<K, E>> + Send + 'static
    where
        D: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<D>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        P: Fn(Arc<K>, &E, Arc<D>) -> Action + Send + Sync + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel::<Item<K, E>>();
        let mgr = self.mgr.clone();
        let registered = self
            .on_outcome(move |o| {
                let request = o.request.clone();
                let item = match o.result {
                    ReconcileResult::Ok(action) => Ok((request, action.clone())),
                    ReconcileResult::Err(err) => match err.downcast_ref::<Shared<E>>() {
                        Some(Shared(error)) => Err(RunError::ReconcilerFailed {
                            request: request.to_string(),
                            error: error.clone(),
                        }),
                        // Every error of this controller's reconciler is wrapped below.
                        None => return,
                    },
                    ReconcileResult::Panicked(message) => Err(RunError::Panicked {
                        request: request.to_string(),
                        message: message.to_owned(),
                    }),
                };
                // The receiver is gone only when the stream was dropped.
                let _ = tx.send(item);
            })
            .register_per_cluster(
                move |obj, data| {
                    let reconciled = reconcile(obj, data);
                    async move { reconciled.await.map_err(|e| Shared(Arc::new(e))) }
                },
                move |obj, err: &Shared<E>, data| error_policy(obj, &err.0, data),
                data,
            );
        let run: Option<RunFuture> = match registered {
            Ok(()) => Some(Box::pin(async move { mgr.run().await })),
            Err(err) => Some(Box::pin(async move { Err(err) })),
        };
        futures::stream::unfold((rx, run), |(mut rx, mut run)| async move {
            loop {
                let Some(running) = run.as_mut() else {
                    // The manager stopped: hand out what is left, then end.
                    return rx.try_recv().ok().map(|item| (item, (rx, None)));
                };
                tokio::select! {
                    biased;
                    Some(item) = rx.recv() => return Some((item, (rx, run))),
                    result = running => {
                        run = None;
                        if let Err(err) = result {
                            return Some((Err(RunError::Manager(err)), (rx, None)));
                        }
                    }
                }
            }
        })
    }
}
