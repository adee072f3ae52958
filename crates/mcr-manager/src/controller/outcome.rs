//! [`ReconcileOutcome`]: what each reconcile came to, for [`Builder::on_outcome`] hooks (the
//! counterpart of the stream kube-runtime's `Controller::run` yields).
//!
//! [`Builder::on_outcome`]: crate::Builder::on_outcome

use std::{panic::AssertUnwindSafe, sync::Arc, time::Duration};

use kube::{
    Resource,
    runtime::{controller::Action, reflector::ObjectRef},
};
use mcr_core::{ClusterName, panic_message};

use super::request::Request;

/// How one reconcile ended.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReconcileResult<'a> {
    /// The reconciler returned this action.
    Ok(&'a Action),
    /// The reconciler returned this error (the error policy decides what happens next; a
    /// cluster-not-found error ends quietly unless `retry_when_cluster_gone`).
    Err(&'a (dyn std::error::Error + 'static)),
    /// The reconciler panicked with this message (retried with backoff).
    Panicked(&'a str),
}

/// One finished reconcile: its request, its result and how long it ran.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use mcr_manager::{ReconcileOutcome, ReconcileResult};
///
/// fn show(o: &ReconcileOutcome<'_, ConfigMap>) -> String {
///     match o.result {
///         ReconcileResult::Ok(action) => format!("{} -> {action:?}", o.request),
///         ReconcileResult::Err(err) => format!("{} failed: {err}", o.request),
///         ReconcileResult::Panicked(msg) => format!("{} panicked: {msg}", o.request),
///         _ => String::new(),
///     }
/// }
/// ```
#[non_exhaustive]
pub struct ReconcileOutcome<'a, K: Resource> {
    /// The cluster and object reconciled.
    pub request: Request<K>,
    /// How it ended.
    pub result: ReconcileResult<'a>,
    /// How long the reconcile ran.
    pub elapsed: Duration,
}

impl<K: Resource> std::fmt::Debug for ReconcileOutcome<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcileOutcome")
            .field("request", &format_args!("{}", self.request))
            .field("result", &self.result)
            .field("elapsed", &self.elapsed)
            .finish()
    }
}

/// A registered outcome hook.
pub(crate) type OutcomeHook<K> = Arc<dyn Fn(&ReconcileOutcome<'_, K>) + Send + Sync>;

/// Hands a finished reconcile to every hook; a panicking hook is logged, never fatal.
pub(crate) fn report<K>(
    hooks: &[OutcomeHook<K>],
    cluster: &ClusterName,
    key: &ObjectRef<K>,
    result: Result<
        Result<&Action, &(dyn std::error::Error + 'static)>,
        &(dyn std::any::Any + Send),
    >,
    elapsed: Duration,
) where
    K: Resource,
    K::DynamicType: Clone,
{
    if hooks.is_empty() {
        return;
    }
    let panicked;
    let result = match result {
        Ok(Ok(action)) => ReconcileResult::Ok(action),
        Ok(Err(err)) => ReconcileResult::Err(err),
        Err(panic) => {
            panicked = panic_message(panic);
            ReconcileResult::Panicked(&panicked)
        }
    };
    let outcome = ReconcileOutcome {
        request: Request::new(cluster.clone(), key.clone()),
        result,
        elapsed,
    };
    for hook in hooks {
        if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| hook(&outcome))) {
            tracing::error!(
                request = %outcome.request,
                panic = %panic_message(panic.as_ref()),
                "an outcome hook panicked"
            );
        }
    }
}
