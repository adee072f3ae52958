//! Credentials that expire, renewed in place.
//!
//! Short-lived credentials (Gardener's `adminkubeconfig` client certificates, bound tokens)
//! must be renewed before they expire, for every member, forever. Rebuilding the cluster on
//! each renewal would relist every watched type and leave a window without the cluster;
//! instead, a client built by [`RenewableClient`] swaps its credentials in place through its
//! [`CredentialHandle`]:
//!
//! - new requests carry the new token, new TLS connections present the new client
//!   certificate, and the connection pool is replaced, so connections opened with the old
//!   credentials retire when their running requests end;
//! - the [`Cluster`](crate::Cluster) (its identity, cache, informers and field indexes) stays
//!   the same: watches that reconnect resume from their resourceVersion, nothing is relisted.
//!
//! [`spawn_renewal`] renews before expiry ([`RenewalOptions`]: a fraction of the lifetime or a
//! margin, with jitter), retries failures with backoff, and logs a failing renewal with the
//! cluster name, never the credentials. [`CredentialHandle::status`] exposes the expiry and
//! failures for health checks and metrics; a [`Cluster`](crate::Cluster) built
//! [`with_credentials`](crate::Cluster::with_credentials) returns it from
//! [`Cluster::credentials`](crate::Cluster::credentials).
//!
//! Providers whose kubeconfigs rotate (Secrets, files) get this from
//! [`Members`](crate::members::Members): a member whose context has static credentials (a
//! token or a client certificate, no plugin) is built with [`cluster_for_context`], and when a
//! rotated kubeconfig changes only its credentials, the running cluster takes them.
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcr_core::credentials::{self, Credentials, RenewableClient, RenewalOptions};
//! # async fn f(kc: mcr_core::kubeconfig::Kubeconfig, source: Arc<dyn credentials::Renew>, token: tokio_util::sync::CancellationToken) -> Result<(), credentials::Error> {
//! let (config, creds) = credentials::from_kubeconfig(&kc, None, &Default::default(), &Default::default()).await?;
//! let (client, handle) = RenewableClient::build(config, creds)?;
//! let cluster = mcr_core::Cluster::new("member-1", client).with_credentials(handle.clone());
//! credentials::spawn_renewal(cluster.name().clone(), handle, source, RenewalOptions::default(), token);
//! # Ok(()) }
//! ```

mod body;
mod client;
mod kubeconfig;
mod material;
mod redact;
mod renew;

pub use client::{CredentialHandle, RenewableClient};
pub use kubeconfig::cluster_for_context;
pub(crate) use kubeconfig::{is_renewable, renew_in_place};
pub use material::Credentials;
pub use renew::{CredentialStatus, Renew, RenewalOptions, spawn_renewal};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::kubeconfig::{ClientOptions, Policy};

/// Why credentials or a renewable client could not be built. Never contains credential
/// material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The credentials are malformed or of a kind that cannot be renewed in place.
    #[error("invalid credentials: {0}")]
    Invalid(String),
    /// The kubeconfig or client settings were refused.
    #[error("cannot build the client: {0}")]
    Client(String),
}

/// The connection settings (server, CA, TLS, headers, `opts` applied) and the credentials of
/// a kubeconfig context (`None` = current), for [`RenewableClient::build`]. Exec plugins and
/// auth-providers are refused; file references and proxies as `policy` says
/// ([`check_policy`](crate::kubeconfig::check_policy)).
pub async fn from_kubeconfig(
    kc: &Kubeconfig,
    context: Option<&str>,
    opts: &ClientOptions,
    policy: &Policy,
) -> Result<(kube::Config, Credentials), Error> {
    let checked = crate::kubeconfig::policy::checked(kc, context, policy)
        .map_err(|e| Error::Client(e.to_string()))?;
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kc.clone(), &options)
        .await
        .map_err(|_| Error::Client("kube cannot load the kubeconfig context".into()))?;
    opts.apply(&mut config).map_err(Error::Client)?;
    crate::kubeconfig::policy::apply_proxy(&mut config, checked.proxy.as_deref())
        .map_err(Error::Client)?;
    let credentials = Credentials::from_auth_info(&config.auth_info)?;
    Ok((config, credentials))
}
