//! The core of mcr (multicluster-runtime for Rust): the cluster model, the shared per-cluster
//! cache, field indexes, the provider contract and the cluster lifecycle.
//!
//! - [`ClusterName`] and [`Cluster`]: a member of the fleet (a `kube::Client`, a shared
//!   [`Cache`] and an identity).
//! - [`Cache`] / [`Informer`]: one watch per (cluster, resource, selector) however many
//!   controllers use it, with [`Informer::subscribe`] for change streams and [`FieldIndex`]es.
//! - [`Provider`], [`ProviderRunnable`], [`Aware`]: how sources of clusters talk to the manager.
//! - [`Engagements`]: the one table of a process's members and the one owner of their
//!   lifecycle: a provider [wants](Engagements::want) a [`Source`] under a name, and the
//!   table builds, probes, starts, syncs, engages, renews, retries, parks what another replica
//!   owns and stops, converging each member from one entry. The manager owns it, its fleet
//!   reads it, its provider says what it wants.
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
//! | **engagements** ([`Engagements`]) | the one table of members: one entry per name with what is wanted ([`Source`]), what runs and where it stands ([`MemberState`]); the one lifecycle of every member (build, probe, start, sync, engage, activate, renew, retry, park, stop), converged on every change and on a timer |
//! | **source** ([`Source`]) | what a provider wants under a name: a ready [`Cluster`], a kubeconfig ([`members::Connection`]), or a [`Connect`] asked on demand |
//! | **coordinator** ([`Coordinator`]) | who owns a cluster when replicas share a fleet; the table keeps what another replica owns without a client |
//! | **members** ([`members::Members`]) | a provider's handle on the table: the options its members are brought up with, and its run |
//! | **fleet** (`mcr_manager::Fleet`) | the host plus a read-only view of the manager's table: what a reconcile can reach |
//! | **namespaces** ([`scope::Namespaces`]) | which namespaces of the host a provider reads its source of truth from |
//! | **cluster scope** (`mcr_manager::ClusterScope`) | which clusters a controller's input watches (host, provider clusters, both); for the reconciled type, where reconciles run |
//! | **reconcile** | the controller's user function, run for one request (`mcr_manager::Builder::register`); a member's bring-up is the table's, not a reconcile |
//! | **request** (`mcr_manager::Request`) | a cluster name and an object reference: what a controller queues and reconciles |
//!
//! Where members are kept: in the [`Engagements`] table alone, one entry per name (what is
//! wanted, what runs, the attempt under way, the last failure, who owns it when another
//! replica does), one per process: the manager's fleet, the provider's `get` and a reconcile's
//! `ctx.cluster` read it, so they agree at every phase. Each controller (in `mcr-manager`)
//! keeps, per engaged cluster, its subscriptions, primary cache view, queue share and metrics:
//! what it does with a member, not whether it is one.
//!
//! # Writing a provider
//!
//! There is one way: implement [`members::MemberProvider`] (`members` and `run`), which gives
//! the [`Provider`] and [`ProviderRunnable`] implementations. `run` reads the source of truth
//! (watching a host with [`watch`], the loop every informer uses) and says, per cluster name,
//! what it wants ([`members::Members::want`] with a [`Source`]) and what it no longer wants
//! ([`members::Members::remove`]); the table does the rest alike for every provider. The
//! [`members`] module documentation has a complete provider, and [`members::ProviderShared`]
//! with [`members::StatusProvider`] is what providers that watch a host share between their
//! handle and their event loop.
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

pub use cache::{
    Cache, CacheEvent, CacheView, Informer, InformerOptions, older_version, watch, watch_metadata,
};
pub use cluster::{Cluster, ClusterId, Released};
pub use coordinator::{Coordinator, Ownership};
pub(crate) use engagements::DEFAULT_SYNC_TIMEOUT;
pub use engagements::{Connect, Engagements, Source};
pub use error::{BoxError, ClusterNotFound, Error, ErrorChain, cluster_not_found, panic_message};
pub use index::FieldIndex;
pub use member_status::{MemberState, MemberStatus};
pub use name::ClusterName;
pub use provider::{Aware, BoxFuture, Provider, ProviderRunnable};

#[cfg(test)]
mod tests;
