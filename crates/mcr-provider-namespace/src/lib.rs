//! A multicluster-runtime provider that turns the namespaces of one host cluster into virtual
//! clusters: a cheap way to run a multi-cluster controller against a single real cluster
//! (development, tests, soft multi-tenancy).
//!
//! # Naming and lifecycle
//!
//! Every namespace of the host is a cluster named after the namespace. The provider watches
//! the host's Namespaces and says which it wants: a namespace is wanted when it appears
//! (matching [`Options::label_selector`], not in [`Options::excluded`]) and removed when it is
//! deleted or starts terminating (`deletionTimestamp` set or `status.phase: Terminating`).
//! The manager's [`Engagements`](mcr_core::Engagements) table brings each wanted namespace up
//! (its views synced within [`Options::sync_timeout`]) and retries one that fails after
//! [`Options::retry_delay`]; where each stands is
//! [`member_statuses`](mcr_core::Provider::member_statuses).
//!
//! On a sharded manager the table brings a namespace up only on the replica that owns it: on
//! the others it costs no informer and no request, is reported owned elsewhere, and
//! [`get`](mcr_core::Provider::get) answers [`NotOwned`](mcr_core::Error::NotOwned). A
//! namespace given to another replica is stopped at once (its token cancelled).
//!
//! # What a namespace cluster looks like
//!
//! A cluster in which only the namespace `default` exists: its `kube::Client`
//! ([`namespace_client`]) rewrites requests for `default` into the real namespace and every
//! object coming back (gets, lists, watch events) into `default`. Writes, patches (merge, JSON,
//! strategic, server-side apply) and deletes included. Cluster-wide lists and watches of
//! namespaced resources become lists and watches of the namespace. Other namespaces answer
//! 404; listing, watching or changing Namespaces answers 403; `GET` of the Namespace `default`
//! returns the real one renamed. **Cluster-scoped resources pass through unchanged**: Nodes,
//! CRDs, ClusterRoles of the host are visible (and writable, RBAC permitting) from every
//! namespace cluster.
//!
//! # Shared watches
//!
//! A namespace cluster's cache has no watch of its own: each informer is derived from the host
//! cluster's informer of the same type ([`mcr_core::Cache::derived`] with a
//! [`NamespaceView`]), filtered to its namespace and rewritten to `default`, with its own
//! store, subscribers and field indexes. 1,000 namespaces watching ConfigMaps are one
//! ConfigMap watch on the host.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcr_core::{Cluster, ProviderRunnable, Engagements};
//! use mcr_provider_namespace::{NamespaceProvider, Options};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let host = Cluster::new(mcr_core::ClusterName::host(), kube::Client::try_default().await?);
//! let provider = NamespaceProvider::new(host, Options {
//!     label_selector: Some("tenant=true".into()),
//!     ..Options::default()
//! });
//! let registry = Engagements::new();
//! let token = CancellationToken::new();
//! let running = tokio::spawn({
//!     let (provider, token) = (provider.clone(), token.clone());
//!     async move { provider.start(token, registry).await }
//! });
//! // ... provider.names() == ["team-a", "team-b"]
//! token.cancel();
//! running.await??;
//! # Ok(()) }
//! ```

mod client;
mod error;
mod options;
mod provider;
mod view;

pub use client::{NamespaceService, namespace_client};
pub use error::Error;
pub use options::{DEFAULT_EXCLUDED, Options};
pub use provider::NamespaceProvider;
pub use view::NamespaceView;
