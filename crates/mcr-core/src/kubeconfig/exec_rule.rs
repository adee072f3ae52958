//! One allowed credential plugin: command, arguments, servers and environment.

use kube::config::ExecConfig;

/// The arguments an [`ExecRule`] accepts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Args {
    /// No arguments (the default).
    #[default]
    None,
    /// Exactly these, in this order.
    Exact(Vec<String>),
    /// As many as patterns, each matching the pattern at its position.
    Patterns(Vec<String>),
    /// Any arguments.
    Any,
}

/// The servers an [`ExecRule`] may be used with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Servers {
    /// None (the default): a rule must name its servers or say [`ExecRule::any_server`].
    #[default]
    Unset,
    /// Hosts matching one of these patterns.
    Hosts(Vec<String>),
    /// Any server.
    Any,
}

/// One `exec` credential plugin an [`ExecPolicy`](super::ExecPolicy) allows, and how.
///
/// Everything not stated is refused: a rule built with [`ExecRule::command`] alone accepts
/// the command with no arguments, no kubeconfig-supplied environment, and no server at all
/// (name the servers with [`servers`](Self::servers), or opt out with
/// [`any_server`](Self::any_server)). The plugin runs with an empty environment apart from
/// `KUBERNETES_EXEC_INFO`, the variables listed with [`pass_env`](Self::pass_env) (copied from
/// the controller's environment) and the kubeconfig's `env` entries the rule
/// [allows](Self::kubeconfig_env).
///
/// Patterns (arguments and hosts) use `*` for any run of characters and `?` for one
/// character; host patterns ignore case (`*.eks.amazonaws.com` matches
/// `ABC.gr7.eu-west-1.eks.amazonaws.com`).
///
/// ```
/// use mcr_core::kubeconfig::ExecRule;
/// // EKS: `aws eks get-token --cluster-name <any>` against EKS endpoints only, with the
/// // controller's AWS profile and home directory (for ~/.aws) but nothing else.
/// let rule = ExecRule::command("aws")
///     .args_matching(["eks", "get-token", "--cluster-name", "*"])
///     .servers(["*.eks.amazonaws.com"])
///     .pass_env(["HOME", "PATH", "AWS_PROFILE", "AWS_REGION"]);
/// # let _ = rule;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecRule {
    command: String,
    args: Args,
    servers: Servers,
    pass_env: Vec<String>,
    inherit_env: bool,
    kubeconfig_env: Vec<String>,
}

/// The environment a plugin runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ExecEnv {
    /// The controller's environment plus the kubeconfig's `env` ([`ExecPolicy::AllowAll`](super::ExecPolicy::AllowAll)).
    Inherit,
    /// An empty environment plus these variables of the controller's, plus the kubeconfig's
    /// `env` (which the rule checked).
    Clean(Vec<String>),
}

impl ExecRule {
    /// A rule for `command`: an entry containing a path separator must equal the kubeconfig's
    /// command exactly; an entry without one (`aws`) matches a command with that basename,
    /// wherever it lives (`aws`, `/usr/bin/aws`): give a full path to pin the location.
    ///
    /// ```
    /// use mcr_core::kubeconfig::{ExecPolicy, ExecRule};
    /// let policy = ExecPolicy::allow(ExecRule::command("/usr/local/bin/aws-iam-authenticator"));
    /// assert!(!policy.allows_command("/tmp/aws-iam-authenticator"));
    /// ```
    pub fn command(command: impl Into<String>) -> Self {
        ExecRule {
            command: command.into(),
            args: Args::None,
            servers: Servers::Unset,
            pass_env: Vec::new(),
            inherit_env: false,
            kubeconfig_env: Vec::new(),
        }
    }

