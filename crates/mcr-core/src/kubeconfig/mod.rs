//! Kubeconfig helpers: parsing, contexts, client building, exec policy, connection hash.
//!
//! Every provider that builds member clients from kubeconfigs (Secrets, files,
//! ClusterProfiles) goes through this module, so the security rules live in one place:
//!
//! * credential plugins (`exec`, `auth-provider`) run only when the [`ExecPolicy`] allows them,
//!   checked before kube can run anything; kubeconfigs from untrusted sources can also be kept
//!   from reading local files ([`ClientOptions::deny_file_references`]);
//! * errors name contexts, clusters and command basenames, never tokens, keys, certificates,
//!   plugin output or the kubeconfig text;
//! * [`connection_hash`] tells whether what defines a context's connection changed, so a
//!   provider only rebuilds a cluster when it must.
//!
//! ```no_run
//! use mcr_core::kubeconfig::{self, ClientOptions, ExecPolicy};
//! # async fn demo(secret_data: &[u8]) -> Result<(), mcr_core::kubeconfig::Error> {
//! let kc = kubeconfig::parse(secret_data)?;
//! for context in kubeconfig::contexts(&kc) {
//!     let cluster = kubeconfig::cluster_for_context(
//!         context.as_str(), &kc, Some(&context), &ClientOptions::default(), &ExecPolicy::Deny,
//!     ).await?;
//!     println!("{} -> {:?}", cluster.name(), cluster.connection_hash());
//! }
//! # Ok(()) }
//! ```

mod client;
mod error;
mod exec;
mod exec_policy;
mod exec_renew;
mod file_refs;
mod hash;
mod options;
mod parse;
mod redact;

pub use client::{client_for_context, client_for_context_with_expiry, cluster_for_context};
pub use error::Error;
pub use exec::DEFAULT_EXEC_TIMEOUT;
pub use exec_policy::{ExecPolicy, check_exec_policy};
pub use file_refs::check_file_references;
pub use hash::{bytes_hash, connection_hash};
pub use options::{ClientOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT};
pub use parse::{contexts, current_context, parse, read};

/// The kube kubeconfig type, re-exported for convenience.
pub use kube::config::Kubeconfig;

#[cfg(test)]
mod tests;
