//! The access-provider strategy (KEP-5339): the operator's provider file, and turning a
//! ClusterProfile's `accessProviders` entry into a kubeconfig whose only command is the one the
//! file configures.

use std::collections::HashMap;

use crate::ClusterProfile;
use kube::config::{
    AuthInfo, Context, ExecConfig, ExecInteractiveMode, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext, NamedExtension,
};
use mcr_core::kubeconfig::{ExecPolicy, ExecRule, Policy};

mod file;

use file::Servers;
pub use file::{AccessProviders, ArgsPolicy, EnvPolicy, EnvVar, ExecSpec, ProviderConfig};

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

/// A profile's access resolved against the provider file.
#[derive(Clone)]
pub(crate) struct Resolved {
    /// A one-context kubeconfig: the profile's server, CA and proxy, the file's plugin.
    pub(crate) kubeconfig: Kubeconfig,
    /// Allows exactly the file's command with the resolved arguments and environment
    /// variables, for the servers the operator allowed; no local files; the profile's proxy
    /// only when the operator allowed it.
    pub(crate) policy: Policy,
}

/// The policy only: the kubeconfig's exec environment values may be secrets.
impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl AccessProviders {
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
        if self.servers == Servers::Unset {
            return Err(
                "no API server is allowed for access providers: list the servers the plugin's \
                 credential may go to with AccessProviders::servers (host patterns), or allow \
                 any with AccessProviders::any_server"
                    .to_string(),
            );
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
            &self.profile_env,
        )?;
        // Exactly the resolved stanza: the file's command, these arguments and variables, the
        // operator's servers. The plugin keeps the controller's environment, as the
        // operator's own plugins always did.
        let rule = ExecRule::command(provider.exec_config.command.clone())
            .args(exec.args.clone().unwrap_or_default())
            .kubeconfig_env(
                exec.env
                    .iter()
                    .flatten()
                    .filter_map(|v| v.get("name").cloned()),
            )
            .inherit_env();
        let rule = match &self.servers {
            Servers::Hosts(hosts) => rule.servers(hosts.iter().cloned()),
            // `Unset` was refused above.
            Servers::Any | Servers::Unset => rule.any_server(),
        };
        let policy = Policy::default()
            .exec(ExecPolicy::allow(rule))
            .allow_kubeconfig_proxy(self.allow_profile_proxy);
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
        Ok(Resolved { kubeconfig, policy })
    }
}

/// A fresh exec config from the file's entry, with the profile's extensions applied under the
/// provider's policies. The file's entry is never modified, so nothing piles up across calls.
fn exec_config(
    provider: &ProviderConfig,
    args_ext: Option<&serde_json::Value>,
    envs_ext: Option<&serde_json::Value>,
    profile_env: &[String],
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
            if !profile_env.contains(&name) {
                return Err(format!(
                    "extension {ADDITIONAL_ENVS_EXTENSION} may not set {name}: profiles may set \
                     only the variables listed with AccessProviders::profile_env ({profile_env:?})"
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

#[cfg(test)]
mod tests;
