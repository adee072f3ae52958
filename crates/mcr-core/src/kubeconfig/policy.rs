//! What a kubeconfig may make the controller do besides connecting to its server.

use kube::config::Kubeconfig;

use super::exec_policy::exec_plan;
use super::exec_rule::ExecEnv;
use super::{EnvProxy, Error, ExecPolicy, check_file_references, parse::resolve};

/// The security policy every client built from a kubeconfig goes through: which credential
/// plugins run ([`ExecPolicy`]), whether local files may be read, and which proxy is used.
///
/// It is one value, separate from [`ClientOptions`](super::ClientOptions), so that tuning a
/// timeout or a header cannot weaken it. The default is the policy for untrusted kubeconfigs
/// (Secrets, ClusterProfiles): no plugins, no local files, no kubeconfig proxy and no proxy
/// from the environment. [`Policy::trusted`] is for the operator's own files.
///
/// | field | default | trusted |
/// |---|---|---|
/// | [`exec`](Self::exec) | [`ExecPolicy::Deny`] | [`ExecPolicy::AllowAll`] |
/// | [`allow_file_references`](Self::allow_file_references) | `false` | `true` |
/// | [`allow_kubeconfig_proxy`](Self::allow_kubeconfig_proxy) | `false` | `true` |
/// | [`env_proxy`](Self::env_proxy) | `None` (the environment is ignored) | `None` |
///
/// ```
/// use mcr_core::kubeconfig::{EnvProxy, ExecPolicy, ExecRule, Policy};
/// let policy = Policy::default()
///     .exec(ExecPolicy::allow(
///         ExecRule::command("aws")
///             .args_matching(["eks", "get-token", "--cluster-name", "*"])
///             .servers(["*.eks.amazonaws.com"])
///             .pass_env(["HOME", "PATH", "AWS_PROFILE"]),
///     ))
///     .env_proxy(EnvProxy::from_env());
/// assert!(!policy.allow_file_references);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Policy {
    /// Which `exec` plugins and `auth-provider`s may run (default [`ExecPolicy::Deny`]).
    pub exec: ExecPolicy,
    /// Whether a context may read local files (`certificate-authority`, `client-certificate`,
    /// `client-key`, `tokenFile`; see [`check_policy`]). Default `false`: otherwise a
    /// kubeconfig naming the controller's service-account token file and a server of its
    /// choosing would receive that token.
    pub allow_file_references: bool,
    /// Whether a cluster's `proxy-url` is honoured (default `false`: such a context is refused
    /// with [`Error::ProxyNotAllowed`]).
    pub allow_kubeconfig_proxy: bool,
    /// The proxy for members whose kubeconfig names none (default `None`: direct connections,
    /// whatever `HTTPS_PROXY` says). See [`EnvProxy::from_env`].
    pub env_proxy: Option<EnvProxy>,
}

impl Policy {
    /// The policy for kubeconfigs as trusted as the controller's own code (the operator's
    /// files): every plugin, local files and kubeconfig proxies are allowed. The environment's
    /// proxy is still used only when set with [`env_proxy`](Self::env_proxy).
    ///
    /// ```
    /// let policy = mcr_core::kubeconfig::Policy::trusted();
    /// assert!(policy.allow_file_references);
    /// ```
    pub fn trusted() -> Self {
        Policy {
            exec: ExecPolicy::AllowAll,
            allow_file_references: true,
            allow_kubeconfig_proxy: true,
            env_proxy: None,
        }
    }

    /// Sets [`exec`](Self::exec).
    #[must_use]
    pub fn exec(mut self, exec: ExecPolicy) -> Self {
        self.exec = exec;
        self
    }

    /// Sets [`allow_file_references`](Self::allow_file_references).
    #[must_use]
    pub fn allow_file_references(mut self, allow: bool) -> Self {
        self.allow_file_references = allow;
        self
    }

    /// Sets [`allow_kubeconfig_proxy`](Self::allow_kubeconfig_proxy).
    #[must_use]
    pub fn allow_kubeconfig_proxy(mut self, allow: bool) -> Self {
        self.allow_kubeconfig_proxy = allow;
        self
    }

    /// Sets [`env_proxy`](Self::env_proxy).
    ///
    /// ```
    /// use mcr_core::kubeconfig::{EnvProxy, Policy};
    /// let policy = Policy::default().env_proxy(Some(EnvProxy::new("http://proxy:3128").no_proxy(".svc")));
    /// assert!(policy.env_proxy.is_some());
    /// ```
    #[must_use]
    pub fn env_proxy(mut self, proxy: Option<EnvProxy>) -> Self {
        self.env_proxy = proxy;
        self
    }
}

impl From<ExecPolicy> for Policy {
    /// The untrusted policy with `exec` as its exec policy.
    fn from(exec: ExecPolicy) -> Self {
        Policy::default().exec(exec)
    }
}

