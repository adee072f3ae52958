//! Running `exec` credential plugins ourselves, bounded in time and output.
//!
//! kube runs a kubeconfig's exec plugin with a blocking `std::process::Command`, with no
//! timeout, while the client is built and again whenever the token expires. One plugin that
//! never exits would then hold a provider's pass, a worker or shutdown forever. Instead, mcr
//! runs the plugin here (async, killed when dropped or when the timeout elapses, output never
//! logged), and hands kube a configuration holding the static credential the plugin returned.

use std::process::Stdio;
use std::time::{Duration, SystemTime};

use base64::Engine;
use kube::config::{AuthInfo, ExecConfig, ExecInteractiveMode};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use super::exec_rule::ExecEnv;
use super::exec_rule::basename;

/// How long a plugin may run when [`ClientOptions::exec_timeout`](super::ClientOptions::exec_timeout)
/// is unset.
pub(crate) const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);

/// Most bytes of output read from a plugin (a credential is a few kilobytes).
const MAX_OUTPUT: u64 = 1024 * 1024;

/// What a plugin run produced.
pub(crate) struct Credential {
    /// When the credential expires, if the plugin said so.
    pub(crate) expires_at: Option<SystemTime>,
}

/// The `KUBERNETES_EXEC_INFO` handed to the plugin.
#[derive(Serialize)]
struct ExecInfo<'a> {
    #[serde(rename = "apiVersion", skip_serializing_if = "Option::is_none")]
    api_version: Option<&'a str>,
    kind: &'static str,
    spec: ExecInfoSpec<'a>,
}

#[derive(Serialize)]
struct ExecInfoSpec<'a> {
    interactive: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<&'a kube::config::ExecAuthCluster>,
}

/// The part of the plugin's `ExecCredential` we use.
#[derive(Deserialize)]
struct ExecCredential {
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    expiration_timestamp: Option<String>,
    token: Option<String>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
}

/// Runs the plugin of `auth` (if any), replaces the `exec` stanza with the credential it
/// returned, and tells when that credential expires. Errors name the command's basename and
/// the reason, never arguments, environment or output.
pub(crate) async fn resolve_exec(
    auth: &mut AuthInfo,
    timeout: Duration,
    env: &ExecEnv,
) -> Result<Option<Credential>, String> {
    let Some(exec) = auth.exec.take() else {
        return Ok(None);
    };
    let command = exec.command.as_deref().unwrap_or("");
    if command.is_empty() {
        return Err("the exec stanza has no command".to_string());
    }
    let plugin = basename(command).to_string();
    let stdout = match tokio::time::timeout(timeout, run(&exec, env)).await {
        Ok(out) => out.map_err(|reason| format!("exec plugin {plugin:?} {reason}"))?,
        Err(_) => {
            return Err(format!(
                "exec plugin {plugin:?} did not finish within {timeout:?} (killed)"
            ));
        }
    };
    let credential: ExecCredential = serde_saphyr::from_slice(&stdout)
        .map_err(|_| format!("exec plugin {plugin:?} printed no valid ExecCredential"))?;
    let status = credential.status.ok_or_else(|| {
        format!("exec plugin {plugin:?} returned an ExecCredential without status")
    })?;
    let expires_at = match status.expiration_timestamp.as_deref() {
        None | Some("") => None,
        Some(ts) => Some(
            ts.parse::<jiff::Timestamp>()
                .map(SystemTime::from)
                .map_err(|_| {
                    format!("exec plugin {plugin:?} returned a malformed expirationTimestamp")
                })?,
        ),
    };
    let engine = base64::engine::general_purpose::STANDARD;
    match (
        status.client_certificate_data,
        status.client_key_data,
        status.token,
    ) {
        (Some(cert), Some(key), _) if !cert.is_empty() && !key.is_empty() => {
            auth.client_certificate = None;
            auth.client_key = None;
            auth.client_certificate_data = Some(engine.encode(cert));
            auth.client_key_data = Some(engine.encode(key).into());
        }
        (_, _, Some(token)) if !token.is_empty() => {
            if http::HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
                return Err(format!(
                    "exec plugin {plugin:?} returned a token that is not a valid header value"
                ));
            }
            auth.token_file = None;
            auth.token = Some(token.into());
        }
        _ => {
            return Err(format!(
                "exec plugin {plugin:?} returned neither a token nor a client certificate and key"
            ));
        }
    }
    Ok(Some(Credential { expires_at }))
}

/// Runs the plugin (killed if this future is dropped) and returns its standard output. Under
/// [`ExecEnv::Clean`] the plugin sees only the listed variables of the controller's
/// environment, the kubeconfig's `env` (checked by the policy) and `KUBERNETES_EXEC_INFO`.
async fn run(exec: &ExecConfig, env: &ExecEnv) -> Result<Vec<u8>, String> {
    if exec.interactive_mode == Some(ExecInteractiveMode::Always) {
        return Err("needs an interactive terminal (interactiveMode: Always)".to_string());
    }
    let info = ExecInfo {
        api_version: exec.api_version.as_deref(),
        kind: "ExecCredential",
        spec: ExecInfoSpec {
            interactive: false,
            cluster: if exec.provide_cluster_info {
                Some(
                    exec.cluster
                        .as_ref()
                        .ok_or("asks for cluster info that is not available")?,
                )
            } else {
                None
            },
        },
    };
    let info = serde_json::to_string(&info).map_err(|_| "cannot encode KUBERNETES_EXEC_INFO")?;
    let mut cmd = tokio::process::Command::new(exec.command.as_deref().unwrap_or_default());
    cmd.args(exec.args.iter().flatten());
    if let ExecEnv::Clean(pass) = env {
        cmd.env_clear();
        for name in pass {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
    }
    for var in exec.env.iter().flatten() {
        if let (Some(name), Some(value)) = (var.get("name"), var.get("value")) {
            cmd.env(name, value);
        }
    }
    cmd.env("KUBERNETES_EXEC_INFO", info);
    for name in exec.drop_env.iter().flatten() {
        cmd.env_remove(name);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not be started: {}", e.kind()))?;
    let mut stdout = Vec::new();
    if let Some(out) = child.stdout.take() {
        out.take(MAX_OUTPUT + 1)
            .read_to_end(&mut stdout)
            .await
            .map_err(|e| format!("output could not be read: {}", e.kind()))?;
    }
    if stdout.len() as u64 > MAX_OUTPUT {
        return Err(format!("printed more than {MAX_OUTPUT} bytes"));
    }
    let status = child
        .wait()
        .await
        .map_err(|e| format!("could not be waited for: {}", e.kind()))?;
    if !status.success() {
        return Err(format!("failed with {status}"));
    }
    Ok(stdout)
}
