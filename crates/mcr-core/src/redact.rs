//! Turning kube and YAML errors into messages without credential material.
//!
//! kube's own errors are not safe to log for untrusted kubeconfigs: YAML errors render a
//! snippet of the input and serde's "invalid type" errors quote the offending value; a failed
//! exec plugin's error carries its stdout and stderr; base64 errors name the offending byte.
//! Every message built here is assembled from names, positions and static descriptions only.

use kube::client::AuthError;
use kube::config::{KubeconfigError, LoadDataError};

/// A content-free description of a YAML deserialization error.
pub(crate) fn yaml_error(err: &serde_saphyr::Error) -> String {
    use serde_saphyr::Error as E;
    let err = err.without_snippet();
    let what = match err {
        E::SerdeInvalidType { expected, .. } => format!("invalid type, expected {expected}"),
        E::SerdeInvalidValue { expected, .. } => format!("invalid value, expected {expected}"),
        E::SerdeInvalidLength { len, expected, .. } => {
            format!("invalid length {len}, expected {expected}")
        }
        E::SerdeMissingField { field, .. } => format!("missing field `{field}`"),
        E::SerdeUnknownVariant { expected, .. } => {
            format!("unknown variant, expected one of {expected:?}")
        }
        E::Unexpected { expected, .. } => format!("unexpected YAML, expected {expected}"),
        E::Eof { .. } => "unexpected end of input".to_string(),
        E::DuplicateMappingKey { .. } => "duplicate mapping key".to_string(),
        _ => "malformed YAML".to_string(),
    };
    match err.location() {
        Some(loc) if loc.line() > 0 => {
            format!("{what} at line {} column {}", loc.line(), loc.column())
        }
        _ => what,
    }
}

/// A content-free description of a kube kubeconfig error.
pub(crate) fn kubeconfig_error(err: &KubeconfigError) -> String {
    use KubeconfigError as K;
    match err {
        K::Parse(e) => yaml_error(e),
        K::ReadConfig(io, path) => format!("failed to read {path:?}: {io}"),
        K::LoadContext(name) => format!("context {name:?} not found"),
        K::LoadClusterOfContext(name) => format!("cluster {name:?} not found"),
        K::MissingClusterUrl => "the cluster has no server URL".to_string(),
        K::ParseClusterUrl(_) => "the cluster's server URL is not a valid URI".to_string(),
        K::ParseProxyUrl(_) => "the cluster's proxy-url is not a valid URI".to_string(),
        K::LoadCertificateAuthority(e) => load_data("certificate-authority", e),
        K::LoadClientCertificate(e) => load_data("client-certificate", e),
        K::LoadClientKey(e) => load_data("client-key", e),
        K::ParseCertificates(_) => "certificate data is not valid PEM".to_string(),
        // The remaining variants carry no data (current context unset, merge mismatches, ...).
        other => other.to_string(),
    }
}

fn load_data(field: &str, err: &LoadDataError) -> String {
    match err {
        LoadDataError::DecodeBase64(_) => format!("{field}-data is not valid base64"),
        LoadDataError::ReadFile(io, path) => format!("failed to read {field} {path:?}: {io}"),
        LoadDataError::NoBase64DataOrFile => format!("{field}: neither data nor file given"),
    }
}

