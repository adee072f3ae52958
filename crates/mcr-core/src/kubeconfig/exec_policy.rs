//! Which credential plugins a kubeconfig may run, with which arguments, environment and servers.

use kube::config::Kubeconfig;

use super::exec_rule::{ExecEnv, ExecRule, basename};
use super::{Error, parse::resolve};

/// Whether kubeconfigs may run commands to obtain credentials.
///
/// A kubeconfig's user can name an `exec` credential plugin (any program, run by the
/// controller with the controller's privileges while the client is built and before its
/// credential expires) or a legacy `auth-provider` (which, for `gcp`, also runs a command). A
/// kubeconfig read from a Secret or a ClusterProfile is untrusted input: whoever can write it
/// could otherwise run code in the controller, or run an allowed cloud plugin with their own
/// arguments and send the controller's cloud token to a server of their choosing. The default
/// is therefore [`ExecPolicy::Deny`]; [`ExecPolicy::Allow`] lists [`ExecRule`]s, each pinning
/// the command, its arguments, the servers it may be used with and its environment.
///
/// ```
/// use mcr_core::kubeconfig::{ExecPolicy, ExecRule};
/// let policy = ExecPolicy::allow(
///     ExecRule::command("aws")
///         .args_matching(["--region", "*", "eks", "get-token", "--cluster-name", "*"])
///         .servers(["*.eks.amazonaws.com"])
///         .pass_env(["HOME", "PATH", "AWS_PROFILE"]),
/// )
/// .or_allow(ExecRule::command("/usr/bin/gke-gcloud-auth-plugin").servers(["*.gke.goog"]));
/// assert!(policy.allows_command("/usr/local/bin/aws"));
/// assert!(!policy.allows_command("/tmp/gke-gcloud-auth-plugin"));
/// assert!(!ExecPolicy::default().allows_command("aws"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ExecPolicy {
    /// Refuse every `exec` and `auth-provider` stanza (the default).
    #[default]
    Deny,
    /// Allow every `exec` stanza, with the kubeconfig's arguments and environment and the
    /// controller's environment, and the tokens `auth-provider` stanzas hold (an
    /// `auth-provider` that needs a command is still refused: mcr never runs one). Only for
    /// kubeconfigs you trust as much as the controller's own code (your own files).
    AllowAll,
    /// Allow `exec` plugins that one of the rules accepts (command, arguments, server, the
    /// kubeconfig's environment); the plugin runs with a cleared environment plus the rule's
    /// pass-through variables. `auth-provider` stays refused.
    Allow(Vec<ExecRule>),
}

impl ExecPolicy {
    /// A policy allowing what `rule` accepts.
    ///
    /// ```
    /// use mcr_core::kubeconfig::{ExecPolicy, ExecRule};
    /// let policy = ExecPolicy::allow(ExecRule::command("kubelogin").any_server());
    /// assert!(policy.allows_command("kubelogin"));
    /// ```
    pub fn allow(rule: ExecRule) -> Self {
        ExecPolicy::Allow(vec![rule])
    }

    /// Also allows what `rule` accepts ([`ExecPolicy::Deny`] becomes [`ExecPolicy::Allow`];
    /// [`ExecPolicy::AllowAll`] stays as it is).
    ///
    /// ```
    /// use mcr_core::kubeconfig::{ExecPolicy, ExecRule};
    /// let policy = ExecPolicy::Deny.or_allow(ExecRule::command("aws").any_server());
    /// assert!(policy.allows_command("aws"));
    /// ```
    #[must_use]
    pub fn or_allow(self, rule: ExecRule) -> Self {
        match self {
            ExecPolicy::Deny => ExecPolicy::Allow(vec![rule]),
            ExecPolicy::AllowAll => ExecPolicy::AllowAll,
            ExecPolicy::Allow(mut rules) => {
                rules.push(rule);
                ExecPolicy::Allow(rules)
            }
        }
    }

    /// True when some rule allows an `exec` plugin running `command` (arguments, servers and
    /// environment are checked by [`check_policy`](super::check_policy)).
    ///
    /// ```
    /// use mcr_core::kubeconfig::ExecPolicy;
    /// assert!(ExecPolicy::AllowAll.allows_command("anything"));
    /// assert!(!ExecPolicy::Deny.allows_command("kubectl"));
    /// ```
    pub fn allows_command(&self, command: &str) -> bool {
        match self {
            ExecPolicy::Deny => false,
            ExecPolicy::AllowAll => true,
            ExecPolicy::Allow(rules) => rules.iter().any(|r| r.matches_command(command)),
        }
    }

    /// True when `auth-provider` stanzas are allowed (only [`ExecPolicy::AllowAll`]): their
    /// stored tokens are used as they are; one that needs a command is refused all the same.
    pub(crate) fn allows_auth_provider(&self) -> bool {
        matches!(self, ExecPolicy::AllowAll)
    }
}

/// Refuses `exec` and `auth-provider` stanzas in the user the context uses, unless `policy`
/// allows them. `context` `None` means the current context. Users of other contexts are not
/// looked at. Errors with [`Error::ExecNotAllowed`] (naming the context, the command's
/// basename and what the rules refuse: never argument or environment values) or
/// [`Error::AuthProviderNotAllowed`], and with the resolution errors ([`Error::NoContext`],
/// [`Error::ContextNotFound`], [`Error::ClusterNotFound`]). The exec part of
/// [`check_policy`](super::check_policy); on success, the environment the context's plugin
/// (if any) runs with.
pub(crate) fn exec_plan(
    kc: &Kubeconfig,
    context: Option<&str>,
    policy: &ExecPolicy,
) -> Result<ExecEnv, Error> {
    let resolved = resolve(kc, context)?;
    let Some(user) = resolved.user else {
        return Ok(ExecEnv::Inherit);
    };
    if let Some(provider) = &user.auth_provider {
        if !policy.allows_auth_provider() {
            return Err(Error::AuthProviderNotAllowed {
                context: resolved.name.to_string(),
                provider: provider.name.clone(),
            });
        }
        if provider
            .config
            .get("cmd-path")
            .is_some_and(|c| !c.trim().is_empty())
        {
            return Err(Error::AuthProviderCommand {
                context: resolved.name.to_string(),
                provider: provider.name.clone(),
            });
        }
    }
    let Some(exec) = &user.exec else {
        return Ok(ExecEnv::Inherit);
    };
    let command = exec.command.as_deref().unwrap_or("");
    let refused = |reason: String| Error::ExecNotAllowed {
        context: resolved.name.to_string(),
        command: basename(command).to_string(),
        reason,
    };
    let rules = match policy {
        ExecPolicy::AllowAll => return Ok(ExecEnv::Inherit),
        ExecPolicy::Deny => return Err(refused("exec plugins are denied".to_string())),
        ExecPolicy::Allow(rules) => rules,
    };
    let candidates: Vec<&ExecRule> = rules
        .iter()
        .filter(|r| r.matches_command(command))
        .collect();
    if candidates.is_empty() {
        return Err(refused("no rule allows this command".to_string()));
    }
    let server = resolved.cluster.server.as_deref().unwrap_or("");
    // The first refusal is reported when no rule with this command accepts the stanza.
    let mut first_refusal = None;
    for rule in candidates {
        match rule.accepts(exec, server) {
            Ok(env) => return Ok(env),
            Err(reason) => {
                first_refusal.get_or_insert(reason);
            }
        }
    }
    Err(refused(first_refusal.unwrap_or_default()))
}
