//! The emulated API server's state machine: resource types, objects, history and watches.
//!
//! The engine knows nothing about HTTP. The transport (`crate::server`) parses a request into
//! one of the calls below and turns the result (or an [`ApiError`]) into a response. Every
//! object is a `serde_json::Value` in its wire form, so any kind (built-in or CRD) is handled
//! alike.
//!
//! CONTRACT between the engine (store, registry, selectors, patches, gc) and the transport.
//! Signatures here are fixed; bodies live in the submodules.
//!
//! # What is emulated
//!
//! - Built-in types: every resource kube-apiserver 1.36 serves by default, at its preferred
//!   GA version (one static table in `registry`, shared by every cluster; Events in `v1` and
//!   `events.k8s.io/v1` are stored separately, no conversion between them); the reviews and
//!   `bindings` are answered, never stored; plus every served version of every CRD (versions
//!   share storage; reading another version only rewrites `apiVersion`, as the `None`
//!   conversion strategy does).
//! - Subresources: `status` (split from the rest as upstream), `scale` (built-in workloads and
//!   CRDs), `serviceaccounts/token`, `pods/eviction`, `pods/binding`,
//!   `pods/ephemeralcontainers`, `pods/resize`, `namespaces/finalize`,
//!   `certificatesigningrequests/approval`
//!   ([`Engine::get_subresource`], [`Engine::write_subresource`],
//!   [`Engine::post_subresource`]).
//! - What kube-apiserver creates at start (`bootstrap`: the `kubernetes` Service and its
//!   endpoints, PriorityClasses, bootstrap RBAC, local APIServices), each set written the
//!   first time [`Engine::resolve`] hands out its type, so it costs nothing in a cluster that
//!   never addresses it; a watch from an older resourceVersion then sees them as `ADDED`.
//! - Defaults of Pods, Services (cluster IPs from `10.96.0.0/12`) and Jobs (`defaults`), names
//!   validated per kind, and the per-kind rules of kube-apiserver's registries the
//!   differential check found (`validate`, `special`, the tables in `write`, `delete`,
//!   `update` and `registry`).
//! - Server-set metadata (`uid`, `creationTimestamp`, one global `resourceVersion` counter,
//!   `generation` kept per kind as its registry keeps it, see `registry::Generation`),
//!   `generateName`,
//!   name validation, optimistic concurrency, no-op writes that do not move the
//!   resourceVersion, Secret `stringData`.
//! - Merge, JSON and strategic merge patches (merge keys by field name for the built-ins;
//!   `finalizers` merges as a set, as `ObjectMeta` declares it).
//! - Server-side apply with field ownership as kube-apiserver tracks it (`managedFields` in
//!   `FieldsV1`, checked field for field against kube-apiserver 1.36 by
//!   `tests/apply_ownership.rs`): a field a manager stops applying is removed unless another
//!   manager owns it; changing a field another manager owns is a 409 listing the conflicts,
//!   and `force=true` takes it; creates, updates and non-apply patches are recorded as
//!   `Update` entries (manager from `fieldManager`, else the `User-Agent` up to its first `/`,
//!   else `unknown`) and take the fields they change from everyone else; maps are owned key by
//!   key, atomic lists and atomic structs whole, associative lists item by item (the built-ins'
//!   `containers`, `env`, `ports` by `containerPort`+`protocol`, `volumes`, `conditions`, ...,
//!   and a CRD's `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//!   `x-kubernetes-map-type` from its `openAPIV3Schema`); the status subresource has its own
//!   entries; at most ten `Update` entries, older ones fold into `ancient-changes`. An apply
//!   that kube-apiserver would reconcile with the client-side
//!   `kubectl.kubernetes.io/last-applied-configuration` annotation is refused (500 naming the
//!   gap).
//! - Answers checked against kube-apiserver by `cargo xtask fidelity` (`tests/fidelity.rs`):
//!   an immediate delete answers with a `Success` `Status` (Namespaces, CRDs, the kinds whose
//!   kube-apiserver registry returns the deleted object, such as Pods, Services and
//!   ServiceAccounts, and finalizer-held deletes with the object), built-in list items carry
//!   no `apiVersion`/`kind`, custom resources take no unconditional update; a `scale` write
//!   owns `spec.replicas` as tracked on the `Scale` (a count of 0 belongs to no one).
//! - kube-apiserver's `LimitRanger` (a new Pod's default requests and limits, its bounds) and
//!   `ResourceQuota` (usage added to `status.used`, creates beyond `status.hard` refused)
//!   admission plugins (`admission`).
//! - Finalizers, `ownerReferences` garbage collection (Background/Foreground/Orphan),
//!   namespace termination, CRD establishment and removal.
//! - Lists with full label selectors, `metadata.name`/`metadata.namespace` field selectors,
//!   consistent pagination and `resourceVersion`/`resourceVersionMatch`; watches with replay,
//!   410 on compacted versions, selector transitions, bookmarks and streaming lists.
//!
//! # What is NOT emulated (or only simplified)
//!
//! - Admission beyond `LimitRanger` and `ResourceQuota` (webhooks, policies), authentication
//!   and RBAC, a quota controller (nothing fills a quota's `status.hard` or gives usage back),
//!   OpenAPI schema validation and defaulting of custom resources, CRD conversion webhooks,
//!   protobuf and table output, `dryRun` beyond "do not store".
//! - Controllers: nothing reconciles Deployments/ReplicaSets/StatefulSets/Jobs, no Pod runs
//!   (an unscheduled or bound Pod is deleted at once with a grace period of 0: marked, then
//!   removed; an eviction adds the `DisruptionTarget` condition first), no
//!   PodDisruptionBudget gets a status unless written; namespace termination and garbage
//!   collection run synchronously inside the delete call. Foreground deletion behaves like
//!   Background (no `foregroundDeletion` finalizer; the owner goes, then its dependents);
//!   Orphan on an object with finalizers orphans its dependents at once. Objects created with owner references to absent owners are not
//!   collected. Removing a CRD removes its objects without waiting for their finalizers.
//! - Defaulting of built-in types other than Pods, Services and Jobs (a Deployment's
//!   `strategy`, its template's containers, ...): the emulator stores what was sent, so the `Update` entry of a
//!   create on kube-apiserver also owns the defaulted fields and the emulator's does not.
//!   Ownership uses the schema of the request's version for every entry (CRD versions are not
//!   converted); built-in types other than ConfigMap, Secret, Deployment, ReplicaSet,
//!   Namespace and ServiceAccount know only `ObjectMeta`'s maps and lists (their other lists
//!   are atomic).
//! - `resourceVersionMatch=NotOlderThan` with a version newer than the current one serves the
//!   current state instead of waiting; field selectors on other fields give 400.
//! - History: the last 10,000 events per cluster are kept; older versions answer 410.
//!
//! ```
//! # use mcr_envtest::engine::*;
//! let engine = Engine::new();
//! let cms = engine.resolve("", "v1", "configmaps").unwrap();
//! let body = serde_json::json!({"metadata": {"name": "a", "labels": {"app": "web"}}});
//! engine.create(&cms, Some("default"), body, &WriteOptions::default()).unwrap();
//! let params = ListParams { label_selector: Some("app in (web, db)".into()), ..Default::default() };
//! let list = engine.list(&cms, None, &params).unwrap();
//! assert_eq!(list["items"][0]["metadata"]["name"], "a");
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

