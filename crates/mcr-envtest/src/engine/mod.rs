//! The emulated API server's state machine: resource types, objects, history and watches.
//!
//! The engine knows nothing about HTTP. The transport (`crate::server`) parses a request into
//! one of the calls below and turns the result (or an [`ApiError`]) into a response. Every
//! object is a `serde_json::Value` in its wire form, so any kind (built-in or CRD) is handled
//! alike.
//!
//! CONTRACT between the engine (store, registry, selectors, patches, gc) and the transport.
//! Signatures here are fixed; bodies live in the submodules.

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
        Self { inner: Arc::new(EventInner { kind, object, line: std::sync::OnceLock::new() }) }
    }

    /// The event type.
    pub fn kind(&self) -> WatchEventType {
        self.inner.kind
    }

    /// The object (a `Status` for `ERROR`).
    pub fn object(&self) -> &Arc<Value> {
        &self.inner.object
    }

    /// The newline-terminated JSON line `{"type":"ADDED","object":{...}}\n`, encoded once.
    pub fn to_line(&self) -> bytes::Bytes {
        self.inner
            .line
            .get_or_init(|| {
                let mut line = serde_json::to_vec(&serde_json::json!({
                    "type": self.inner.kind.as_str(),
                    "object": &*self.inner.object,
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
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `force=true` (server-side apply).
    pub force: bool,
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

mod state;
