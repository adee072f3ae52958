//! Why a member could not be ensured: [`Error`] and [`ProbeError`].

use std::time::Duration;

use crate::{ClusterName, kubeconfig};

/// Why the first request to a new member (`GET /version`) failed. Each message says what
/// failed and what to check; the member's [`Error`] adds its name.
///
/// ```
/// use std::time::Duration;
/// let err = mcr_core::members::ProbeError::Timeout(Duration::from_secs(5));
/// assert_eq!(
///     err.to_string(),
///     "API server unreachable: no answer to GET /version within the probe timeout (5s)"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The request failed. Its source is a kube error: show it through
    /// [`ErrorChain`](crate::ErrorChain), which redacts credential errors in the chain.
    #[error("API server unreachable: GET /version failed")]
    Request(#[source] kube::Error),
    /// Obtaining the request's credentials failed (a credential command's error). Its command
    /// line and output may hold credential material, so only a redacted description
    /// ([`redact_kube_error`](crate::kubeconfig::redact_kube_error)) is kept.
    #[error("GET /version failed: {0}")]
    Credentials(String),
    /// The API server answered, refusing the request: with 401 it rejected the credentials.
    #[error("{}", rejected(*.code, .reason, .message))]
    Rejected {
        /// The HTTP status code.
        code: u16,
        /// The Status reason (`Unauthorized`, `Forbidden`, ...).
        reason: String,
        /// The Status message.
        message: String,
    },
    /// Connecting (TCP connect and TLS handshake) took longer than the client's connect
    /// timeout ([`ClientOptions::connect_timeout`](crate::kubeconfig::ClientOptions::connect_timeout)).
    #[error(
        "API server unreachable: connecting (TCP and TLS handshake) did not finish within the \
         connect timeout ({0:?}): check the server address and that an API server answers there"
    )]
    ConnectTimeout(Duration),
    /// No answer within the probe timeout
    /// ([`MembersOptions::probe_timeout`](super::MembersOptions::probe_timeout)).
    #[error("API server unreachable: no answer to GET /version within the probe timeout ({0:?})")]
    Timeout(Duration),
}

fn rejected(code: u16, reason: &str, message: &str) -> String {
    let status = if reason.is_empty() {
        code.to_string()
    } else {
        format!("{code} {reason}")
    };
    match code {
        401 => format!(
            "the API server rejected the credentials (GET /version: {status}): check the \
             user's token or client certificate"
        ),
        403 => format!(
            "the API server refused the user (GET /version: {status}): check the user's \
             permissions"
        ),
        _ if message.is_empty() || message == reason => {
            format!("the API server answered GET /version with {status}")
        }
        _ => format!("the API server answered GET /version with {status}: {message}"),
    }
}

impl ProbeError {
    /// The probe's error for `err`, a failed `GET /version` of a client whose connect
    /// timeout is `connect_timeout`.
    pub(crate) fn from_kube(err: kube::Error, connect_timeout: Duration) -> ProbeError {
        match err {
            // Redacted at once: a credential refresh's error carries the command line and
            // output.
            err @ kube::Error::Auth(_) => {
                ProbeError::Credentials(kubeconfig::redact_kube_error(&err))
            }
            kube::Error::Api(status) => ProbeError::Rejected {
                code: status.code,
                reason: status.reason,
                message: status.message,
            },
            err if connect_timed_out(&err) => ProbeError::ConnectTimeout(connect_timeout),
            err => ProbeError::Request(err),
        }
    }
}

/// Whether `err` is a connection attempt that ran out of time (the connector's timeout wraps
/// the TCP connect and the TLS handshake).
fn connect_timed_out(err: &(dyn std::error::Error + 'static)) -> bool {
    let (mut connect, mut timed_out) = (false, false);
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<hyper_util::client::legacy::Error>() {
            connect |= e.is_connect();
        }
        if let Some(e) = e.downcast_ref::<std::io::Error>() {
            timed_out |= e.kind() == std::io::ErrorKind::TimedOut;
        }
        timed_out |= e.is::<tokio::time::error::Elapsed>();
        next = e.source();
    }
    connect && timed_out
}

