//! The core of mcr (multicluster-runtime for Rust): the cluster model, the shared per-cluster
//! cache, field indexes, the provider contract and the cluster lifecycle.
//!
//! - [`ClusterName`] and [`Cluster`]: a member of the fleet (a `kube::Client`, a shared
//!   [`Cache`] and an identity).
//! - [`Cache`] / [`Informer`]: one watch per (cluster, resource, selector) however many
//!   controllers use it, with [`Informer::subscribe`] for change streams and [`FieldIndex`]es.
//! - [`Provider`], [`ProviderRunnable`], [`Aware`]: how sources of clusters talk to the manager.
//! - [`Engagements`]: the one table of engaged clusters of a process, and the lifecycle every
//!   provider uses (start cache, engage, apply indexes, wait for sync, activate; remove on
//!   failure or on request; park what another replica owns). The manager owns it, its fleet
//!   reads it, its provider adds to it.
//! - [`Coordinator`]: which clusters this replica owns when several replicas share a fleet
//!   (see [`coordinator`]); asked by the table only.
//! - [`providers`]: `single`, `nop` and `clusters` providers; [`kubeconfig`] helpers for
//!   providers that build clients from kubeconfigs; [`backoff`] for retrying
//!   members that fail; [`credentials`] for short-lived credentials renewed in place;
//!   [`members`] for everything a provider needs besides reading its source of truth;
//!   [`scope`] for the namespaces a provider watches (`One` / `List` / `AllExcept`).
//!
//! # Glossary
//!
//! Each name has one meaning across the mcr crates.
//!
//! | name | what it is |
//! |---|---|
//! | **cluster** ([`Cluster`]) | one API server as mcr sees it: a client, a shared [`Cache`] and an instance id ([`ClusterId`]), known by a [`ClusterName`] |
//! | **host** | the cluster the manager runs against ([`ClusterName::host`], `<host>` in logs); never a member |
//! | **member** | a cluster a provider found; every cluster but the host |
//! | **provider** ([`Provider`]) | a source of members (Secrets, files, namespaces, `Cluster` objects, profiles); its discovery loop is its [`ProviderRunnable`] |
//! | **engage** ([`Aware::engage`]) | to hand a member, with a token, to whoever wants clusters (the manager, a controller, a runnable); the **engagement** lasts until the token fires. [`Aware`] is the one trait for being told about clusters |
//! | **engagements** ([`Engagements`]) | the one table of engaged clusters, name to cluster, token and [`Phase`] (parked, starting, active), forgotten when the token fires; and how every provider brings a member in and out: start its cache (the one place that does), engage, wait for sync (the one sync gate, [`Engagements::with_sync_timeout`]), activate; remove |
//! | **coordinator** ([`Coordinator`]) | who owns a cluster when replicas share a fleet; the table parks what another replica owns |
//! | **members** ([`members::Members`]) | a provider's record per member name: the connection it runs, credentials renewed in place, its [status](MemberStatus) |
//! | **fleet** (`mcr_manager::Fleet`) | the host plus a read-only view of the manager's table: what a reconcile can reach |
//! | **namespaces** ([`scope::Namespaces`]) | which namespaces of the host a provider reads its source of truth from |
//! | **cluster scope** (`mcr_manager::ClusterScope`) | which clusters a controller's input watches (host, provider clusters, both); for the reconciled type, where reconciles run |
//! | **reconcile** | the controller's user function, run for one request (`mcr_manager::Builder::register`); a provider's per-member step is [`members::Converge`], not a reconcile |
//! | **request** (`mcr_manager::Request`) | a cluster name and an object reference: what a controller queues and reconciles |
//!
//! Where clusters are kept, and what each map holds that no other does:
//!
//! - [`Engagements`]: every member, parked, starting or active, with its engagement token,
//!   and the field indexes every future member gets. One per process: the manager's fleet,
//!   the provider's `get` and a reconcile's `ctx.cluster` read it, so they agree at every
//!   phase.
//! - [`members::Members`]: per member name, the provider-side record (connection hash,
//!   credentials, status, including members that never engaged or are owned elsewhere).
//! - each controller (in `mcr-manager`): per engaged cluster, its subscriptions, primary cache
//!   view, queue share and metrics (not the cluster's membership).
//!
//! # Writing a provider
//!
//! There is one way: implement [`members::MemberProvider`] (`members` and `run`), which gives
//! the [`Provider`] and [`ProviderRunnable`] implementations. `run` reads the source of truth
//! (watching a host with [`watch`], the loop every informer uses) and hands the wanted
//! [`members::Connection`] of each cluster name to [`members::Workers`]; the workers do the rest
//! alike for every provider (build, probe, renew credentials in place, bring the member in
//! through the [`Engagements`] table the provider was started with, retry with backoff, one
//! member never holding up another). The
//! [`members`] module documentation has a complete provider, and [`members::ProviderShared`]
//! with [`members::Dispatch`] is the same thing for providers that watch several streams on a
//! host. A source that yields ready [`Cluster`]s rather than kubeconfigs (a view of the host,
//! other providers) hands them to the same table with [`Engagements::add`].
#![deny(unsafe_code)]

mod cache;
mod cluster;
mod engagements;
mod error;
mod index;
mod member_status;
mod name;
mod provider;
mod redact;

pub mod backoff;
pub mod coordinator;
pub mod credentials;
pub mod kubeconfig;
pub mod members;
pub mod providers;
pub mod scope;

pub use cache::{Cache, CacheEvent, CacheView, Informer, InformerOptions, watch, watch_metadata};
pub use cluster::{Cluster, ClusterId, Released};
pub use coordinator::{Coordinator, Ownership};
pub(crate) use engagements::DEFAULT_SYNC_TIMEOUT;
pub use engagements::{AddOutcome, Engagements, Phase};
pub use error::{
    BoxError, ClusterNotFound, Error, ErrorChain, cluster_not_found, is_cluster_not_found,
    panic_message,
};
pub use index::FieldIndex;
pub use member_status::{MemberState, MemberStatus};
pub use name::ClusterName;
pub use provider::{Aware, BoxFuture, Provider, ProviderRunnable};

#[cfg(test)]
mod tests;
