//! An mcr provider that engages the **Shoots of a Gardener garden** as the fleet, with
//! short-lived credentials renewed in place (GEP-16).
//!
//! - Watches `core.gardener.cloud/v1beta1` Shoots in the project namespaces of a
//!   [`Namespaces`] scope (shared with mcr's other providers: `One`, `List`, `AllExcept`).
//! - Ready, as Gardener's own provider decides: `status.lastOperation` is set and is not a
//!   `Create` that has yet to succeed. A Shoot being deleted (or with a deletionTimestamp),
//!   hibernated (unless [`Options::engage_hibernated`]) or no longer ready is disengaged.
//! - Credentials: `POST .../shoots/{name}/adminkubeconfig` with an
//!   `authentication.gardener.cloud/v1alpha1` `AdminKubeconfigRequest`
//!   (`spec.expirationSeconds` = [`Options::expiration`], default one hour), or
//!   `viewerkubeconfig` ([`KubeconfigKind::Viewer`]). The answer's `status.kubeconfig`
//!   (base64) gives the server, CA and client certificate; `status.expirationTimestamp` the
//!   expiry. Kubeconfigs with exec plugins, auth-providers or file references are refused.
//! - Renewal in place ([`mcr_core::credentials`]) before expiry ([`Options::renewal`]): the
//!   cluster keeps its identity, caches and watches, nothing is relisted. A renewal that keeps
//!   failing is logged with the cluster name and shows in
//!   `cluster.credentials().status()` (`is_expired()` once the certificate lapsed).
//! - The provider only says which Shoots it wants; the manager's
//!   [`Engagements`](mcr_core::Engagements) table brings each up (the kubeconfig request
//!   included), retries one that fails with backoff ([`Options::retry_initial`] to
//!   [`Options::retry_max`]) and reports where each stands
//!   ([`member_statuses`](mcr_core::Provider::member_statuses)). On a sharded manager only the
//!   replica that owns a Shoot requests its kubeconfig: on the others it costs no request and
//!   is reported owned elsewhere; a Shoot given away is stopped at once and its credentials are
//!   renewed no more.
//! - [`Address`]: which `status.advertisedAddresses` entry to connect to (default: the
//!   kubeconfig's, i.e. the first); when it changes, a new instance replaces the old one once
//!   it has synced.
//! - Cluster name `<namespace>/<name>` ([`Options::cluster_name`] to change it).
//!
//! RBAC in the garden: `get`, `list`, `watch` on `shoots` and `create` on
//! `shoots/adminkubeconfig` (or `shoots/viewerkubeconfig`) in the watched namespaces.
//!
//! ```no_run
//! use std::{sync::Arc, time::Duration};
//! use mcr_core::{ProviderRunnable, Engagements};
//! use mcr_provider_gardener::{GardenerProvider, Namespaces, Options};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let garden = kube::Client::try_default().await?;
//! let provider = GardenerProvider::new(garden, Options {
//!     namespaces: Namespaces::List(vec!["garden-dev".into(), "garden-prod".into()]),
//!     expiration: Duration::from_secs(1800),
//!     ..Options::default()
//! });
//! let registry = Engagements::new();
//! provider.start(CancellationToken::new(), registry.clone()).await?;
//! # Ok(()) }
//! ```

mod error;
mod options;
mod provider;
mod request;
mod shoot;
mod source;

pub use error::Error;
pub use mcr_core::scope::Namespaces;
pub use options::{Address, KubeconfigKind, Options};
pub use provider::GardenerProvider;
