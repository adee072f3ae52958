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
        kube::Error::ProxyProtocolUnsupported { .. }
        | kube::Error::ProxyProtocolDisabled { .. } => {
            "the proxy URL uses an unsupported protocol".to_string()
        }
        _ => "unexpected error while building the client".to_string(),
    }
}
