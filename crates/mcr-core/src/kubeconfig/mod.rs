//! Kubeconfig helpers: parsing, contexts, client building, exec policy, connection hash.
//!
//! Every provider that builds member clients from kubeconfigs (Secrets, files,
//! ClusterProfiles) goes through this module, so the security rules live in one place:
//!
//! * one [`Policy`] (apart from the tunable [`ClientOptions`]) says what a kubeconfig may make
//!   the controller do: run credential plugins (`exec`, `auth-provider`) only as its
//!   [`ExecPolicy`] allows (command, arguments, servers, environment), checked before anything
//!   runs; read local files; use a proxy (the process's `HTTPS_PROXY` is ignored unless the
//!   policy says otherwise). Its default is the policy for untrusted kubeconfigs;
//! * errors name contexts, clusters and command basenames, never tokens, keys, certificates,
//!   plugin arguments or output, or the kubeconfig text; request-time errors of members go
//!   through [`redact_kube_error`] before mcr logs or stores them;
//! * [`connection_hash`] tells whether what defines a context's connection changed, so a
//!   provider only rebuilds a cluster when it must.
//!
//! ```no_run
//! use mcr_core::kubeconfig::{self, ClientOptions, Policy};
//! # async fn demo(secret_data: &[u8]) -> Result<(), mcr_core::kubeconfig::Error> {
//! let kc = kubeconfig::parse(secret_data)?;
//! for context in kubeconfig::contexts(&kc) {
//!     let cluster = kubeconfig::cluster_for_context(
//!         context.as_str(), &kc, Some(&context), &ClientOptions::default(), &Policy::default(),
//!     ).await?;
//!     println!("{} -> {:?}", cluster.name(), cluster.connection_hash());
//! }
//! # Ok(()) }
//! ```

mod auth_provider;
mod client;
mod error;
mod exec;
mod exec_policy;
mod exec_renew;
mod exec_rule;
mod file_refs;
mod hash;
mod options;
mod parse;
pub(crate) mod policy;
mod proxy;

pub use crate::redact::redact_kube_error;
pub use client::{client_for_context, cluster_for_context};
pub use error::Error;
pub use exec_policy::ExecPolicy;
pub use exec_rule::ExecRule;
pub(crate) use file_refs::check_file_references;
pub use hash::{bytes_hash, connection_hash};
pub use options::ClientOptions;
pub(crate) use options::DEFAULT_CONNECT_TIMEOUT;
pub use parse::{contexts, current_context, parse, read};
pub use policy::{Policy, check_policy};
pub use proxy::EnvProxy;

/// The kube kubeconfig type, re-exported for convenience.
pub use kube::config::Kubeconfig;

/// Rejects a server URL kube cannot send requests to: without an `http`/`https` scheme or a
/// host (`10.0.0.5:6443`), kube builds a client whose every request panics inside its buffer
/// worker. Both client builders mcr has ([`client_for_context`] and
/// [`RenewableClient`](crate::credentials::RenewableClient)) call it, so every path to a member
/// client (Secrets, files, profiles, a Gardener advertised address) is checked here.
pub(crate) fn check_server_url(url: &http::Uri) -> Result<(), String> {
    match url.scheme_str() {
        Some("https" | "http") => {}
        Some(other) => {
            return Err(format!(
                "the server URL has scheme {other:?}, expected \"https\" or \"http\""
            ));
        }
        None => {
            return Err("the server URL has no scheme (write it as https://host:port)".to_string());
        }
    }
    if url.host().is_none_or(str::is_empty) {
        return Err("the server URL has no host".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