/// A content-free description of an error from `Client::try_from(Config)`.
/// `command` is the basename of the exec plugin, if the user has one.
pub(crate) fn client_error(err: &kube::Error, command: Option<&str>) -> String {
    let plugin = command.unwrap_or("<none>");
    match err {
        kube::Error::Auth(auth) => match auth {
            AuthError::AuthExecStart(io) => {
                format!("exec plugin {plugin:?} could not be started: {}", io.kind())
            }
            AuthError::AuthExecRun { out, .. } => {
                format!("exec plugin {plugin:?} failed with {}", out.status)
            }
            AuthError::AuthExecParse(_) | AuthError::ParseTokenKey(_) => {
                format!("exec plugin {plugin:?} printed no valid ExecCredential")
            }
            AuthError::ExecPluginFailed => {
                format!("exec plugin {plugin:?} returned an ExecCredential without status")
            }
            AuthError::MalformedTokenExpirationDate(_) => {
                format!("exec plugin {plugin:?} returned a malformed expirationTimestamp")
            }
            AuthError::MissingCommand => "the exec stanza has no command".to_string(),
            AuthError::ExecMissingClusterInfo => {
                "the exec stanza asks for cluster info that is not available".to_string()
            }
            AuthError::InvalidBearerToken(_) => {
                "the bearer token is not a valid header value".to_string()
            }
            AuthError::InvalidBasicAuth(_) => {
                "the basic-auth credentials are not a valid header value".to_string()
            }
            AuthError::ReadTokenFile(io, path) => {
                format!("failed to read token file {path:?}: {io}")
            }
            AuthError::AuthExec(_) => "the auth-provider command failed".to_string(),
            _ => "authentication setup failed".to_string(),
        },
        kube::Error::InferKubeconfig(e) => kubeconfig_error(e),
        kube::Error::HttpError(_) => {
            "a header value (impersonation, user agent) is not valid".to_string()
        }
        kube::Error::RustlsTls(_) => {
            "TLS setup failed (invalid certificate authority, client certificate or key)"
                .to_string()
        }
        kube::Error::TlsRequired => "TLS required but no TLS stack selected".to_string(),
        kube::Error::ProxyProtocolUnsupported { .. } => {
            "the proxy URL uses an unsupported protocol".to_string()
        }
        kube::Error::ProxyProtocolDisabled {
            protocol_feature, ..
        } => format!(
            "the proxy needs the Cargo feature `{protocol_feature}`, which this build does not enable"
        ),
        _ => "unexpected error while building the client".to_string(),
    }
}

/// A description of a kube error from a member request, safe to log and to store in a status.
///
/// A client built from a kubeconfig may still run a command when its credential is refreshed
/// (a legacy `auth-provider`), and kube's errors for that carry the command line, its
/// arguments and its output (where plugins print tokens). This keeps the error's kind and
/// chain but replaces every authentication error by a description without them. mcr's own
/// logs and statuses go through it ([`ErrorChain`](crate::ErrorChain) applies it to every
/// kube error in a chain); use it when logging a member's request errors yourself.
///
/// ```
/// use kube::client::AuthError;
/// let err = kube::Error::Auth(AuthError::AuthExec("token=hunter2".into()));
/// let safe = mcr_core::kubeconfig::redact_kube_error(&err);
/// assert!(!safe.contains("hunter2"));
/// assert_eq!(safe, "authentication failed: the credential command failed");
/// ```
pub fn redact_kube_error(err: &kube::Error) -> String {
    match err {
        kube::Error::Auth(auth) => format!("authentication failed: {}", auth_error(auth)),
        kube::Error::Service(inner) => match redact_dyn(inner.as_ref()) {
            Some(safe) => safe,
            None => chain(err),
        },
        kube::Error::InferKubeconfig(e) => kubeconfig_error(e),
        kube::Error::Api(status) => api_status(status),
        _ => chain(err),
    }
}

/// An API server's answer: its code, reason and message (kube's own message adds a `Debug`
/// dump of the whole Status).
fn api_status(status: &kube::core::Status) -> String {
    let mut out = format!("the API server answered {}", status.code);
    if !status.reason.is_empty() {
        out.push(' ');
        out.push_str(&status.reason);
    }
    if !status.message.is_empty() && status.message != status.reason {
        out.push_str(": ");
        out.push_str(&status.message);
    }
    out
}

