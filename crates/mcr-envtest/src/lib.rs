//! An emulated Kubernetes API server for tests: whole fleets of clusters in one process.
//!
//! `mcr-envtest` serves N emulated clusters to **unmodified kube-rs clients** (and kubectl)
//! over the real Kubernetes HTTP protocol:
//!
//! - **in-process** ([`TestCluster::start`], [`TestCluster::client`]): a `tower::Service` over
//!   the request handler, no sockets, so a test with hundreds of clusters stays cheap;
//! - **HTTPS** ([`TestCluster::start_https`]): hyper on `127.0.0.1:<random port>` with a
//!   generated CA and serving certificate, bearer-token auth and a generated kubeconfig
//!   ([`TestCluster::kubeconfig`], [`TestCluster::https_client`]).
//!
//! Both transports share one handler: discovery (`/version`, `/api`, `/apis/...`), get, list
//! (selectors, pagination), watch (NDJSON, bookmarks, streaming lists, `timeoutSeconds`,
//! 410 after [`TestCluster::compact`]), create, update, patch (merge, JSON, strategic,
//! server-side apply), delete (finalizers, propagation) and deletecollection, `dryRun=All`.
//! Served types: Namespace, ConfigMap, Secret, ServiceAccount, Event (`v1` and
//! `events.k8s.io/v1`), Lease, Deployment, ReplicaSet, CustomResourceDefinition, and every
//! CRD created at runtime. New clusters have the namespaces `default`, `kube-system`,
//! `kube-public` and `kube-node-lease`.
//!
//! Test hooks: [`TestCluster::stop`]/[`restart`](TestCluster::restart),
//! [`partition`](TestCluster::partition) ([`Partition::Refuse`] or [`Partition::Hang`]),
//! latency, [`ErrorRule`]s, and request counters ([`RequestCounts`]).
//!
//! Test helper: [`wait::eventually`] (and [`wait::eventually_async`]) polls a condition with a
//! deadline and panics naming what it waited for, so tests wait on conditions, never on sleeps.
//!
//! # Example
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! let fleet = mcr_envtest::Fleet::start(2).await?;
//! for cluster in fleet.clusters() {
//!     let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
//!     let mut cm = ConfigMap::default();
//!     cm.metadata.name = Some(format!("hello-{}", cluster.name()));
//!     cms.create(&PostParams::default(), &cm).await?;
//! }
//! assert_eq!(fleet.clusters()[0].request_count("create", "configmaps"), 1);
//! # Ok(()) }
//! ```
//!
//! # What it does not emulate
//!
//! No controllers run (a Deployment never gets ReplicaSets or Pods, nothing becomes Ready),
//! and there is no admission, RBAC (one bearer token per HTTPS cluster), schema validation,
//! protobuf, Table output or aggregated discovery (kubectl falls back to the legacy
//! documents). The state machine's own list is in the [`engine`] module documentation
//! ("What is NOT emulated").
//!
//! kubectl works against an HTTPS cluster's kubeconfig (`get`, `get -w`, `create -f`, `apply`,
//! `apply --server-side`, `replace`, `patch`, `label`, `annotate`, `delete`,
//! `api-resources`): `/openapi/v3` serves just enough for kubectl to leave field validation
//! to the server, so no `--validate=false` is needed (`/openapi/v2` is 404, `kubectl explain`
//! does not work). `kubectl get` prints only NAME and AGE (no Table). Imperative generators
//! (`kubectl create configmap|secret generic|namespace|serviceaccount|deployment`) send
//! protobuf bodies, which are decoded for those kinds; other protobuf bodies get 415: use
//! `create -f` / `apply -f`.
//!
//! # The `mcr-envtest` binary
//!
//! `cargo run -p mcr-envtest --features cli -- --clusters 3 --kubeconfig-dir ./fleet` serves a
//! fleet over HTTPS until Ctrl-C and prints a kubeconfig per cluster.

pub mod engine;
pub mod wait;

#[doc(hidden)]
pub mod fuzz;

mod cluster;
mod counters;
mod discovery;
mod error;
mod faults;
mod fleet;
mod https;
mod kubeconfig;
mod openapi;
mod server;
mod service;
mod tls;

pub use cluster::{ErrorRule, Partition, TestCluster};
pub use counters::RequestCounts;
pub use error::Error;
pub use fleet::{Fleet, FleetBuilder};
