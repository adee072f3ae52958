//! A multicluster-runtime provider that composes other providers under name prefixes, so one
//! manager can serve, say, Kind clusters, kubeconfig Secrets and namespaces at once.
//!
//! # Naming
//!
//! Child provider `p` contributes its cluster `c` as `p#c` (separator configurable with
//! [`Options::separator`]). Names are split on the **first** separator, so provider names may
//! not contain it but cluster names may: `files#/etc/kube+dev#1` is cluster `/etc/kube+dev#1`
//! of provider `files`.
//!
//! # Lifecycle
//!
//! * [`MultiProvider::add`] registers a child before or after start; after start it is started
//!   at once. [`MultiProvider::remove`] cancels the child's token: its clusters are disengaged.
//! * Field indexes registered on the multi provider are applied to each child exactly once,
//!   also to children added later (before they start).
//! * Runnable children (anything implementing [`ProviderRunnable`](mcr_core::ProviderRunnable),
//!   including providers that watch the host cluster like the kubeconfig and namespace
//!   providers) are started with a handle on the manager's table whose names carry the
//!   child's prefix ([`Engagements::prefixed`](mcr_core::Engagements::prefixed)).
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcr_core::{Cluster, Provider, ProviderRunnable, Engagements, providers::clusters::ClustersProvider};
//! use mcr_provider_multi::MultiProvider;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run(dev: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let fixed = Arc::new(ClustersProvider::new());
//! fixed.add(Cluster::new("dev", dev)).await?;
//! let multi = MultiProvider::new();
//! multi.add("fixed", fixed).await?;
//!
//! let registry = Engagements::new();
//! let token = CancellationToken::new();
//! tokio::spawn({
//!     let (multi, registry, token) = (multi.clone(), registry.clone(), token.clone());
//!     async move { multi.start(token, registry).await }
//! });
//! // registry.names() == ["fixed#dev"]
//! let dev = multi.get(&"fixed#dev".into()).await?;
//! # Ok(()) }
//! ```

mod error;
mod options;
mod provider;

pub use error::Error;
pub use options::{DEFAULT_SEPARATOR, Options};
pub use provider::{ChildStatus, MultiProvider, RESTART_BACKOFF_INITIAL, RESTART_BACKOFF_MAX};