    /// Accepts exactly these arguments, in this order.
    ///
    /// ```
    /// let rule = mcr_core::kubeconfig::ExecRule::command("kubelogin").args(["get-token", "--login", "msi"]);
    /// # let _ = rule;
    /// ```
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = Args::Exact(args.into_iter().map(Into::into).collect());
        self
    }

    /// Accepts as many arguments as there are patterns, each matching the pattern at its
    /// position (`*`: any run of characters, `?`: one character).
    ///
    /// ```
    /// let rule = mcr_core::kubeconfig::ExecRule::command("aws")
    ///     .args_matching(["eks", "get-token", "--cluster-name", "*"]);
    /// # let _ = rule;
    /// ```
    #[must_use]
    pub fn args_matching<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = Args::Patterns(patterns.into_iter().map(Into::into).collect());
        self
    }

    /// Accepts any arguments. The kubeconfig's writer then chooses what the plugin does with
    /// the controller's identity (`aws s3 cp ...`): prefer [`args`](Self::args) or
    /// [`args_matching`](Self::args_matching).
    #[must_use]
    pub fn any_args(mut self) -> Self {
        self.args = Args::Any;
        self
    }

    /// The rule applies only to kubeconfigs whose server's host matches one of these patterns
    /// (case-insensitive; `*.eks.amazonaws.com`, `10.0.0.?`). Without this or
    /// [`any_server`](Self::any_server), the rule accepts no server.
    ///
    /// ```
    /// let rule = mcr_core::kubeconfig::ExecRule::command("gke-gcloud-auth-plugin").servers(["*.gke.goog"]);
    /// # let _ = rule;
    /// ```
    #[must_use]
    pub fn servers<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.servers = Servers::Hosts(hosts.into_iter().map(Into::into).collect());
        self
    }

    /// The rule applies whatever server the kubeconfig names. The plugin's credential then
    /// goes wherever the kubeconfig's writer points it.
    #[must_use]
    pub fn any_server(mut self) -> Self {
        self.servers = Servers::Any;
        self
    }

    /// Variables of the controller's environment the plugin receives (when set); every other
    /// variable is withheld. Plugins usually need some: `PATH`, `HOME`, `AWS_PROFILE`, ...
    #[must_use]
    pub fn pass_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.pass_env.extend(names.into_iter().map(Into::into));
        self
    }

    /// The plugin receives the controller's whole environment (as `kubectl` does) instead of
    /// the [`pass_env`](Self::pass_env) list: for plugins configured by the operator
    /// (arguments pinned with [`args`](Self::args)), never for a command a kubeconfig's
    /// writer can steer.
    #[must_use]
    pub fn inherit_env(mut self) -> Self {
        self.inherit_env = true;
        self
    }

    /// Variables the kubeconfig's `env` entries may set (with any value). A kubeconfig setting
    /// another variable is refused.
    #[must_use]
    pub fn kubeconfig_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.kubeconfig_env
            .extend(names.into_iter().map(Into::into));
        self
    }

    pub(crate) fn matches_command(&self, command: &str) -> bool {
        let entry = self.command.as_str();
        if entry.is_empty() || command.is_empty() {
            false
        } else if entry.contains(['/', std::path::MAIN_SEPARATOR]) {
            entry == command
        } else {
            basename(command) == entry
        }
    }

    /// Whether the rule accepts `exec` used with `server` (its command already matched), and
    /// with which environment. Refusals name positions and variable names, never values.
    pub(crate) fn accepts(&self, exec: &ExecConfig, server: &str) -> Result<ExecEnv, String> {
        let args = exec.args.as_deref().unwrap_or_default();
        match &self.args {
            Args::Any => {}
            Args::None if args.is_empty() => {}
            Args::None => return Err("the rule allows no arguments".to_string()),
            Args::Exact(want) => {
                if want.len() != args.len() {
                    return Err(format!(
                        "the rule allows {} arguments, the kubeconfig gives {}",
                        want.len(),
                        args.len()
                    ));
                }
                if let Some(i) = want.iter().zip(args).position(|(w, a)| w != a) {
                    return Err(format!("argument {} differs from the rule's", i + 1));
                }
            }
            Args::Patterns(want) => {
                if want.len() != args.len() {
                    return Err(format!(
                        "the rule allows {} arguments, the kubeconfig gives {}",
                        want.len(),
                        args.len()
                    ));
                }
                if let Some(i) = want.iter().zip(args).position(|(w, a)| !glob(w, a, false)) {
                    return Err(format!("argument {} does not match the rule", i + 1));
                }
            }
        }
        match &self.servers {
            Servers::Any => {}
            Servers::Unset => {
                return Err("the rule names no servers (use servers or any_server)".to_string());
            }
            Servers::Hosts(patterns) => {
                let host = server
                    .parse::<http::Uri>()
                    .ok()
                    .filter(|u| u.scheme().is_some())
                    .and_then(|u| u.host().map(|h| h.trim_matches(['[', ']']).to_string()))
                    .filter(|h| !h.is_empty())
                    .ok_or("the server URL has no host")?;
                if !patterns.iter().any(|p| glob(p, &host, true)) {
                    return Err(format!(
                        "server host {host:?} is not among the rule's servers"
                    ));
                }
            }
        }
        for var in exec.env.iter().flatten() {
            let name = var.get("name").map(String::as_str).unwrap_or("");
            if !self.kubeconfig_env.iter().any(|n| n == name) {
                return Err(format!(
                    "the kubeconfig sets environment variable {name:?}, which the rule does not allow"
                ));
            }
        }
        Ok(if self.inherit_env {
            ExecEnv::Inherit
        } else {
            ExecEnv::Clean(self.pass_env.clone())
        })
    }
}

/// The last path component of a command, for messages and basename matching.
pub(crate) fn basename(command: &str) -> &str {
    std::path::Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command)
}

/// Whether `text` matches `pattern` (`*`: any run, `?`: one character), in time proportional
/// to their lengths' product at worst (no exponential backtracking).
pub(crate) fn glob(pattern: &str, text: &str, ignore_case: bool) -> bool {
    let fold = |c: char| {
        if ignore_case {
            c.to_ascii_lowercase()
        } else {
            c
        }
    };
    let p: Vec<char> = pattern.chars().map(fold).collect();
    let t: Vec<char> = text.chars().map(fold).collect();
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was, and the text position it currently stands for up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_runs_and_single_characters() {
        assert!(glob("*.eks.amazonaws.com", "a.b.EKS.amazonaws.com", true));
        assert!(!glob("*.eks.amazonaws.com", "eks.amazonaws.com.evil", true));
        assert!(!glob("*.eks.amazonaws.com", "a.b.EKS.amazonaws.com", false));
        assert!(glob("10.0.0.?", "10.0.0.7", false));
        assert!(!glob("10.0.0.?", "10.0.0.17", false));
        assert!(glob("a*b*c", "axxbyyc", false));
        assert!(!glob("a*b*c", "axxbyy", false));
        assert!(glob("*", "", false));
        assert!(!glob("", "x", false));
        let long = "a".repeat(5000);
        assert!(!glob(&"*a".repeat(50), &format!("{long}b"), false));
    }
}
