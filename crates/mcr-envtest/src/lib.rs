//! An emulated Kubernetes API server for tests: whole fleets of clusters in one process.
//!
//! `mcr-envtest` serves N emulated clusters to **unmodified kube-rs clients** (and kubectl)
//! over the real Kubernetes HTTP protocol:
//!
//! - **in-process** ([`TestCluster::start`], [`TestCluster::client`]): a `tower::Service` over
//!   the request handler, no sockets, so a test with hundreds of clusters stays cheap;
//! - **HTTPS** ([`TestCluster::start_https`]): hyper on `127.0.0.1:<random port>` with a
//!   generated CA and serving certificate, bearer-token auth and a generated kubeconfig
//!   ([`TestCluster::kubeconfig`], [`TestCluster::https_client`]), and x509 client
//!   certificates signed by the cluster's CA, checked on every request
//!   ([`TestCluster::client_certificate`]).
//!
//! Both transports share one handler: discovery (`/version`, `/api`, `/apis/...`), get, list
//! (selectors, pagination), watch (NDJSON, bookmarks, streaming lists, `timeoutSeconds`,
//! 410 after [`TestCluster::compact`]), create, update, patch (merge, JSON, strategic,
//! server-side apply), delete (finalizers, propagation) and deletecollection, `dryRun=All`,
//! and metadata-only responses: with the `Accept` header
//! `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (kube's
//! `Api::get_metadata`, `watch_metadata`, `patch_metadata`) an object or watch event comes
//! back as a `meta.k8s.io/v1` `PartialObjectMetadata` (its whole `metadata`, nothing else),
//! and with `as=PartialObjectMetadataList` (`Api::list_metadata`) a list as a
//! `PartialObjectMetadataList` whose items are `PartialObjectMetadata`, as on a real server
//! (also for writes; asking for an object as a list or the reverse is 406).
//! Served types: every built-in resource kube-apiserver 1.36 serves by default, at its
//! preferred GA version and scope (Pods, Services, Nodes, workloads, Jobs, RBAC, networking,
//! storage, policy, certificates, admission configuration, ...: one table shared by every
//! cluster, checked against k8s-openapi), with their `status`, `scale`, `token`, `eviction`,
//! `binding`, `ephemeralcontainers`, `resize`, `finalize` and `approval` subresources, and every CRD created at
//! runtime (with `status` and `scale`). New clusters have the namespaces `default`,
//! `kube-system`, `kube-public` and `kube-node-lease`; the `kubernetes` Service, its
//! endpoints, the built-in PriorityClasses, the common bootstrap ClusterRoles and bindings and
//! the local APIServices appear when their resource is first addressed. The crate README
//! lists all of it, with the defaults applied on create.
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
//! No controllers run (a Deployment never gets ReplicaSets or Pods, nothing becomes Ready,
//! no node runs a Pod: no `exec`, `logs` or `portforward`), and there is no admission beyond
//! `LimitRanger` and `ResourceQuota`, no RBAC (one bearer token per HTTPS cluster; every
//! access review is allowed), no OpenAPI value validation beyond types and the checks listed
//! in the [`engine`] docs, no protobuf responses and no Table output. Objects are decoded,
//! defaulted and written back as kube-apiserver 1.36 does, from one schema table (the
//! [`engine`] docs say how). Discovery is served both legacy and aggregated
//! (`apidiscovery.k8s.io/v2`). The state machine's own list is in the [`engine`] module documentation
//! ("What is NOT emulated").
//!
//! kubectl works against an HTTPS cluster's kubeconfig (`get`, `get -w`, `create -f`, `apply`,
//! `apply --server-side`, `replace`, `patch`, `label`, `annotate`, `delete`, `diff`,
//! `explain`, `api-resources`): `/openapi/v3` and `/openapi/v2` (JSON and the gnostic
//! protobuf kubectl asks for) are served from the same schema table, so kubectl's default
//! validation works, `v1 List` files included. `kubectl get` prints only NAME and AGE (no
//! Table). Imperative generators
//! (`kubectl create configmap|secret generic|namespace|serviceaccount|deployment`) send
//! protobuf bodies, which are decoded for those kinds; other protobuf bodies get 415: use
//! `create -f` / `apply -f`.
//!
//! # Real control planes: `MCR_ENVTEST=real`
//!
//! With `MCR_ENVTEST=real` ([`backend()`], [`Backend`]) the same [`TestCluster`] and [`Fleet`]
//! API starts real `kube-apiserver` processes over a shared `etcd` instead, found through
//! `KUBEBUILDER_ASSETS` / `TEST_ASSET_*` like controller-runtime's envtest, or in the cache of
//! `cargo xtask assets` (see [`real`]). Every cluster is then served over HTTPS through a
//! fault proxy; stop/restart, partitions and latency work the same. Emulator-only hooks
//! ([`TestCluster::compact`], [`TestCluster::inject_error`], the request counters) panic on a
//! real cluster; tests that need them begin with
//! `if !mcr_envtest::require_emulator("why") { return; }`, which reports them skipped by name.
//! A real cluster costs ~2 s and ~270 MiB; a real fleet has at most [`real::MAX_FLEET`]
//! clusters. No controller-manager runs there either: no garbage collection, no namespace
//! finalization, no ReplicaSets for Deployments (see [`real`]).
//!
//! # Emulator vs real API server
//!
//! The conformance suite runs on both backends. What it found, and what was done:
//!
//! | difference | done |
//! |---|---|
//! | a request without credentials: the real server treats it as `system:anonymous` (403 Forbidden, except `GET /version`, `/healthz`, `/livez`, `/readyz`); the emulator answered 401 | fixed in the emulator |
//! | a real `kube-system` holds the API server's own ConfigMaps (`extension-apiserver-authentication`, `kube-apiserver-legacy-service-account-token-tracking`), and `default` the `kubernetes` Service, plus RBAC roles, PriorityClasses and FlowSchemas; the emulator's namespaces start empty | not emulated: tests list their own namespace or skip exact cluster-wide counts on the real backend |
//! | a watch from resourceVersion `0` may start with a BOOKMARK on a real server | allowed by the API; tests skip bookmarks |
//! | RBAC enforcement is done by the real server | not emulated (see below) |
//! | `/openapi/v2` was not served; kubectl's validation of a `v1 List` failed | served from the schema table (`tests/kubectl.rs`) |
//! | metadata-only responses (`as=PartialObjectMetadata[List]`): compared field by field with a real server for get, list, watch (bookmarks included), create, update, patch and deletecollection; a real server also answers in YAML when a YAML clause wins, and sends an empty watch stream for `as=PartialObjectMetadataList` on a watch | emulated (`tests/metadata.rs` runs on both backends); the emulator always writes JSON and answers 406 to a list conversion on a watch |
//! | on the real backend every cluster is served over HTTPS ([`TestCluster::url`] and [`TestCluster::kubeconfig`] are `Some` after [`TestCluster::start`]) | by design |
//!
//! # The `mcr-envtest` binary
//!
//! `cargo run -p mcr-envtest --features cli -- --clusters 3 --kubeconfig-dir ./fleet` serves a
//! fleet over HTTPS until Ctrl-C and prints a kubeconfig per cluster.

pub mod engine;
pub mod garden;
pub mod real;
pub mod wait;

mod backend;
#[doc(hidden)]
pub mod fuzz;

mod cluster;
mod counters;
mod discovery;
mod error;
mod faults;
mod fleet;
mod gate;
mod https;
mod kubeconfig;
mod openapi;
mod server;
mod service;
mod shared_port;
mod tls;
mod x509;

pub use backend::{BACKEND_ENV, Backend, backend, require_emulator};
pub use cluster::{ErrorRule, Partition, TestCluster};
pub use counters::RequestCounts;
pub use error::Error;
pub use fleet::{Fleet, FleetBuilder};
pub use x509::ClientCertificate;
