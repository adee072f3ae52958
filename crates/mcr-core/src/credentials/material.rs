//! [`Credentials`]: what authenticates a client (a bearer token or a client certificate), with
//! its expiry.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use kube::config::AuthInfo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use rustls::sign::CertifiedKey;
use secrecy::ExposeSecret;

use super::Error;

#[derive(Clone)]
pub(crate) enum Secret {
    Token(http::HeaderValue),
    Certificate(Arc<CertifiedKey>),
}

/// A client's credentials: a bearer token or a client certificate (with its key), and when
/// they expire. Debug output and errors never show the secret parts.
///
/// The expiry is, in order: the one given with [`with_expiry`](Credentials::with_expiry) (a
/// provider that knows it, e.g. Gardener's `status.expirationTimestamp`), the certificate's
/// NotAfter, or a JWT token's `exp` claim. Credentials without one are never renewed on a
/// schedule.
///
/// ```no_run
/// use mcr_core::credentials::Credentials;
/// # fn f(cert_pem: &[u8], key_pem: &[u8]) -> Result<(), mcr_core::credentials::Error> {
/// let creds = Credentials::client_certificate(cert_pem, key_pem)?;
/// println!("expires at {:?}", creds.expires_at());
/// let token = Credentials::bearer("opaque-token")?
///     .with_expiry(std::time::SystemTime::now() + std::time::Duration::from_secs(3600));
/// # let _ = token; Ok(()) }
/// ```
#[derive(Clone)]
pub struct Credentials {
    pub(crate) secret: Secret,
    expires_at: Option<SystemTime>,
    /// SHA-256 of the secret material, to tell whether credentials changed.
    fingerprint: String,
}

impl Credentials {
    /// A bearer token. A JWT's `exp` claim, when present, is its expiry.
    ///
    /// ```
    /// let creds = mcr_core::credentials::Credentials::bearer("abc").unwrap();
    /// assert!(creds.expires_at().is_none());
    /// ```
    pub fn bearer(token: &str) -> Result<Credentials, Error> {
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| Error::Invalid("the token is not a valid header value".into()))?;
        value.set_sensitive(true);
        Ok(Credentials {
            fingerprint: fingerprint(&[value.as_bytes()]),
            secret: Secret::Token(value),
            expires_at: jwt_expiry(token),
        })
    }

    /// A client certificate chain and its private key (PEM); the expiry is the end-entity
    /// certificate's NotAfter.
    pub fn client_certificate(cert_pem: &[u8], key_pem: &[u8]) -> Result<Credentials, Error> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|_| Error::Invalid("the client certificate is not valid PEM".into()))?;
        let leaf = chain
            .first()
            .ok_or_else(|| Error::Invalid("no client certificate in the PEM data".into()))?;
        let not_after = not_after(leaf)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|_| Error::Invalid("the client key is not valid PEM".into()))?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|_| Error::Invalid("the client key type is not supported".into()))?;
        Ok(Credentials {
            fingerprint: fingerprint(&[cert_pem, key_pem]),
            secret: Secret::Certificate(Arc::new(CertifiedKey::new(chain, signer))),
            expires_at: Some(not_after),
        })
    }

    /// The credentials of a kubeconfig user: a token (`token`, `tokenFile`) or a client
    /// certificate (`client-certificate[-data]`, `client-key[-data]`). Exec plugins,
    /// auth-providers and basic auth are refused (they cannot be renewed in place).
    pub(crate) fn from_auth_info(auth: &AuthInfo) -> Result<Credentials, Error> {
        if auth.exec.is_some() || auth.auth_provider.is_some() {
            return Err(Error::Invalid(
                "exec plugins and auth-providers are not renewable credentials".into(),
            ));
        }
        if let Some(token) = &auth.token {
            return Credentials::bearer(token.expose_secret().trim());
        }
        if let Some(path) = &auth.token_file {
            let token = std::fs::read_to_string(path)
                .map_err(|_| Error::Invalid("the token file cannot be read".into()))?;
            return Credentials::bearer(token.trim());
        }
        let cert = data_or_file(
            auth.client_certificate_data.as_deref(),
            auth.client_certificate.as_deref(),
            "client certificate",
        )?;
        let key_data = auth
            .client_key_data
            .as_ref()
            .map(|k| k.expose_secret().to_string());
        let key = data_or_file(
            key_data.as_deref(),
            auth.client_key.as_deref(),
            "client key",
        )?;
        match (cert, key) {
            (Some(cert), Some(key)) => Credentials::client_certificate(&cert, &key),
            _ => Err(Error::Invalid(
                "the user has neither a token nor a client certificate and key".into(),
            )),
        }
    }

    /// Sets the expiry (replacing the one read from the certificate or token).
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// let at = SystemTime::now() + Duration::from_secs(60);
    /// let creds = mcr_core::credentials::Credentials::bearer("abc").unwrap().with_expiry(at);
    /// assert_eq!(creds.expires_at(), Some(at));
    /// ```
    #[must_use]
    pub fn with_expiry(mut self, at: SystemTime) -> Credentials {
        self.expires_at = Some(at);
        self
    }

    /// When the credentials expire, if known.
    ///
    /// ```
    /// assert!(mcr_core::credentials::Credentials::bearer("x").unwrap().expires_at().is_none());
    /// ```
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at
    }

    pub(crate) fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// `"token"` or `"client-certificate"` (for logs).
    ///
    /// ```
    /// assert_eq!(mcr_core::credentials::Credentials::bearer("x").unwrap().kind(), "token");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self.secret {
            Secret::Token(_) => "token",
            Secret::Certificate(_) => "client-certificate",
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("kind", &self.kind())
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

