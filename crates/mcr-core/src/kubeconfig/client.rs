//! Building kube clients and mcr clusters from a kubeconfig context.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use secrecy::ExposeSecret;
use tracing::Instrument;

use super::auth_provider::resolve_auth_provider;
use super::exec::{DEFAULT_EXEC_TIMEOUT, resolve_exec};
use super::exec_renew::ExecRenew;
use super::policy::{apply_proxy, checked};
use super::{ClientOptions, Error, Policy, hash::connection_hash, parse::resolve};
use crate::credentials::{CredentialHandle, Credentials, RenewableClient, RenewalOptions};
use crate::redact;
use crate::{Cluster, ClusterName};

/// Builds a [`kube::Client`] for `context` (`None` = the current context).
///
/// In order: resolves the context; enforces `policy` ([`check_policy`](super::check_policy):
/// exec plugins, file references, proxy) before anything can run or be read; builds a
/// [`kube::Config`] from the context's cluster and user entries; applies `opts` and the proxy
/// the policy chose (never the process's `HTTPS_PROXY` unless the policy carries it); runs the
/// user's `exec` credential plugin, if any (with the environment the policy gives it), and
/// puts the credential it returns in place of the plugin; then builds the client.
///
/// The plugin runs at most [`ClientOptions::exec_timeout`] (30 s by default) and is killed
/// after that; its output is never logged. The client keeps the plugin's credential as issued:
/// for a member whose plugin gives an expiring credential, build a [`cluster_for_context`],
/// which renews it in place. A legacy `auth-provider` (allowed only by
/// [`ExecPolicy::AllowAll`](super::ExecPolicy::AllowAll)) contributes the token it stores, used
/// as it is and never refreshed; one that needs a command (`cmd-path`) is refused.
///
/// Errors never contain credential material (see [`Error`]).
///
/// ```no_run
/// use mcr_core::kubeconfig::{client_for_context, read, ClientOptions, Policy};
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let kc = read(std::path::Path::new("/etc/fleet/member-1.kubeconfig"))?;
/// let client = client_for_context(&kc, None, &ClientOptions::default(), &Policy::trusted()).await?;
/// let version = client.apiserver_version().await?;
/// println!("{}", version.git_version);
/// # Ok(()) }
/// ```
pub async fn client_for_context(
    kc: &Kubeconfig,
    context: Option<&str>,
    opts: &ClientOptions,
    policy: &Policy,
) -> Result<Client, Error> {
    let resolved = resolve(kc, context)?;
    let context = resolved.name.to_string();
    let span = tracing::debug_span!("kubeconfig_client", context = %context);
    let built = build(kc, context, opts, policy, false)
        .instrument(span)
        .await?;
    Ok(built.client)
}

/// A client and (when asked for and possible) what renews its credential.
struct BuiltClient {
    client: Client,
    renewal: Option<(CredentialHandle, ExecRenew)>,
}

async fn build(
    kc: &Kubeconfig,
    context: String,
    opts: &ClientOptions,
    policy: &Policy,
    renewable: bool,
) -> Result<BuiltClient, Error> {
    let checked = checked(kc, Some(&context), policy)?;

    let options = KubeConfigOptions {
        context: Some(context.clone()),
        ..KubeConfigOptions::default()
    };
    let invalid = |reason: String| Error::InvalidConfig {
        context: context.clone(),
        reason,
    };
    let mut config = Config::from_custom_kubeconfig(kc.clone(), &options)
        .await
        .map_err(|e| invalid(redact::kubeconfig_error(&e)))?;
    opts.apply(&mut config).map_err(invalid)?;
    apply_proxy(&mut config, checked.proxy.as_deref()).map_err(invalid)?;
    super::check_server_url(&config.cluster_url).map_err(invalid)?;
    let timeout = opts.exec_timeout.unwrap_or(DEFAULT_EXEC_TIMEOUT);
    let fail = |reason: String| Error::Client {
        context: context.clone(),
        reason,
    };
    let exec_user = config
        .auth_info
        .exec
        .is_some()
        .then(|| config.auth_info.clone());
    if exec_user.is_some() {
        tracing::debug!("running credential plugin");
    }
    // An auth-provider's stored token is used as it is (nothing runs, now or at request
    // time); the policy already refused one that needs a command.
    let token_expiry = resolve_auth_provider(&mut config.auth_info).map_err(invalid)?;
    let expires_at = resolve_exec(&mut config.auth_info, timeout, &checked.exec_env)
        .await
        .map_err(fail)?
        .and_then(|credential| credential.expires_at)
        .or(token_expiry);
    check_static_credentials(&config).map_err(invalid)?;

    // A plugin credential that expires is renewed in place by re-running the plugin (kube
    // itself no longer runs it). The renewable transport does not do proxies: such a member
    // keeps the credential as issued (documented on `cluster_for_context`).
    if let (true, Some(at), Some(user)) = (renewable, expires_at, exec_user) {
        if config.proxy_url.is_some() {
            tracing::warn!(
                "the credential plugin's credential expires, but a member behind a proxy cannot \
                 renew it in place: rebuild the member before it expires"
            );
        } else {
            let credentials = Credentials::from_auth_info(&config.auth_info)
                .map_err(|e| fail(e.to_string()))?
                .with_expiry(at);
            let (client, handle) = RenewableClient::build_with(config, credentials, opts)
                .map_err(|e| fail(e.to_string()))?;
            let source = ExecRenew {
                auth: user,
                timeout,
                env: checked.exec_env,
                context: context.clone(),
            };
            return Ok(BuiltClient {
                client,
                renewal: Some((handle, source)),
            });
        }
    }

    let built = try_build(config);
    let reason = match built {
        Built::Ok(client) => {
            tracing::debug!("client built");
            return Ok(BuiltClient {
                client,
                renewal: None,
            });
        }
        Built::Err(e) => redact::client_error(&e, None),
        Built::Panicked => {
            "kube panicked while building the client (malformed credentials?)".to_string()
        }
    };
    Err(fail(reason))
}