/// What the checks decided for one context.
pub(crate) struct Checked {
    /// The environment of the context's exec plugin.
    pub(crate) exec_env: ExecEnv,
    /// The proxy to use: `None` direct, `Some` this URL.
    pub(crate) proxy: Option<String>,
}

/// Refuses a context `policy` does not allow: its exec plugin or auth-provider, its local
/// files and its `proxy-url`. Nothing runs and nothing is read.
///
/// The user's `exec` stanza must match a rule of [`Policy::exec`] (command, arguments, server,
/// environment); errors with [`Error::ExecNotAllowed`] naming the context, the command's
/// basename and what the rules refuse (never argument or environment values), or
/// [`Error::AuthProviderNotAllowed`]:
///
/// ```
/// use mcr_core::kubeconfig::{check_policy, parse, Error, ExecPolicy, ExecRule, Policy};
/// let kc = parse(br#"
/// clusters: [{name: c, cluster: {server: "https://abc.gr7.eu-west-1.eks.amazonaws.com"}}]
/// users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /usr/bin/aws, args: [eks, get-token]}}}]
/// contexts: [{name: ctx, context: {cluster: c, user: u}}]
/// current-context: ctx
/// "#).unwrap();
/// let err = check_policy(&kc, None, &Policy::default()).unwrap_err();
/// assert!(matches!(err, Error::ExecNotAllowed { ref command, .. } if command == "aws"));
/// let eks = ExecRule::command("aws").args(["eks", "get-token"]);
/// let allowed = Policy::from(ExecPolicy::allow(eks.clone().servers(["*.eks.amazonaws.com"])));
/// assert!(check_policy(&kc, None, &allowed).is_ok());
/// // the same plugin pointed at another server is refused
/// let elsewhere = Policy::from(ExecPolicy::allow(eks.servers(["*.gke.goog"])));
/// assert!(check_policy(&kc, None, &elsewhere).is_err());
/// ```
///
/// Unless [`Policy::allow_file_references`] is set, a context whose cluster or user entry
/// reads a local file (`certificate-authority`, `client-certificate`, `client-key`,
/// `tokenFile`) is refused:
///
/// ```
/// use mcr_core::kubeconfig::{check_policy, parse, Error, Policy};
/// let kc = parse(br#"
/// clusters: [{name: c, cluster: {server: "https://evil.example"}}]
/// users: [{name: u, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}]
/// contexts: [{name: ctx, context: {cluster: c, user: u}}]
/// "#).unwrap();
/// let err = check_policy(&kc, Some("ctx"), &Policy::default()).unwrap_err();
/// assert!(matches!(err, Error::FileReferenceNotAllowed { ref field, .. } if field == "tokenFile"));
/// ```
///
/// A cluster's `proxy-url` is refused unless [`Policy::allow_kubeconfig_proxy`] is set:
///
/// ```
/// use mcr_core::kubeconfig::{check_policy, parse, Error, Policy};
/// let kc = parse(br#"
/// clusters: [{name: c, cluster: {server: "https://10.0.0.1", proxy-url: "http://proxy:3128"}}]
/// users: [{name: u, user: {token: abc}}]
/// contexts: [{name: ctx, context: {cluster: c, user: u}}]
/// "#).unwrap();
/// assert!(matches!(check_policy(&kc, Some("ctx"), &Policy::default()), Err(Error::ProxyNotAllowed { .. })));
/// assert!(check_policy(&kc, Some("ctx"), &Policy::trusted()).is_ok());
/// ```
pub fn check_policy(kc: &Kubeconfig, context: Option<&str>, policy: &Policy) -> Result<(), Error> {
    checked(kc, context, policy).map(|_| ())
}

pub(crate) fn checked(
    kc: &Kubeconfig,
    context: Option<&str>,
    policy: &Policy,
) -> Result<Checked, Error> {
    let exec_env = exec_plan(kc, context, &policy.exec)?;
    if !policy.allow_file_references {
        check_file_references(kc, context)?;
    }
    let resolved = resolve(kc, context)?;
    let proxy = match resolved
        .cluster
        .proxy_url
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        Some(_) if !policy.allow_kubeconfig_proxy => {
            return Err(Error::ProxyNotAllowed {
                context: resolved.name.to_string(),
            });
        }
        Some(url) => Some(url.to_string()),
        None => {
            let server = resolved.cluster.server.as_deref().unwrap_or("");
            policy
                .env_proxy
                .as_ref()
                .and_then(|p| p.proxy_for(server))
                .map(str::to_string)
        }
    };
    Ok(Checked { exec_env, proxy })
}

/// Puts the decided proxy in place of what kube's loader chose (which may have come from the
/// process environment).
pub(crate) fn apply_proxy(config: &mut kube::Config, proxy: Option<&str>) -> Result<(), String> {
    config.proxy_url = match proxy {
        None => None,
        Some(url) => Some(
            url.parse::<http::Uri>()
                .map_err(|_| "the proxy URL is not a valid URI".to_string())?,
        ),
    };
    Ok(())
}
