//! The operator's access-provider file (same JSON format as the Go library).

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use crate::error::ProviderFileError;

/// The operator's access-provider file: which credential plugins may run, in order of
/// preference. Same JSON format as the Go library `sigs.k8s.io/cluster-inventory-api/pkg/access`
/// (flag `-clusterprofile-provider-file`).
///
/// The plugin's credential is the controller's identity, and a ClusterProfile's writer names
/// the server it goes to. So the operator also says, in code, where it may go:
/// [`servers`](Self::servers) (host patterns; until set, every profile is refused), whether a
/// profile's `proxy-url` is honoured ([`allow_profile_proxy`](Self::allow_profile_proxy),
/// default no) and which variables a profile's `additional-envs` extension may set
/// ([`profile_env`](Self::profile_env), default none).
///
/// ```
/// use mcr_provider_cluster_inventory::AccessProviders;
/// let file = AccessProviders::from_json(br#"{"providers": [{
///     "name": "secretreader",
///     "execConfig": {"apiVersion": "client.authentication.k8s.io/v1",
///                    "command": "/usr/local/bin/secretreader-plugin", "provideClusterInfo": true},
///     "profileSourcedCLIArgsPolicy": "Append"
/// }]}"#, "providers.json").unwrap();
/// assert_eq!(file.providers[0].name, "secretreader");
///
/// let err = AccessProviders::from_json(br#"{"providers": [{"name": "x"}]}"#, "p.json").unwrap_err();
/// assert!(err.to_string().starts_with("access-provider file p.json: "), "{err}");
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AccessProviders {
    /// The providers, in order of preference: the first one a profile lists is used.
    pub providers: Vec<ProviderConfig>,
    /// Where the plugins' credentials may go (set in code, not in the file).
    #[serde(skip)]
    pub(crate) servers: Servers,
    /// Whether a profile's `proxy-url` is honoured (set in code).
    #[serde(skip)]
    pub(crate) allow_profile_proxy: bool,
    /// Variables a profile's `additional-envs` extension may set (set in code).
    #[serde(skip)]
    pub(crate) profile_env: Vec<String>,
}

/// The API servers the plugins' credentials may be sent to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Servers {
    /// None: every profile is refused until the operator says.
    #[default]
    Unset,
    /// Hosts matching one of these patterns.
    Hosts(Vec<String>),
    /// Any server a profile names.
    Any,
}

/// One credential plugin the operator allows.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfig {
    /// Matched against the names in a profile's `status.accessProviders`.
    pub name: String,
    /// The plugin to run.
    pub exec_config: ExecSpec,
    /// Whether a profile's `additional-args` extension is appended to the plugin's arguments.
    #[serde(default, rename = "profileSourcedCLIArgsPolicy")]
    pub profile_sourced_cli_args_policy: ArgsPolicy,
    /// How a profile's `additional-envs` extension is merged into the plugin's environment.
    #[serde(default)]
    pub profile_sourced_env_vars_policy: EnvPolicy,
}

/// A credential plugin, as in a kubeconfig's `user.exec`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ExecSpec {
    /// `client.authentication.k8s.io/v1` or `.../v1beta1`.
    pub api_version: String,
    /// The program (a path, or a name looked up in `PATH`).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<Vec<EnvVar>>,
    /// Whether the plugin receives the cluster (server, CA, the `client.authentication.k8s.io/exec`
    /// extension as `config`) in `KUBERNETES_EXEC_INFO`.
    #[serde(default)]
    pub provide_cluster_info: bool,
    /// Shown when the command is missing.
    #[serde(default)]
    pub install_hint: Option<String>,
    /// Accepted for compatibility; plugins always run non-interactively.
    #[serde(default)]
    pub interactive_mode: Option<String>,
}

/// One environment variable of a plugin.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    /// Name.
    pub name: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

/// What happens to a profile's `additional-args` extension.
///
/// ```
/// assert_eq!(mcr_provider_cluster_inventory::ArgsPolicy::default(),
///            mcr_provider_cluster_inventory::ArgsPolicy::Ignore);
/// ```
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum ArgsPolicy {
    /// Appended after the file's arguments.
    Append,
    /// Not used (the default, also for an empty string).
    #[default]
    #[serde(alias = "")]
    Ignore,
}

/// What happens to a profile's `additional-envs` extension.
///
/// ```
/// assert_eq!(mcr_provider_cluster_inventory::EnvPolicy::default(),
///            mcr_provider_cluster_inventory::EnvPolicy::Ignore);
/// ```
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum EnvPolicy {
    /// Profile variables are added; the file's value wins on the same name.
    AppendIfNotExists,
    /// Profile variables are added; the profile's value wins on the same name.
    Replace,
    /// Not used (the default, also for an empty string).
    #[default]
    #[serde(alias = "")]
    Ignore,
}

impl AccessProviders {
    /// Reads and validates the file at `path`. Every error names the file and the problem.
    ///
    /// ```no_run
    /// let providers = mcr_provider_cluster_inventory::AccessProviders::from_file(
    ///     std::path::Path::new("/etc/mcr/clusterprofile-provider-file.json"))?;
    /// # Ok::<(), mcr_provider_cluster_inventory::ProviderFileError>(())
    /// ```
    pub fn from_file(path: &Path) -> Result<Self, ProviderFileError> {
        let bytes = std::fs::read(path).map_err(|source| ProviderFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&bytes, path)
    }

