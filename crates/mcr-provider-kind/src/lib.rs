//! A multicluster-runtime provider whose fleet is the local [kind](https://kind.sigs.k8s.io)
//! clusters (Kubernetes in Docker): the quickest way to try a multi-cluster controller on a
//! laptop.
//!
//! # Discovery
//!
//! The provider runs the `kind` command line ([`Options::kind_bin`], default `kind` on
//! `PATH`) with `tokio::process`; every run is bounded by [`Options::command_timeout`] (the
//! process is killed when it passes, and when the provider stops or no longer needs it). It
//! only says which clusters it wants; the manager's [`Engagements`](mcr_core::Engagements)
//! table brings each up, asking kind for its kubeconfig when it does.
//!
//! * Every [`Options::poll_interval`] (2 s), `kind get clusters` lists the clusters. Names
//!   that start with [`Options::prefix`] (all names without a prefix) belong to the fleet: a
//!   new one is wanted, one no longer listed is removed.
//! * Bringing a cluster up, the table runs `kind get kubeconfig --name <name>` (with
//!   `--internal` when [`Options::internal`] is set), builds the client with the client
//!   options and policy of [`Options::members`] (default
//!   [`Policy::default`](mcr_core::kubeconfig::Policy): kind's kubeconfigs use an inline
//!   client certificate, so a kubeconfig asking to run a program or read a file is refused),
//!   probes it with `GET /version`, then starts, syncs, indexes and engages it. The cluster
//!   is named by its kind name, e.g. `fleet-alpha` (the kubeconfig context is
//!   `kind-fleet-alpha`).
//! * Every [`Options::refresh_interval`] (10 s), the kubeconfig of each cluster engaged here is
//!   fetched again (side by side, one pass at a time). The same connection (compared with
//!   [`mcr_core::kubeconfig::connection_hash`]) keeps the running instance; a kind cluster
//!   that was deleted and recreated under the same name has a new CA and client certificate,
//!   and a new instance replaces the old one once it has synced.
//! * On a sharded manager, a cluster another replica owns is never asked for its kubeconfig:
//!   it costs no command and no client, and is reported owned elsewhere. A cluster given to
//!   another replica is stopped at once and no longer refreshed.
//!
//! What `kind get kubeconfig` prints is a credential: it is never logged and never part of an
//! error.
//!
//! # Failures (where Go's provider differs)
//!
//! * **`kind` missing at start**: [`start`](mcr_core::ProviderRunnable::start) fails at once
//!   with [`Error::NotInstalled`], naming the binary, the `PATH` searched and how to install
//!   kind.
//! * **A failing list** (Docker down, `kind` timing out, `kind` removed later on): logged and
//!   retried after the poll interval, doubling up to one minute; the known clusters stay
//!   engaged. Go ends its provider when the first list fails.
//! * **One cluster failing** (its kubeconfig cannot be fetched or parsed, its API server does
//!   not answer, its caches do not sync): reported `failed` with the cluster name and the
//!   reason ([`member_statuses`](mcr_core::Provider::member_statuses), the manager's
//!   `/clusters`) and retried on its own by the table, after `backoff_initial`
//!   ([`Options::members`]) doubling up to `backoff_max`. A slow or broken cluster never holds
//!   up the others or the next list. Go ends the whole pass at the first per-cluster error,
//!   removals included. A kubeconfig the policy refuses is not retried until the cluster
//!   leaves the list and comes back.
//! * **A failing refresh** of an engaged cluster is logged; the cluster stays engaged.
//! * **Recreated clusters** are noticed (see above); Go keeps the stale client forever.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcr_core::{ProviderRunnable, Engagements};
//! use mcr_provider_kind::{KindProvider, Options};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), mcr_core::Error> {
//! // `kind create cluster --name fleet-alpha; kind create cluster --name fleet-beta`
//! let provider = KindProvider::new(Options {
//!     prefix: Some("fleet-".into()),
//!     ..Options::default()
//! });
//! // Usually handed to the mcr Manager (`Manager::new(host, Some(Arc::new(provider)))`),
//! // which starts it; here driven by hand:
//! let registry = Engagements::new();
//! provider.start(CancellationToken::new(), registry).await
//! # }
//! ```

mod cli;
mod error;
mod options;
mod provider;
mod source;

pub use error::{Error, INSTALL_HINT};
pub use mcr_core::members::MemberOptions;
pub use options::{DEFAULT_KIND_BIN, Options};
pub use provider::KindProvider;
