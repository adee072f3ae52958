//! Errors of the kind provider.

use std::path::PathBuf;
use std::time::Duration;

/// Where to get kind, for the "not installed" message.
pub const INSTALL_HINT: &str = "install kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation, \
     e.g. `go install sigs.k8s.io/kind@latest`) or set Options::kind_bin to its path";

/// Why a run of `kind` gave nothing usable: the provider could not list the clusters (at start,
/// [`Error::NotInstalled`] ends the provider; later ones are retried), or one cluster's
/// kubeconfig could not be had (the member's failure, retried by the
/// [`Engagements`](mcr_core::Engagements) table with its backoff).
///
/// Messages name the command (and so the cluster) and the reason. They never contain what
/// `kind get kubeconfig` printed (a credential) or the kubeconfig's contents.
///
/// ```
/// use mcr_provider_kind::Error;
/// let err = Error::Timeout { command: "get clusters".into(), timeout: std::time::Duration::from_secs(30) };
/// assert_eq!(err.to_string(), "`kind get clusters` did not finish within 30s and was killed");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `kind` executable does not exist (at that path, or on `PATH` for a bare name).
    #[error("{}", not_installed(bin, path_var))]
    NotInstalled {
        /// The configured executable.
        bin: PathBuf,
        /// The `PATH` it was looked up on.
        path_var: String,
    },
    /// The executable exists but could not be started (permissions, not a program, ...).
    #[error("cannot run the kind binary {bin:?}")]
    Spawn {
        /// The configured executable.
        bin: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A run of `kind` took longer than [`Options::command_timeout`](crate::Options::command_timeout).
    #[error("`kind {command}` did not finish within {timeout:?} and was killed")]
    Timeout {
        /// The arguments, e.g. `get clusters`.
        command: String,
        /// The limit.
        timeout: Duration,
    },
    /// `kind` exited with an error (for instance when Docker is not running).
    #[error("`kind {command}` failed ({status}): {stderr}")]
    Failed {
        /// The arguments.
        command: String,
        /// The exit status.
        status: String,
        /// The last line kind printed on stderr, shortened.
        stderr: String,
    },
    /// `kind` printed something that cannot be used.
    #[error("`kind {command}`: {reason}")]
    Output {
        /// The arguments.
        command: String,
        /// What is wrong with it.
        reason: String,
    },
    /// What `kind get kubeconfig` printed is not a usable kubeconfig.
    #[error("`kind {command}` printed no usable kubeconfig")]
    Kubeconfig {
        /// The arguments, e.g. `get kubeconfig --name fleet-a`.
        command: String,
        /// What is wrong with it (never its contents).
        #[source]
        source: mcr_core::kubeconfig::Error,
    },
}

fn not_installed(bin: &std::path::Path, path_var: &str) -> String {
    let bare = bin.components().count() == 1 && !bin.is_absolute();
    if bare {
        format!(
            "the kind binary {bin:?} was not found on PATH ({path_var}): {INSTALL_HINT}",
            path_var = if path_var.is_empty() {
                "PATH is empty"
            } else {
                path_var
            }
        )
    } else {
        format!("the kind binary {bin:?} does not exist: {INSTALL_HINT}")
    }
}

impl From<Error> for mcr_core::Error {
    /// A provider-level failure (the `kind` binary missing at start), as the manager reports it.
    fn from(err: Error) -> Self {
        mcr_core::Error::Provider {
            provider: "kind".to_string(),
            source: Box::new(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_installed_names_the_binary_and_path() {
        let err = Error::NotInstalled {
            bin: "kind".into(),
            path_var: "/usr/bin:/bin".into(),
        };
        let msg = err.to_string();
        assert!(
            msg.contains("\"kind\" was not found on PATH (/usr/bin:/bin)"),
            "{msg}"
        );
        assert!(msg.contains("https://kind.sigs.k8s.io"), "{msg}");
        let err = Error::NotInstalled {
            bin: "/opt/kind/bin/kind".into(),
            path_var: String::new(),
        };
        assert!(
            err.to_string()
                .starts_with("the kind binary \"/opt/kind/bin/kind\" does not exist: install kind")
        );
    }
}
