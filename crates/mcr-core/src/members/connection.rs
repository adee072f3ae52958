//! [`Connection`]: what a provider wants a member to connect to.

use std::sync::Arc;

use crate::kubeconfig::{self, Kubeconfig, Policy};

/// One member's connection as its provider read it from its source of truth: a kubeconfig and
/// the context to use, the [`Policy`] it runs under and the hash that decides whether a
/// running member must change.
///
/// [`Members::ensure`](super::Members::ensure) keeps the running member when the hash is the
/// one it was built with, renews its credentials in place when only they changed (same server,
/// CA and settings), and builds a new instance otherwise.
///
/// ```
/// use mcr_core::members::Connection;
/// let kc = mcr_core::kubeconfig::parse(br#"
/// clusters: [{name: c, cluster: {server: "https://10.0.0.1"}}]
/// users: [{name: u, user: {token: abc}}]
/// contexts: [{name: ctx, context: {cluster: c, user: u}}]
/// current-context: ctx
/// "#).unwrap();
/// let conn = Connection::new(kc, None).unwrap();
/// assert_eq!(conn.hash().len(), 64);
/// ```
#[derive(Clone)]
pub struct Connection {
    kubeconfig: Arc<Kubeconfig>,
    context: Option<String>,
    policy: Option<Arc<Policy>>,
    hash: String,
    renewable: bool,
}

/// Shows the context, hash, renewability and whether a policy is set: never the kubeconfig,
/// whose auth-provider tokens and exec environment values kube's own `Debug` prints.
impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("context", &self.context)
            .field("hash", &self.hash)
            .field("renewable", &self.renewable)
            .field("own_policy", &self.policy.is_some())
            .finish_non_exhaustive()
    }
}

/// Two connections are equal when their hashes, contexts and renewability are (the hash
/// stands for the kubeconfig's relevant content).
impl PartialEq for Connection {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
            && self.context == other.context
            && self.renewable == other.renewable
    }
}

impl Connection {
    /// The connection of `context` (`None`: the current context) of `kubeconfig`, hashed with
    /// [`kubeconfig::connection_hash`]. Fails when the context or its cluster entry is missing.
    ///
    /// ```
    /// let kc = mcr_core::kubeconfig::parse(b"clusters: [{name: c, cluster: {server: https://a}}]\ncontexts: []").unwrap();
    /// assert!(mcr_core::members::Connection::new(kc, Some("missing")).is_err());
    /// ```
    pub fn new(
        kubeconfig: impl Into<Arc<Kubeconfig>>,
        context: Option<&str>,
    ) -> Result<Self, kubeconfig::Error> {
        let kubeconfig = kubeconfig.into();
        let hash = kubeconfig::connection_hash(&kubeconfig, context)?;
        Ok(Connection {
            kubeconfig,
            context: context.map(str::to_owned),
            policy: None,
            hash,
            renewable: true,
        })
    }

    /// The connection of a kubeconfig's current context, parsed from `bytes`.
    ///
    /// ```
    /// let conn = mcr_core::members::Connection::parse(br#"
    /// clusters: [{name: c, cluster: {server: "https://10.0.0.1"}}]
    /// contexts: [{name: ctx, context: {cluster: c}}]
    /// current-context: ctx
    /// "#).unwrap();
    /// assert!(!conn.hash().is_empty());
    /// ```
    pub fn parse(bytes: &[u8]) -> Result<Self, kubeconfig::Error> {
        Connection::new(kubeconfig::parse(bytes)?, None)
    }

    /// Runs this member under `policy` instead of
    /// [`MembersOptions::policy`](super::MembersOptions::policy) (e.g. a policy allowing
    /// exactly the command an operator configured for it). The whole [`Policy`] is replaced,
    /// not merged: a provider builds it from its operator's configuration, never from what the
    /// kubeconfig's writer supplied, so nothing a Secret or profile says can widen it.
    ///
    /// ```
    /// use mcr_core::kubeconfig::{ExecPolicy, ExecRule, Policy};
    /// # let conn = mcr_core::members::Connection::parse(b"clusters: [{name: c, cluster: {server: https://a}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x").unwrap();
    /// let policy = Policy::default().exec(ExecPolicy::allow(ExecRule::command("aws").any_args().any_server()));
    /// let conn = conn.with_policy(policy);
    /// # let _ = conn;
    /// ```
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// Replaces the hash, e.g. to fold in the contents of files the kubeconfig reads by path
    /// (a rotated token file changes the hash although the kubeconfig did not change).
    ///
    /// ```
    /// # let conn = mcr_core::members::Connection::parse(b"clusters: [{name: c, cluster: {server: https://a}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x").unwrap();
    /// let conn = conn.with_hash("sha256:abc");
    /// assert_eq!(conn.hash(), "sha256:abc");
    /// ```
    pub fn with_hash(mut self, hash: impl Into<String>) -> Self {
        self.hash = hash.into();
        self
    }

    /// Whether a change of this connection may be applied by renewing the running member's
    /// credentials in place (default `true`). A provider turns it off when part of the
    /// connection is invisible in the kubeconfig, e.g. a CA read from a file whose contents
    /// changed: then a changed hash always builds a new instance.
    ///
    /// ```
    /// # let conn = mcr_core::members::Connection::parse(b"clusters: [{name: c, cluster: {server: https://a}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x").unwrap();
    /// let conn = conn.renewable(false);
    /// # let _ = conn;
    /// ```
    pub fn renewable(mut self, renewable: bool) -> Self {
        self.renewable = renewable;
        self
    }

    /// The kubeconfig.
    pub(crate) fn kubeconfig(&self) -> &Kubeconfig {
        &self.kubeconfig
    }

    /// The context (`None`: the current one).
    pub(crate) fn context(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// The hash a running member built from this connection carries
    /// ([`Cluster::connection_hash`](crate::Cluster::connection_hash)).
    pub fn hash(&self) -> &str {
        &self.hash
    }

    pub(crate) fn policy(&self) -> Option<&Policy> {
        self.policy.as_deref()
    }

    pub(crate) fn is_renewable(&self) -> bool {
        self.renewable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debug output shows what identifies the connection, never the kubeconfig's secrets:
    /// auth-provider tokens, exec environment values, tokens, keys.
    #[test]
    fn debug_shows_no_credentials() {
        let kc = kubeconfig::parse(
            br#"
clusters: [{name: c, cluster: {server: "https://10.0.0.1"}}]
users:
- name: u
  user:
    token: planted-token
    client-key-data: cGxhbnRlZC1rZXk=
    auth-provider: {name: oidc, config: {id-token: planted-id-token, client-secret: planted-client-secret}}
    exec: {apiVersion: client.authentication.k8s.io/v1, command: plugin, args: [--password, planted-arg], env: [{name: PASSWORD, value: planted-env}]}
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"#,
        )
        .unwrap();
        let conn = Connection::new(kc, Some("ctx"))
            .unwrap()
            .with_policy(Policy::trusted());
        let shown = format!("{conn:?} {conn:#?}");
        assert!(!shown.contains("planted"), "{shown}");
        assert!(
            shown.contains("ctx") && shown.contains(conn.hash()),
            "{shown}"
        );
    }
}