fn fingerprint(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hex::encode(hasher.finalize())
}

fn data_or_file(
    data: Option<&str>,
    file: Option<&str>,
    what: &str,
) -> Result<Option<Vec<u8>>, Error> {
    if let Some(data) = data {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|_| Error::Invalid(format!("the {what} data is not valid base64")))?;
        return Ok(Some(bytes));
    }
    match file {
        Some(path) => std::fs::read(path)
            .map(Some)
            .map_err(|_| Error::Invalid(format!("the {what} file cannot be read"))),
        None => Ok(None),
    }
}

/// The NotAfter of a DER certificate.
fn not_after(der: &CertificateDer<'_>) -> Result<SystemTime, Error> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(der.as_ref())
        .map_err(|_| Error::Invalid("the client certificate cannot be parsed".into()))?;
    let since_epoch = cert
        .tbs_certificate()
        .validity()
        .not_after
        .to_unix_duration();
    UNIX_EPOCH
        .checked_add(since_epoch)
        .ok_or_else(|| Error::Invalid("the client certificate's NotAfter is out of range".into()))
}

/// The `exp` claim of a JWT (unverified: only used to schedule renewal). An `exp` that is not
/// a whole number of seconds, or beyond what [`SystemTime`] can hold, is no known expiry.
fn jwt_expiry(token: &str) -> Option<SystemTime> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?.as_u64()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(exp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_exp_is_read() {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let token = format!("{}.{}.sig", b64("{}"), b64(r#"{"exp":2000000000}"#));
        let creds = Credentials::bearer(&token).unwrap();
        assert_eq!(
            creds.expires_at(),
            Some(UNIX_EPOCH + Duration::from_secs(2_000_000_000))
        );
        assert!(
            Credentials::bearer("opaque")
                .unwrap()
                .expires_at()
                .is_none()
        );
    }

    #[test]
    fn jwt_exp_beyond_system_time_is_no_expiry() {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        for exp in [u64::MAX, 1 << 63] {
            let token = format!("{}.{}.sig", b64("{}"), b64(&format!(r#"{{"exp":{exp}}}"#)));
            let creds = Credentials::bearer(&token).unwrap();
            assert_eq!(creds.expires_at(), None, "exp {exp}");
        }
    }

    #[test]
    fn bad_material_is_refused_without_echoing_it() {
        let err = Credentials::bearer("bad\ntoken").unwrap_err().to_string();
        assert!(!err.contains("bad"), "{err}");
        let err = Credentials::client_certificate(b"secret-cert", b"secret-key")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("secret"), "{err}");
    }
}
