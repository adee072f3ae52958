//! The multi-cluster controller: a builder that feels like kube-runtime's `Controller`, and the
//! loop that runs it across every engaged cluster.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kube::runtime::controller::Action;
//! use mcr_manager::{Context, Controller, Manager};
//!
//! async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
//!     Ok(Action::await_change())
//! }
//! fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<()>) -> Action {
//!     Action::requeue(std::time::Duration::from_secs(5))
//! }
//!
//! # async fn demo(mgr: Manager) -> Result<(), mcr_manager::Error> {
//! Controller::new(&mgr)
//!     .for_::<ConfigMap>()
//!     .owns::<Secret>()
//!     .register(reconcile, error_policy, Arc::new(()))?;
//! mgr.run().await
//! # }
//! ```

mod action;
mod builder;
mod context;
mod input;
mod membership;
mod outcome;
mod recorder;
mod request;
mod runner;
mod scope;
mod store;
mod target;

pub use action::UnreadableAction;
pub use builder::{Builder, Controller, RunError, Start, WatchOptions};
pub use context::Context;
pub use membership::{Departure, DepartureReason, Members};
pub use outcome::{ReconcileOutcome, ReconcileResult};
pub use recorder::{DEFAULT_PUBLISH_TIMEOUT, Recorder, RecorderError};
pub use request::{IntoRequest, Request};
pub use scope::ClusterScope;
pub use store::Store;
pub use target::Target;
