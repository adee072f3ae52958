//! The multi-cluster manager and controller runtime of mcr.
//!
//! A [`Manager`] owns the host cluster and an optional [`Provider`](mcr_core::Provider) that
//! engages a dynamic fleet of clusters. [`Controller`]s reconcile objects in every engaged
//! cluster through one fair work queue per controller; watches come from each cluster's shared
//! cache, so two controllers on one type in one cluster share one watch.
//!
//! # Porting a kube-runtime controller
//!
//! The reconciler and the error policy keep their shapes **unchanged** — `Arc<K>` and
//! `Arc<Data>` in, [`Action`] out — with
//! [`Builder::run`] (or [`Builder::register_per_cluster`]): `Data` is built once per engaged
//! cluster, so the `client` it holds is the object's own cluster. Side by side:
//!
//! ```text
//! // kube-runtime                                     // mcr
//! async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Data>) -> Result<Action, Error>   // unchanged
//! fn error_policy(cm: Arc<ConfigMap>, e: &Error, ctx: Arc<Data>) -> Action          // unchanged
//!
//! let data = Arc::new(Data {                          let data = |cluster: &Context| Data {
//!     client: client.clone(),                             client: cluster.client(),
//! });                                                 };
//! Controller::new(Api::<ConfigMap>::all(client),      Controller::new(&mgr) // host client + provider
//!                 watcher::Config::default())             .for_::<ConfigMap>()
//!     .owns(Api::<Secret>::all(client), wc)               .owns::<Secret>()
//!     .run(reconcile, error_policy, data)                 .run(reconcile, error_policy, data)
//!     .for_each(|_| async {})                             .for_each(|_| async {})
//!     .await;                                             .await;
//! ```
//!
//! To reach the rest of the fleet from a reconcile, take a [`Context`] instead of `Arc<Data>`
//! and [`register`](Builder::register): your data is behind [`Context::data`] (no `Deref`,
//! so a leftover `ctx.client` does not compile), the object's cluster behind
//! [`Context::client`], the host and the other members behind [`Context::host`] and
//! [`Context::cluster`].
//!
//! The `Context` version, complete:
//!
//! ```no_run
//! use std::{sync::Arc, time::Duration};
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kube::{Api, ResourceExt, runtime::controller::Action};
//! use mcr_core::providers::clusters::ClustersProvider;
//! use mcr_manager::{Context, Controller, Manager};
//!
//! #[derive(Debug, thiserror::Error)]
//! #[error("kube: {0}")]
//! struct Error(#[from] kube::Error);
//!
//! struct Data { greeting: String }
//!
//! async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, Error> {
//!     let api: Api<Secret> = Api::namespaced(ctx.client(), &cm.namespace().unwrap_or_default());
//!     let _maybe = api.get_opt(&cm.name_any()).await?;
//!     tracing::info!(cluster = %ctx.cluster_name(), "{} {}", ctx.data().greeting, cm.name_any());
//!     Ok(Action::requeue(Duration::from_secs(300)))
//! }
//!
//! fn error_policy(_cm: Arc<ConfigMap>, _err: &Error, _ctx: Context<Data>) -> Action {
//!     Action::requeue(Duration::from_secs(5))
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = kube::Client::try_default().await?;
//!     let provider = Arc::new(ClustersProvider::new());
//!     let mgr = Manager::new(client, Some(provider));
//!     Controller::new(&mgr)
//!         .for_::<ConfigMap>()
//!         .owns::<Secret>()
//!         .register(reconcile, error_policy, Arc::new(Data { greeting: "hello".into() }))?;
//!     mgr.run().await?;
//!     Ok(())
//! }
//! ```
//!
//! # What the runtime guarantees
//!
//! - Requests are `(cluster, object)`; one reconcile per key at a time; a change arriving during
//!   a reconcile runs it once more afterwards.
//! - The queue is fair across clusters: a cluster with a flood of changes cannot starve a quiet one.
//! - Hung clusters cannot starve the others, however many: each holds at most its per-cluster
//!   cap of the slots, and one none of whose reconciles finished for
//!   [`stalled_after`](Builder::stalled_after) (10 s) starts no new reconcile and no longer
//!   counts against `concurrency` until one does.
//! - A cluster that leaves: its queued requests are dropped, its watches stop, and a reconcile
//!   failing with `ClusterNotFound` ends quietly (no retry).
//! - A panicking reconciler (or error policy) is logged with its cluster and object and retried
//!   with backoff; a panicking watch mapper or predicate drops that one event, logged the same way.
//! - Graceful shutdown: stop taking work, let in-flight reconciles finish, stop watches, return.
//! - Metrics ([`Metrics`]), `/metrics` `/healthz` `/readyz`, and optional leader election
//!   ([`LeaderElection`], feature `leader-election`).

pub mod controller;
pub mod deployment;
mod error;
mod health;
#[cfg(feature = "leader-election")]
mod leader;
mod lease;
mod manager;
mod metrics;
mod queue;
mod runnable;
pub mod shard;
#[cfg(feature = "opentelemetry")]
pub mod telemetry;

pub use controller::{
    Builder, ClusterScope, Context, Controller, DEFAULT_PUBLISH_TIMEOUT, Departure,
    DepartureReason, IntoRequest, Members, ReconcileOutcome, ReconcileResult, Recorder,
    RecorderError, Request, RunError, Start, Store, Target, UnreadableAction, WatchOptions,
};
pub use deployment::{DeploymentEnv, DeploymentEnvError, WebhookEnv};
pub use error::{BoxError, BuilderError, Error};
pub use health::HttpOptions;
/// kube-runtime's `Action`, re-exported so a ported controller imports
/// `mcr_manager::{Action, Controller}` where it imported `kube::runtime::controller::{Action,
/// Controller}`. Reconcilers return it unchanged.
pub use kube::runtime::controller::Action;
#[cfg(feature = "leader-election")]
pub use leader::LeaderElection;
pub use manager::{ClusterStatus, Fleet, Manager, ManagerBuilder};
pub use metrics::Metrics;
pub use runnable::Runnable;
pub use shard::Sharding;
