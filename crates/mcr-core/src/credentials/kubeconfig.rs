//! Kubeconfig rotations that only change credentials: [`cluster_for_context`] builds a
//! renewable member, [`renew_in_place`] applies a rotation to it (used by
//! [`Members`](crate::members::Members)).

use kube::config::{AuthInfo, Kubeconfig};

use super::{Credentials, Error, RenewableClient, from_kubeconfig};
use crate::kubeconfig::{ClientOptions, Policy, connection_hash, current_context};
use crate::{Cluster, ClusterName};

/// The user entry of `context` (`None` = current), if any.
fn user_of<'a>(kc: &'a mut Kubeconfig, context: Option<&str>) -> Option<&'a mut AuthInfo> {
    let context = match context {
        Some(c) => c.to_string(),
        None => current_context(kc)?.to_string(),
    };
    let user = kc
        .contexts
        .iter()
        .find(|c| c.name == context)?
        .context
        .as_ref()?
        .user
        .clone()?;
    kc.auth_infos
        .iter_mut()
        .find(|a| a.name == user)?
        .auth_info
        .as_mut()
}

/// Whether `context`'s user has static credentials (a token or a client certificate) and no
/// exec plugin or auth-provider, so that its clients can be renewed in place.
pub(crate) fn is_renewable(kc: &Kubeconfig, context: Option<&str>) -> bool {
    let mut kc = kc.clone();
    user_of(&mut kc, context).is_some_and(|u| {
        u.exec.is_none()
            && u.auth_provider.is_none()
            && (u.token.is_some()
                || u.token_file.is_some()
                || u.client_certificate_data.is_some()
                || u.client_certificate.is_some())
    })
}

/// The [`connection_hash`] of `context` with the user's credentials (token, token file,
/// client certificate and key) left out: equal hashes mean a rotation changed only the
/// credentials, which [`renew_in_place`] can apply without rebuilding the cluster.
pub(crate) fn endpoint_hash(kc: &Kubeconfig, context: Option<&str>) -> Result<String, Error> {
    let mut kc = kc.clone();
    if let Some(user) = user_of(&mut kc, context) {
        user.token = None;
        user.token_file = None;
        user.client_certificate = None;
        user.client_certificate_data = None;
        user.client_key = None;
        user.client_key_data = None;
    }
    connection_hash(&kc, context).map_err(|e| Error::Client(e.to_string()))
}

/// A cluster whose client is renewable ([`RenewableClient`]) for a context with static
/// credentials (a token or a client certificate, no exec plugin or auth-provider); its handle
/// remembers the kubeconfig's connection hash without the credentials, so that a rotation of
/// only those is applied in place. File references and proxies are refused unless `policy`
/// allows them.
pub async fn cluster_for_context(
    name: impl Into<ClusterName>,
    kc: &Kubeconfig,
    context: Option<&str>,
    opts: &ClientOptions,
    policy: &Policy,
) -> Result<Cluster, Error> {
    let endpoint = endpoint_hash(kc, context)?;
    let (config, creds) = from_kubeconfig(kc, context, opts, policy).await?;
    let (client, handle) = RenewableClient::build_with(config, creds, opts)?;
    handle.set_endpoint(endpoint);
    Ok(Cluster::new(name, client).with_credentials(handle))
}

/// Applies a rotated kubeconfig to `cluster` in place when only its credentials changed (same
/// [`endpoint_hash`] as when the cluster was built) and the cluster is renewable. Returns
/// `Ok(true)` when the cluster now uses the kubeconfig's credentials (also when they were
/// already in use), `Ok(false)` when the cluster must be replaced instead. The rotated
/// kubeconfig goes through `policy` like a new one (a rotation to `tokenFile:` is refused
/// unless file references are allowed).
pub(crate) async fn renew_in_place(
    cluster: &Cluster,
    kc: &Kubeconfig,
    context: Option<&str>,
    opts: &ClientOptions,
    policy: &Policy,
) -> Result<bool, Error> {
    let Some(handle) = cluster.credentials() else {
        return Ok(false);
    };
    if !is_renewable(kc, context)
        || handle.endpoint().as_deref() != Some(&*endpoint_hash(kc, context)?)
    {
        return Ok(false);
    }
    let (_, creds): (_, Credentials) = from_kubeconfig(kc, context, opts, policy).await?;
    if handle.fingerprint().as_deref() != Some(creds.fingerprint()) {
        handle.replace(creds);
        tracing::info!(cluster = %cluster.name(), "kubeconfig rotated: credentials renewed in place");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The renewable path refuses a server URL kube cannot use (it would panic on every
    /// request), like the kubeconfig path does.
    #[tokio::test]
    async fn server_without_scheme_is_refused() {
        let kc = crate::kubeconfig::parse(
            br#"
clusters: [{name: c, cluster: {server: "10.0.0.5:6443"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"#,
        )
        .unwrap();
        let err = cluster_for_context("a", &kc, None, &Default::default(), &Default::default())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot build the client: the server URL has no scheme (write it as https://host:port)"
        );
    }
}