mod error;
pub use error::ApiError;

/// One served resource type (a row of discovery).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// API group, `""` for the core group.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Plural resource name, e.g. `configmaps`.
    pub plural: String,
    /// Singular name, e.g. `configmap`.
    pub singular: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Short names for kubectl, e.g. `cm`.
    pub short_names: Vec<String>,
    /// Categories for kubectl, e.g. `all`.
    pub categories: Vec<String>,
    /// Whether the `/status` subresource is served.
    pub status_subresource: bool,
    /// Every served subresource, `status` included (e.g. `scale`, `token`, `eviction`).
    pub subresources: &'static [&'static str],
    /// The verbs of the resource itself (discovery): all eight, or only `create` for the
    /// kinds that are posted and answered (reviews, bindings).
    pub verbs: &'static [&'static str],
    /// Whether this type comes from a CustomResourceDefinition.
    pub custom: bool,
}

impl ResourceType {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Query parameters of a list (also used for the initial part of a watch).
#[derive(Clone, Debug, Default)]
pub struct ListParams {
    /// Raw `labelSelector`, full Kubernetes grammar.
    pub label_selector: Option<String>,
    /// Raw `fieldSelector`; only `metadata.name` and `metadata.namespace` are supported (400 otherwise).
    pub field_selector: Option<String>,
    /// Page size; `None` or 0 means everything.
    pub limit: Option<u64>,
    /// Continue token from a previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion` parameter.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` parameter (`NotOlderThan`, `Exact`).
    pub resource_version_match: Option<String>,
}

/// Query parameters of a watch.
#[derive(Clone, Debug, Default)]
pub struct WatchParams {
    /// Selectors and resourceVersion as for a list.
    pub list: ListParams,
    /// `allowWatchBookmarks=true`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents=true` (streaming list).
    pub send_initial_events: bool,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
}

/// A watch event as it goes on the wire: `{"type": ..., "object": ...}`.
///
/// Cheap to clone: one event is shared by every watcher it reaches, and its JSON line is encoded
/// once (lazily) and then reused by all of them.
#[derive(Clone, Debug)]
pub struct WatchEvent {
    inner: Arc<EventInner>,
}

#[derive(Debug)]
struct EventInner {
    kind: WatchEventType,
    object: Arc<Value>,
    line: std::sync::OnceLock<bytes::Bytes>,
}

impl WatchEvent {
    /// Wraps an object in an event.
    pub fn new(kind: WatchEventType, object: Arc<Value>) -> Self {
        Self {
            inner: Arc::new(EventInner {
                kind,
                object,
                line: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The event type.
    pub fn kind(&self) -> WatchEventType {
        self.inner.kind
    }

    /// The object (a `Status` for `ERROR`), as it goes on the wire.
    pub fn object(&self) -> Arc<Value> {
        packed::unpacked_arc(&self.inner.object)
    }

    /// The object as the store keeps it (`managedFields` packed): for reads of anything else.
    pub(crate) fn stored(&self) -> &Arc<Value> {
        &self.inner.object
    }

    /// The newline-terminated JSON line `{"type":"ADDED","object":{...}}\n`, encoded once.
    pub fn to_line(&self) -> bytes::Bytes {
        self.inner
            .line
            .get_or_init(|| {
                let mut line = serde_json::to_vec(&serde_json::json!({
                    "type": self.inner.kind.as_str(),
                    "object": &*packed::unpacked(&self.inner.object),
                }))
                .unwrap_or_default();
                line.push(b'\n');
                bytes::Bytes::from(line)
            })
            .clone()
    }
}

/// The type of a [`WatchEvent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEventType {
    /// An object appeared (or moved into the selector).
    Added,
    /// An object changed.
    Modified,
    /// An object went away (or moved out of the selector).
    Deleted,
    /// A progress marker carrying only `metadata.resourceVersion` (and annotations).
    Bookmark,
    /// An error, e.g. 410 Expired.
    Error,
}

impl WatchEventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
            Self::Bookmark => "BOOKMARK",
            Self::Error => "ERROR",
        }
    }
}

/// How a patch body is to be read (from the request's `Content-Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`
    Merge,
    /// `application/json-patch+json`
    Json,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply; body is YAML or JSON)
    Apply,
}