/// Why the [`Engagements`](crate::Engagements) table could not reach a member: its source
/// did not yield a working client.
///
/// Every message names the cluster and never contains kubeconfig contents or credentials.
/// [`is_retryable`](Error::is_retryable) tells the policy denials (which only a new kubeconfig
/// can fix) from everything else.
///
/// ```
/// use mcr_core::members::Error;
/// let err = Error::BuildTimeout { cluster: "east".into(), after: std::time::Duration::from_secs(3) };
/// assert_eq!(err.to_string(), "cluster \"east\": building the client did not finish within 3s");
/// assert!(err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig does not yield a usable client (missing context, bad CA, failed plugin).
    #[error("cluster \"{cluster}\": {source}")]
    Kubeconfig {
        /// The cluster.
        cluster: ClusterName,
        /// What is wrong with the kubeconfig.
        #[source]
        source: kubeconfig::Error,
    },
    /// The member's [`Policy`](kubeconfig::Policy) refused the kubeconfig (an exec plugin,
    /// auth-provider, file reference or proxy: [`kubeconfig::Error::is_policy_denial`]). Not
    /// retried until the source changes.
    #[error("cluster \"{cluster}\": refused by policy: {source}")]
    PolicyDenied {
        /// The cluster.
        cluster: ClusterName,
        /// The violated rule.
        #[source]
        source: kubeconfig::Error,
    },
    /// Building the client (an exec plugin, typically) took longer than
    /// [`MembersOptions::build_timeout`](super::MembersOptions::build_timeout).
    #[error("cluster \"{cluster}\": building the client did not finish within {after:?}")]
    BuildTimeout {
        /// The cluster.
        cluster: ClusterName,
        /// The timeout.
        after: Duration,
    },
    /// The first request to the member (`GET /version`) failed: the server could not be
    /// reached, did not answer in time, or refused the request (the source says which).
    #[error("cluster \"{cluster}\"")]
    Unreachable {
        /// The cluster.
        cluster: ClusterName,
        /// The request's error, or the timeout.
        #[source]
        source: ProbeError,
    },
    /// A [`Connect`](crate::Connect) source could not give a connection (a credentials
    /// request refused, a tool that failed).
    #[error("cluster \"{cluster}\": could not get a connection")]
    Connect {
        /// The cluster.
        cluster: ClusterName,
        /// What the source answered.
        #[source]
        source: crate::BoxError,
        /// Whether the source said trying again can help
        /// ([`Connect::is_retryable`](crate::Connect::is_retryable)).
        retryable: bool,
    },
}

impl Error {
    /// Whether retrying (with backoff) can help without a new kubeconfig: everything but
    /// [`Error::PolicyDenied`] and the failures a [`Connect`](crate::Connect) source calls
    /// permanent.
    ///
    /// ```
    /// use mcr_core::members::Error;
    /// let denied = Error::PolicyDenied {
    ///     cluster: "a".into(),
    ///     source: mcr_core::kubeconfig::Error::AuthProviderNotAllowed { context: "c".into(), provider: "gcp".into() },
    /// };
    /// assert!(!denied.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::PolicyDenied { .. } => false,
            Error::Connect { retryable, .. } => *retryable,
            _ => true,
        }
    }

    /// The cluster the error is about.
    ///
    /// ```
    /// let err = mcr_core::members::Error::BuildTimeout { cluster: "a".into(), after: Default::default() };
    /// assert_eq!(err.cluster().as_str(), "a");
    /// ```
    pub fn cluster(&self) -> &ClusterName {
        match self {
            Error::Kubeconfig { cluster, .. }
            | Error::PolicyDenied { cluster, .. }
            | Error::BuildTimeout { cluster, .. }
            | Error::Unreachable { cluster, .. }
            | Error::Connect { cluster, .. } => cluster,
        }
    }
}
