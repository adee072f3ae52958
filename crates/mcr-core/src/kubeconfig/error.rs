//! The error type of the kubeconfig helpers.

use std::path::PathBuf;

/// Errors from parsing a kubeconfig, checking its exec policy or building a client from it.
///
/// Messages name the context, cluster, user or command basename and the reason; they never
/// contain credential material (tokens, passwords, keys, certificates, exec output) or the
/// kubeconfig text itself, so they are safe to log and to put in status conditions.
///
/// ```
/// let err = mcr_core::kubeconfig::parse(b"  \n").unwrap_err();
/// assert!(matches!(err, mcr_core::kubeconfig::Error::Empty));
/// assert_eq!(err.to_string(), "kubeconfig is empty");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig has no content (empty, whitespace or comments only, or no entries at all).
    #[error("kubeconfig is empty")]
    Empty,

    /// The kubeconfig is not valid YAML or does not have the shape of a kubeconfig.
    #[error("invalid kubeconfig: {reason}")]
    Parse {
        /// What is wrong and where (line and column), without any of the content.
        reason: String,
    },

    /// A kubeconfig file could not be read.
    #[error("failed to read kubeconfig {path:?}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },

    /// No context was requested and the kubeconfig has no `current-context`.
    #[error("no context requested and the kubeconfig has no current-context")]
    NoContext,

    /// The requested (or current) context does not exist in the kubeconfig.
    #[error("context {context:?} not found in kubeconfig")]
    ContextNotFound {
        /// The context name.
        context: String,
    },

    /// The cluster entry the context refers to does not exist.
    #[error("cluster {cluster:?} of context {context:?} not found in kubeconfig")]
    ClusterNotFound {
        /// The context name.
        context: String,
        /// The missing cluster entry.
        cluster: String,
    },

    /// The context's user has an `exec` credential plugin that the [`ExecPolicy`](super::ExecPolicy)
    /// does not allow.
    #[error(
        "context {context:?}: exec credential plugin {command:?} is not allowed by the exec policy: {reason}"
    )]
    ExecNotAllowed {
        /// The context name.
        context: String,
        /// The basename of the command (never its arguments or environment).
        command: String,
        /// What the policy refuses (the command, an argument's position, the server's host,
        /// an environment variable's name; never argument or environment values).
        reason: String,
    },

    /// The context's user has an `auth-provider` stanza, which only
    /// [`ExecPolicy::AllowAll`](super::ExecPolicy::AllowAll) allows.
    #[error("context {context:?}: auth-provider {provider:?} is not allowed by the exec policy")]
    AuthProviderNotAllowed {
        /// The context name.
        context: String,
        /// The auth-provider name (e.g. `gcp`, `oidc`).
        provider: String,
    },

    /// The context's user has an `auth-provider` that obtains its token by running a command
    /// (`cmd-path`). mcr never runs one, whatever the policy: kube would run it on a blocking
    /// thread that no timeout can stop, again at request time while holding its token lock.
    /// client-go dropped these providers in Kubernetes 1.26 for exec plugins.
    #[error(
        "context {context:?}: auth-provider {provider:?} needs a command (cmd-path), which mcr does \
         not run: use an exec credential plugin instead (for GKE: gke-gcloud-auth-plugin)"
    )]
    AuthProviderCommand {
        /// The context name.
        context: String,
        /// The auth-provider name (e.g. `gcp`).
        provider: String,
    },

    /// The context reads a local file (`tokenFile`, `client-key`, ...) although the
    /// [`Policy`](super::Policy) does not allow file references.
    #[error("context {context:?}: {field} refers to a local file, which is not allowed here")]
    FileReferenceNotAllowed {
        /// The context name.
        context: String,
        /// The kubeconfig field (never its value).
        field: String,
    },

    /// The context's cluster names a `proxy-url` although the [`Policy`](super::Policy) does
    /// not allow kubeconfig proxies.
    #[error("context {context:?}: the cluster's proxy-url is not allowed here")]
    ProxyNotAllowed {
        /// The context name.
        context: String,
    },

    /// The context's entries do not make a usable client configuration (missing server URL,
    /// undecodable certificate authority, invalid client option, ...).
    #[error("context {context:?}: invalid client configuration: {reason}")]
    InvalidConfig {
        /// The context name.
        context: String,
        /// Why.
        reason: String,
    },

    /// Building the client failed (TLS setup, credentials, exec plugin run).
    #[error("context {context:?}: failed to build client: {reason}")]
    Client {
        /// The context name.
        context: String,
        /// Why.
        reason: String,
    },
}

impl Error {
    /// Whether the kubeconfig was refused by the [`Policy`](super::Policy) rather than found
    /// broken: an `exec` plugin (its command, arguments, server or environment) or
    /// `auth-provider` the [`ExecPolicy`](super::ExecPolicy) refuses, an `auth-provider` command
    /// (never run), a local file reference or
    /// a `proxy-url` the policy does not allow. Providers do not retry such a kubeconfig until
    /// it changes.
    ///
    /// ```
    /// use mcr_core::kubeconfig::Error;
    /// let denied = Error::FileReferenceNotAllowed { context: "c".into(), field: "tokenFile".into() };
    /// assert!(denied.is_policy_denial());
    /// assert!(Error::ProxyNotAllowed { context: "c".into() }.is_policy_denial());
    /// assert!(!Error::Empty.is_policy_denial());
    /// ```
    pub fn is_policy_denial(&self) -> bool {
        matches!(
            self,
            Error::ExecNotAllowed { .. }
                | Error::AuthProviderNotAllowed { .. }
                | Error::AuthProviderCommand { .. }
                | Error::FileReferenceNotAllowed { .. }
                | Error::ProxyNotAllowed { .. }
        )
    }
}

impl From<Error> for crate::Error {
    fn from(err: Error) -> Self {
        crate::Error::Kubeconfig(Box::new(err))
    }
}