/// Options common to writes.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and return the result without storing it.
    pub dry_run: bool,
    /// `fieldManager` (without one a write is recorded as `unknown`, as kube-apiserver
    /// records a request without `fieldManager` and `User-Agent`).
    pub field_manager: Option<String>,
    /// `force=true` (server-side apply).
    pub force: bool,
    /// `fieldValidation`: what a write of a built-in kind does with fields its type does not
    /// have (and, for custom resources, fields their schema prunes).
    pub field_validation: FieldValidation,
    /// Where the write leaves its warnings (`unknown field "spec.foo"`), which the server
    /// sends as `Warning` headers.
    pub warnings: Warnings,
}

/// `fieldValidation`: what a write does with fields the type does not have. They are dropped
/// in every case.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// `Ignore`: silently.
    Ignore,
    /// `Warn` (the default): with a warning per field.
    #[default]
    Warn,
    /// `Strict`: the write is refused (400).
    Strict,
}

/// The warnings of one write (shared by the clones of its [`WriteOptions`]).
#[derive(Clone, Debug, Default)]
pub struct Warnings(Arc<parking_lot::Mutex<Vec<String>>>);

impl Warnings {
    /// Adds a warning.
    pub(crate) fn push(&self, warning: String) {
        self.0.lock().push(warning);
    }

    /// The warnings so far, in order, leaving none.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock())
    }
}

