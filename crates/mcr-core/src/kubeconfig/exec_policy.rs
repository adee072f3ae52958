//! Which credential plugins a kubeconfig may run.

use std::path::Path;

use kube::config::Kubeconfig;

use super::{Error, parse::resolve};

/// Whether kubeconfigs may run commands to obtain credentials.
///
/// A kubeconfig's user can name an `exec` credential plugin (any program, run by the
/// controller with the controller's privileges while the client is built and whenever its
/// token expires) or a legacy `auth-provider` (which, for `gcp`, also runs a command). A
/// kubeconfig read from a Secret or a ClusterProfile is untrusted input: whoever can write
/// it could otherwise run code in the controller. The default is therefore [`ExecPolicy::Deny`].
///
/// ```
/// use mcr_core::kubeconfig::ExecPolicy;
/// let policy = ExecPolicy::AllowCommands(vec![
///     "/usr/local/bin/aws-iam-authenticator".into(), // exactly this path
///     "gke-gcloud-auth-plugin".into(),                // any command with this basename
/// ]);
/// assert!(policy.allows_command("gke-gcloud-auth-plugin"));
/// assert!(policy.allows_command("/opt/google/bin/gke-gcloud-auth-plugin"));
/// assert!(!policy.allows_command("/tmp/aws-iam-authenticator"));
/// assert!(!ExecPolicy::default().allows_command("gke-gcloud-auth-plugin"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ExecPolicy {
    /// Refuse every `exec` and `auth-provider` stanza (the default).
    #[default]
    Deny,
    /// Allow every `exec` and `auth-provider` stanza. Only for kubeconfigs you trust as much as
    /// the controller's own code.
    AllowAll,
    /// Allow `exec` plugins whose command is listed. An entry containing a path separator must
    /// equal the command exactly; an entry without one (`aws`) matches a command with that
    /// basename, wherever it lives (`aws`, `/usr/bin/aws`) — list full paths to pin the
    /// location. Arguments and environment are not checked. `auth-provider` stays refused.
    AllowCommands(Vec<String>),
}

impl ExecPolicy {
    /// True when an `exec` plugin running `command` is allowed.
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
            ExecPolicy::AllowCommands(allowed) => allowed.iter().any(|entry| {
                if entry.is_empty() {
                    false
                } else if entry.contains(['/', std::path::MAIN_SEPARATOR]) {
                    entry == command
                } else {
                    basename(command) == entry
                }
            }),
        }
    }

    /// True when `auth-provider` stanzas are allowed (only [`ExecPolicy::AllowAll`]).
    ///
    /// ```
    /// use mcr_core::kubeconfig::ExecPolicy;
    /// assert!(ExecPolicy::AllowAll.allows_auth_provider());
    /// assert!(!ExecPolicy::AllowCommands(vec!["gcloud".into()]).allows_auth_provider());
    /// ```
    pub fn allows_auth_provider(&self) -> bool {
        matches!(self, ExecPolicy::AllowAll)
    }
}

/// The last path component of a command, for messages and basename matching.
pub(crate) fn basename(command: &str) -> &str {
    Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command)
}

/// Refuses `exec` and `auth-provider` stanzas in the user the context uses, unless `policy`
/// allows them. `context` `None` means the current context. Users of other contexts are not
/// looked at. Errors with [`Error::ExecNotAllowed`] (naming the context and the command's
/// basename only) or [`Error::AuthProviderNotAllowed`], and with the resolution errors
/// ([`Error::NoContext`], [`Error::ContextNotFound`], [`Error::ClusterNotFound`]).
///
/// ```
/// use mcr_core::kubeconfig::{check_exec_policy, parse, Error, ExecPolicy};
/// let kc = parse(br#"
/// clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
/// users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /usr/bin/aws, args: [eks, get-token]}}}]
/// contexts: [{name: ctx, context: {cluster: c, user: u}}]
/// current-context: ctx
/// "#).unwrap();
/// let err = check_exec_policy(&kc, None, &ExecPolicy::Deny).unwrap_err();
/// assert!(matches!(err, Error::ExecNotAllowed { ref command, .. } if command == "aws"));
/// assert!(check_exec_policy(&kc, None, &ExecPolicy::AllowCommands(vec!["aws".into()])).is_ok());
/// ```
pub fn check_exec_policy(
    kc: &Kubeconfig,
    context: Option<&str>,
    policy: &ExecPolicy,
) -> Result<(), Error> {
    let resolved = resolve(kc, context)?;
    let Some(user) = resolved.user else {
        return Ok(());
    };
    if let Some(provider) = &user.auth_provider
        && !policy.allows_auth_provider()
    {
        return Err(Error::AuthProviderNotAllowed {
            context: resolved.name.to_string(),
            provider: provider.name.clone(),
        });
    }
    if let Some(exec) = &user.exec {
        let command = exec.command.as_deref().unwrap_or("");
        if !policy.allows_command(command) {
            return Err(Error::ExecNotAllowed {
                context: resolved.name.to_string(),
                command: basename(command).to_string(),
            });
        }
    }
    Ok(())
}