enum Built {
    Ok(Client),
    Err(kube::Error),
    Panicked,
}

/// `Client::try_from`, with a panic contained: kube panics on some malformed credentials
/// (a bearer token that is not a valid header value, also when a plugin returns one).
fn try_build(config: Config) -> Built {
    match std::panic::catch_unwind(AssertUnwindSafe(|| Client::try_from(config))) {
        Ok(Ok(client)) => Built::Ok(client),
        Ok(Err(e)) => Built::Err(e),
        Err(_) => Built::Panicked,
    }
}

/// Rejects inline credentials kube would panic on, with a message that does not echo them.
fn check_static_credentials(config: &Config) -> Result<(), String> {
    if let Some(token) = &config.auth_info.token {
        let header = format!("Bearer {}", token.expose_secret());
        if http::HeaderValue::from_str(&header).is_err() {
            return Err("the user's token is not a valid header value".to_string());
        }
    }
    Ok(())
}

/// Builds a ready [`Cluster`] named `name` for `context` (`None` = the current context), with
/// its [`connection_hash`] set, so that the engagement table
/// keeps it when the same kubeconfig is wanted again ([`Engagements::want`](crate::Engagements::want)). See [`client_for_context`] for the steps
/// and the policy.
///
/// When the context's `exec` plugin returns a credential with an expiry, the cluster's client
/// renews it in place: the plugin runs again (bounded by the same timeout) before the
/// credential expires, and the new credential is swapped in under the same client and cache
/// ([`Cluster::credentials`] reports its status). The renewal stops when the last handle to
/// the cluster is dropped. A member behind a proxy (`proxy-url`) cannot be renewed in place:
/// rebuild it before the credential expires.
///
/// ```no_run
/// use mcr_core::kubeconfig::{cluster_for_context, parse, ClientOptions, Policy};
/// # async fn demo(secret_data: &[u8]) -> Result<(), mcr_core::kubeconfig::Error> {
/// let kc = parse(secret_data)?;
/// let cluster = cluster_for_context("member-1", &kc, None, &ClientOptions::default(), &Policy::default()).await?;
/// assert!(cluster.connection_hash().is_some());
/// # Ok(()) }
/// ```
pub async fn cluster_for_context(
    name: impl Into<ClusterName>,
    kc: &Kubeconfig,
    context: Option<&str>,
    opts: &ClientOptions,
    policy: &Policy,
) -> Result<Cluster, Error> {
    let name = name.into();
    let resolved = resolve(kc, context)?;
    let context = resolved.name.to_string();
    let span = tracing::debug_span!("kubeconfig_cluster", cluster = %name, context = %context);
    async {
        let hash = connection_hash(kc, Some(&context))?;
        let built = build(kc, context, opts, policy, true).await?;
        let cluster = Cluster::new(name.clone(), built.client).with_connection_hash(hash);
        Ok(match built.renewal {
            None => cluster,
            Some((handle, source)) => {
                let stop = tokio_util::sync::CancellationToken::new();
                crate::credentials::spawn_renewal(
                    name,
                    handle.clone(),
                    Arc::new(source),
                    RenewalOptions::default(),
                    stop.clone(),
                );
                cluster
                    .with_credentials(handle)
                    .with_stop_on_drop(stop.drop_guard())
            }
        })
    }
    .instrument(span)
    .await
}