/// Parsed `DeleteOptions` (body and/or query).
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_resource_version: Option<String>,
    /// `propagationPolicy`: `Orphan`, `Background` (default) or `Foreground`.
    pub propagation_policy: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// A live watch: events in order, then end of stream (timeout or engine shutdown).
pub type WatchStream = futures::stream::BoxStream<'static, WatchEvent>;

/// One emulated cluster's API state. Cheap to clone (shared).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<state::State>,
}

mod admission;
mod answered;
mod apply;
mod bootstrap;
mod crd;
mod defaults;
mod delete;
mod fields;
mod gc;
mod managed;
mod meta;
mod packed;
pub(crate) mod patch;
mod quantity;
mod read;
mod registry;
pub(crate) mod schema;
pub(crate) mod selector;
mod special;
mod state;
mod subresource;
pub use subresource::SubresourceWrite;
pub(crate) use subresource::issued_token_is_valid;
mod update;
mod validate;
mod watch;
mod write;

#[cfg(test)]
mod tests;

/// Namespaces every new cluster has.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("resource_version", &self.resource_version())
            .finish()
    }
}

impl Engine {
    /// A new, empty cluster: built-in types served, and the namespaces `default`,
    /// `kube-system`, `kube-public` and `kube-node-lease`.
    ///
    /// ```
    /// # use mcr_envtest::engine::Engine;
    /// let engine = Engine::new();
    /// assert!(engine.resolve("apps", "v1", "deployments").is_some());
    /// ```
    pub fn new() -> Engine {
        let engine = Engine {
            inner: Arc::new(state::State::new(registry::builtins())),
        };
        if let Some(rt) = engine.resolve("", "v1", "namespaces") {
            for ns in INITIAL_NAMESPACES {
                let body = serde_json::json!({"metadata": {"name": ns}});
                // Cannot fail on an empty store; a failure would only leave a namespace out.
                let opts = WriteOptions {
                    field_manager: Some("kube-apiserver".into()),
                    ..WriteOptions::default()
                };
                let _ = engine.create(&rt, None, body, &opts);
            }
        }
        engine
    }

    /// Every type served now, built-ins first (for discovery).
    ///
    /// ```
    /// # use mcr_envtest::engine::Engine;
    /// let kinds: Vec<String> = Engine::new().resource_types().into_iter().map(|t| t.kind).collect();
    /// assert!(kinds.contains(&"ConfigMap".to_string()));
    /// ```
    pub fn resource_types(&self) -> Vec<ResourceType> {
        self.inner.read().registry.all()
    }

    /// Every served custom type with its version's `openAPIV3Schema` (for the OpenAPI
    /// documents).
    pub(crate) fn custom_schemas(&self) -> Vec<(ResourceType, Option<Value>)> {
        let store = self.inner.read();
        store
            .registry
            .all()
            .into_iter()
            .filter(|rt| rt.custom)
            .map(|rt| {
                let schema = crd::version_schema(&store, &rt);
                (rt, schema)
            })
            .collect()
    }

    /// The type served at `/apis/{group}/{version}/{plural}` (`group` is `""` for `/api/v1`).
    ///
    /// ```
    /// # use mcr_envtest::engine::Engine;
    /// let rt = Engine::new().resolve("", "v1", "secrets").unwrap();
    /// assert_eq!(rt.kind, "Secret");
    /// ```
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        let info = self.inner.read().registry.resolve(group, version, plural)?;
        // The objects kube-apiserver creates at start, written when first addressed.
        self.seed(&info);
        Some(info.rt.clone())
    }

    /// Forgets all history up to now: watching or listing from an older resourceVersion gives
    /// 410 Expired.
    ///
    /// ```
    /// # use mcr_envtest::engine::Engine;
    /// let engine = Engine::new();
    /// engine.compact();
    /// ```
    pub fn compact(&self) {
        self.inner.write().compact();
    }

    /// The current (last written) resourceVersion of this cluster.
    ///
    /// ```
    /// # use mcr_envtest::engine::Engine;
    /// assert!(Engine::new().resource_version() > 0);
    /// ```
    pub fn resource_version(&self) -> u64 {
        self.inner.read().rv
    }

    /// Ends every open watch stream; the engine stays usable and new watches work.
    ///
    /// ```
    /// # use mcr_envtest::engine::Engine;
    /// Engine::new().shutdown();
    /// ```
    pub fn shutdown(&self) {
        self.inner.shutdown.send_modify(|epoch| *epoch += 1);
    }
}
