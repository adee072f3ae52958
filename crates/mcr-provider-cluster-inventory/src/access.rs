//! The access-provider strategy (KEP-5339): the operator's provider file, and turning a
//! ClusterProfile's `accessProviders` entry into a kubeconfig whose only command is the one the
//! file configures.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use kube::config::{
    AuthInfo, Context, ExecConfig, ExecInteractiveMode, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext, NamedExtension,
};
use mcr_core::kubeconfig::ExecPolicy;
use serde::Deserialize;

use crate::ClusterProfile;
use crate::error::ProviderFileError;

/// Cluster extension passed to the plugin as `ExecCredential.spec.cluster.config`.
pub const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";
/// Cluster extension with extra plugin arguments (a list of strings), applied under
/// [`ArgsPolicy`].
pub const ADDITIONAL_ARGS_EXTENSION: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-args";
/// Cluster extension with extra plugin environment variables (a map of strings), applied under
/// [`EnvPolicy`].
pub const ADDITIONAL_ENVS_EXTENSION: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs";

/// The operator's access-provider file: which credential plugins may run, in order of
/// preference. Same JSON format as the Go library `sigs.k8s.io/cluster-inventory-api/pkg/access`
/// (flag `-clusterprofile-provider-file`).
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

/// A profile's access resolved against the provider file.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    /// A one-context kubeconfig: the profile's server, CA and proxy, the file's plugin.
    pub(crate) kubeconfig: Kubeconfig,
    /// Allows exactly the file's command.
    pub(crate) policy: ExecPolicy,
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

    /// The commands of all providers (for an [`ExecPolicy`] or for display).
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

    /// The first provider (in file order) that the profile lists, with the profile's entry.
    pub(crate) fn resolve(
        &self,
        profile: &ClusterProfile,
        context: &str,
    ) -> Result<Resolved, String> {
        let Some((provider, entry)) = self
            .providers
            .iter()
            .find_map(|p| profile.access_provider(&p.name).map(|e| (p, e)))
        else {
            let offered: Vec<&str> = profile
                .status
                .iter()
                .flat_map(|s| s.access_providers.iter().chain(&s.credential_providers))
                .map(|a| a.name.as_str())
                .collect();
            return Err(format!(
                "no configured access provider matches the profile's providers {offered:?}"
            ));
        };
        let src = &entry.cluster;
        if src.server.as_deref().is_none_or(str::is_empty) {
            return Err(format!(
                "access provider {:?}: cluster.server is empty",
                provider.name
            ));
        }
        let extension = |name: &str| {
            src.extensions
                .iter()
                .flatten()
                .find(|e| e.name == name)
                .map(|e| &e.extension)
        };
        // Only what defines the connection is copied: nothing else in the entry (file paths,
        // TLS skips, unknown fields) reaches the client.
        let cluster = kube::config::Cluster {
            server: src.server.clone(),
            certificate_authority_data: src.certificate_authority_data.clone(),
            proxy_url: src.proxy_url.clone(),
            extensions: extension(EXEC_EXTENSION).map(|ext| {
                vec![NamedExtension {
                    name: EXEC_EXTENSION.to_string(),
                    extension: ext.clone(),
                }]
            }),
            ..Default::default()
        };
        let exec = exec_config(
            provider,
            extension(ADDITIONAL_ARGS_EXTENSION),
            extension(ADDITIONAL_ENVS_EXTENSION),
        )?;
        let kubeconfig = Kubeconfig {
            clusters: vec![NamedCluster {
                name: context.to_string(),
                cluster: Some(cluster),
                ..Default::default()
            }],
            auth_infos: vec![NamedAuthInfo {
                name: context.to_string(),
                auth_info: Some(AuthInfo {
                    exec: Some(exec),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            contexts: vec![NamedContext {
                name: context.to_string(),
                context: Some(Context {
                    cluster: context.to_string(),
                    user: Some(context.to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            current_context: Some(context.to_string()),
            ..Default::default()
        };
        Ok(Resolved {
            kubeconfig,
            policy: ExecPolicy::AllowCommands(vec![provider.exec_config.command.clone()]),
        })
    }
}

/// A fresh exec config from the file's entry, with the profile's extensions applied under the
/// provider's policies. The file's entry is never modified, so nothing piles up across calls.
fn exec_config(
    provider: &ProviderConfig,
    args_ext: Option<&serde_json::Value>,
    envs_ext: Option<&serde_json::Value>,
) -> Result<ExecConfig, String> {
    let spec = &provider.exec_config;
    let mut args = spec.args.clone().unwrap_or_default();
    if let (ArgsPolicy::Append, Some(ext)) = (provider.profile_sourced_cli_args_policy, args_ext) {
        let extra: Vec<String> = serde_json::from_value(ext.clone()).map_err(|_| {
            format!("extension {ADDITIONAL_ARGS_EXTENSION} is not a list of strings")
        })?;
        args.extend(extra);
    }
    let mut env: Vec<(String, String)> = spec
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    let policy = provider.profile_sourced_env_vars_policy;
    if let (EnvPolicy::AppendIfNotExists | EnvPolicy::Replace, Some(ext)) = (policy, envs_ext) {
        let extra: std::collections::BTreeMap<String, String> = serde_json::from_value(ext.clone())
            .map_err(|_| {
                format!("extension {ADDITIONAL_ENVS_EXTENSION} is not a map of strings")
            })?;
        for (name, value) in extra {
            if !profile_may_set(&name) {
                return Err(format!(
                    "extension {ADDITIONAL_ENVS_EXTENSION} may not set {name} (it changes which code the plugin runs)"
                ));
            }
            match env.iter_mut().find(|(n, _)| *n == name) {
                Some(existing) if policy == EnvPolicy::Replace => existing.1 = value,
                Some(_) => {}
                None => env.push((name, value)),
            }
        }
    }
    Ok(ExecConfig {
        api_version: Some(spec.api_version.clone()),
        command: Some(spec.command.clone()),
        args: Some(args),
        env: Some(
            env.into_iter()
                .map(|(name, value)| {
                    HashMap::from([("name".to_string(), name), ("value".to_string(), value)])
                })
                .collect(),
        ),
        install_hint: spec.install_hint.clone(),
        interactive_mode: Some(ExecInteractiveMode::Never),
        provide_cluster_info: spec.provide_cluster_info,
        ..Default::default()
    })
}

/// Whether a profile may set this variable for the plugin: never the ones that change which
/// program or libraries run (`PATH`, `LD_*`, `DYLD_*`) or the exec info kube passes.
fn profile_may_set(name: &str) -> bool {
    !(name.is_empty()
        || name == "PATH"
        || name == "KUBERNETES_EXEC_INFO"
        || name.starts_with("LD_")
        || name.starts_with("DYLD_"))
}

#[cfg(test)]
mod tests;