/// [`redact_kube_error`] for an informer's watch error.
fn redact_watcher_error(err: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error as W;
    match err {
        W::InitialListFailed(e) => format!(
            "failed to perform initial object list: {}",
            redact_kube_error(e)
        ),
        W::WatchStartFailed(e) => {
            format!("failed to start watching object: {}", redact_kube_error(e))
        }
        W::WatchFailed(e) => format!("watch stream failed: {}", redact_kube_error(e)),
        other => chain(other),
    }
}

/// A safe description of `err` when it is a kube, watcher or authentication error (whose
/// messages can carry credential commands and their output), `None` for other errors.
pub(crate) fn redact_dyn(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    if let Some(e) = err.downcast_ref::<kube::Error>() {
        Some(redact_kube_error(e))
    } else if let Some(e) = err.downcast_ref::<kube::runtime::watcher::Error>() {
        Some(redact_watcher_error(e))
    } else {
        err.downcast_ref::<AuthError>()
            .map(|e| format!("authentication failed: {}", auth_error(e)))
    }
}

/// An error and its sources, `": "`-separated (sources that are kube or authentication errors
/// redacted), each message once.
fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut next = err.source();
    while let Some(e) = next {
        if let Some(safe) = redact_dyn(e) {
            push_message(&mut out, &safe);
            break;
        }
        push_message(&mut out, &message(e));
        next = e.source();
    }
    out
}

/// The message of `err` (not a kube, watcher or authentication error itself), with the first
/// such error of its sources summarised and redacted where the message shows it (an error
/// type whose message is `"...: {0}"` over a kube error would otherwise show kube's text: an
/// API server's whole `Status`, or a credential command's output).
pub(crate) fn message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(e) = next {
        if let Some(safe) = redact_dyn(e) {
            for shown in [e.to_string(), format!("{e:?}")] {
                if !shown.is_empty() && text.contains(&shown) {
                    text = text.replace(&shown, &safe);
                }
            }
            break;
        }
        next = e.source();
    }
    text
}

/// Appends `message` to a `": "`-separated chain, unless the chain already ends with it (an
/// error whose own message shows its source, as kube's and many others do).
pub(crate) fn push_message(out: &mut String, message: &str) {
    if out.is_empty() {
        out.push_str(message);
    } else if !out.ends_with(message) {
        out.push_str(": ");
        out.push_str(message);
    }
}

/// A content-free description of an authentication error at request time (a token refresh).
fn auth_error(err: &AuthError) -> String {
    match err {
        AuthError::AuthExecStart(io) => {
            format!("the credential command could not be started: {}", io.kind())
        }
        AuthError::AuthExecRun { out, .. } => {
            format!("the credential command failed with {}", out.status)
        }
        AuthError::AuthExecParse(_) | AuthError::ParseTokenKey(_) => {
            "the credential command printed no valid credential".to_string()
        }
        AuthError::AuthExec(_) => "the credential command failed".to_string(),
        AuthError::ExecPluginFailed => {
            "the credential plugin returned an ExecCredential without status".to_string()
        }
        AuthError::MalformedTokenExpirationDate(_) => {
            "the credential has a malformed expiry".to_string()
        }
        AuthError::InvalidBearerToken(_) => {
            "the bearer token is not a valid header value".to_string()
        }
        AuthError::InvalidBasicAuth(_) => {
            "the basic-auth credentials are not a valid header value".to_string()
        }
        AuthError::ReadTokenFile(io, path) => {
            format!("failed to read token file {path:?}: {}", io.kind())
        }
        AuthError::UnrefreshableTokenResponse => {
            "the refreshed credential cannot be refreshed again".to_string()
        }
        _ => "the credential could not be obtained".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use kube::client::AuthError;
    use kube::runtime::watcher;

    #[test]
    fn watcher_errors_are_redacted() {
        let err =
            watcher::Error::WatchFailed(kube::Error::Auth(AuthError::AuthExec("hunter2".into())));
        assert!(!super::redact_watcher_error(&err).contains("hunter2"));
        let shown = crate::ErrorChain(&err).to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