    /// Parses and validates the file's contents; `origin` names it in errors.
    ///
    /// ```
    /// use mcr_provider_cluster_inventory::AccessProviders;
    /// let err = AccessProviders::from_json(br#"{"providers": []}"#, "p.json").unwrap_err();
    /// assert!(err.to_string().contains("no providers"), "{err}");
    /// ```
    pub fn from_json(bytes: &[u8], origin: impl AsRef<Path>) -> Result<Self, ProviderFileError> {
        let path = origin.as_ref().to_path_buf();
        let file: AccessProviders =
            serde_json::from_slice(bytes).map_err(|source| ProviderFileError::Malformed {
                path: path.clone(),
                source,
            })?;
        file.validate()
            .map_err(|reason| ProviderFileError::Invalid { path, reason })?;
        Ok(file)
    }

    fn validate(&self) -> Result<(), String> {
        if self.providers.is_empty() {
            return Err("no providers are configured".to_string());
        }
        let mut names = BTreeSet::new();
        for (i, p) in self.providers.iter().enumerate() {
            if p.name.is_empty() {
                return Err(format!("providers[{i}]: the name is empty"));
            }
            if !names.insert(p.name.as_str()) {
                return Err(format!(
                    "providers[{i}]: the name {:?} is used twice",
                    p.name
                ));
            }
            let exec = &p.exec_config;
            if exec.command.trim().is_empty() {
                return Err(format!(
                    "provider {:?}: execConfig.command is empty",
                    p.name
                ));
            }
            if !matches!(
                exec.api_version.as_str(),
                "client.authentication.k8s.io/v1" | "client.authentication.k8s.io/v1beta1"
            ) {
                return Err(format!(
                    "provider {:?}: execConfig.apiVersion must be client.authentication.k8s.io/v1 or v1beta1",
                    p.name
                ));
            }
            if let Some(mode) = &exec.interactive_mode
                && !matches!(mode.as_str(), "" | "Never" | "IfAvailable")
            {
                return Err(format!(
                    "provider {:?}: execConfig.interactiveMode {mode:?} is not supported (plugins run non-interactively)",
                    p.name
                ));
            }
        }
        Ok(())
    }

    /// The API servers the plugins' credentials may be sent to: host patterns (`*` any run
    /// of characters, `?` one character, case-insensitive; `*.fleet.example.com`,
    /// `10.0.0.?`), matched against the host of the server a profile names. A profile naming
    /// another server is refused (not retried until it changes). Until this or
    /// [`any_server`](Self::any_server) is called, every profile is refused.
    ///
    /// ```
    /// # let file = mcr_provider_cluster_inventory::AccessProviders::from_json(br#"{"providers": [{"name": "a", "execConfig":
    /// #     {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/a"}}]}"#, "f").unwrap();
    /// let file = file.servers(["*.fleet.example.com"]);
    /// # let _ = file;
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

    /// Sends the plugins' credentials to whatever server a profile names. Whoever can write
    /// a ClusterProfile's status then receives the controller's plugin credential: only for
    /// hubs where that is the operator alone.
    #[must_use]
    pub fn any_server(mut self) -> Self {
        self.servers = Servers::Any;
        self
    }

    /// Whether a profile's `proxy-url` is honoured (default `false`: such a profile is
    /// refused with [`ProxyNotAllowed`](mcr_core::kubeconfig::Error::ProxyNotAllowed)).
    #[must_use]
    pub fn allow_profile_proxy(mut self, allow: bool) -> Self {
        self.allow_profile_proxy = allow;
        self
    }

    /// Variables a profile's `additional-envs` extension may set, for providers whose
    /// `profileSourcedEnvVarsPolicy` takes them (default: none; a profile setting another is
    /// refused). The plugin inherits the controller's environment, so list only variables
    /// that cannot change which code runs or where it connects (not `PATH`, `LD_*`,
    /// `BASH_ENV`, `NODE_OPTIONS`, `PYTHONPATH`, `HTTPS_PROXY`, `AWS_CONFIG_FILE`, ...).
    ///
    /// ```
    /// # let file = mcr_provider_cluster_inventory::AccessProviders::from_json(br#"{"providers": [{"name": "a", "execConfig":
    /// #     {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/a"}}]}"#, "f").unwrap();
    /// let file = file.profile_env(["AWS_REGION"]);
    /// # let _ = file;
    /// ```
    #[must_use]
    pub fn profile_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.profile_env = names.into_iter().map(Into::into).collect();
        self
    }

    /// The commands of all providers (for an
    /// [`ExecPolicy`](mcr_core::kubeconfig::ExecPolicy) or for display).
    ///
    /// ```
    /// use mcr_provider_cluster_inventory::AccessProviders;
    /// let f = AccessProviders::from_json(br#"{"providers": [{"name": "a", "execConfig":
    ///     {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/a"}}]}"#, "f").unwrap();
    /// assert_eq!(f.commands(), ["/bin/a"]);
    /// ```
    pub fn commands(&self) -> Vec<&str> {
        self.providers
            .iter()
            .map(|p| p.exec_config.command.as_str())
            .collect()
    }
}
