//! x509 client-certificate authentication for HTTPS clusters, as kube-apiserver does it.
//!
//! The TLS handshake *requests* a client certificate and checks only that the client holds
//! its key (Go's `tls.RequestClientCert`); the certificate itself is verified on **every
//! request** against the cluster's CA at the current time, so a certificate past its NotAfter
//! gets `401 Unauthorized` even on a connection opened while it was valid. A request is
//! authenticated by a valid client certificate or by the cluster's bearer token.
//!
//! [`ClientCa`] also mints client certificates signed by the cluster's CA
//! ([`TestCluster::client_certificate`](crate::TestCluster::client_certificate)).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use crate::Error;

/// A client certificate minted by an HTTPS cluster's CA.
///
/// ```no_run
/// # async fn doc() -> Result<(), mcr_envtest::Error> {
/// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
/// let cert = cluster.client_certificate("alice", &["system:masters"], std::time::Duration::from_secs(60))?;
/// assert!(cert.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ClientCertificate {
    /// The certificate (PEM), as it goes into `client-certificate-data`.
    pub cert_pem: String,
    /// The private key (PKCS#8 PEM), as it goes into `client-key-data`.
    pub key_pem: String,
    /// The certificate's NotAfter (whole seconds).
    pub not_after: SystemTime,
}

impl fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key stays out of debug output.
        f.debug_struct("ClientCertificate")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

fn tls_err(e: impl fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

/// A cluster's CA as seen by client authentication: it mints and verifies client certificates.
pub(crate) struct ClientCa {
    issuer: Issuer<'static, KeyPair>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl ClientCa {
    /// Wraps the CA (its DER certificate for verification, its issuer for minting).
    pub(crate) fn new(
        ca_der: CertificateDer<'static>,
        issuer: Issuer<'static, KeyPair>,
    ) -> Result<ClientCa, Error> {
        let mut roots = RootCertStore::empty();
        roots.add(ca_der).map_err(tls_err)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(tls_err)?;
        Ok(ClientCa { issuer, verifier })
    }

    /// The verifier for the TLS handshake: offers client authentication, never requires it,
    /// and accepts any certificate whose key the client proves to hold.
    pub(crate) fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::new(RequestClientCert(self.verifier.clone()))
    }

    /// Whether `chain` (end entity first) is signed by the CA and valid now.
    pub(crate) fn verify(&self, chain: &[CertificateDer<'static>]) -> bool {
        let Some((end_entity, intermediates)) = chain.split_first() else {
            return false;
        };
        self.verifier
            .verify_client_cert(end_entity, intermediates, UnixTime::now())
            .is_ok()
    }

    /// Mints a client certificate for `user` (CN) in `groups` (O), valid from a minute ago for
    /// `valid_for` (whole seconds, at least one).
    pub(crate) fn mint(
        &self,
        user: &str,
        groups: &[&str],
        valid_for: Duration,
    ) -> Result<ClientCertificate, Error> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(tls_err)?
            .as_secs();
        let not_after = now + valid_for.as_secs().max(1);
        let stamp = |secs: u64| {
            let secs = i64::try_from(secs).map_err(tls_err)?;
            time::OffsetDateTime::from_unix_timestamp(secs).map_err(tls_err)
        };
        let key = KeyPair::generate().map_err(tls_err)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
        params.distinguished_name.push(DnType::CommonName, user);
        for group in groups {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        params.not_before = stamp(now.saturating_sub(60))?;
        params.not_after = stamp(not_after)?;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).map_err(tls_err)?;
        Ok(ClientCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            not_after: UNIX_EPOCH + Duration::from_secs(not_after),
        })
    }
}

/// Go's `tls.RequestClientCert`: the chain is verified per request, not at the handshake.
struct RequestClientCert(Arc<dyn ClientCertVerifier>);

impl fmt::Debug for RequestClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestClientCert")
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl crate::TestCluster {
    /// Mints a client certificate for `user` (CN) in `groups` (O) signed by this HTTPS
    /// cluster's CA, valid for `valid_for` (whole seconds). Requests presenting it are
    /// authenticated until its NotAfter and get `401 Unauthorized` after, on every request,
    /// also on connections opened earlier (as kube-apiserver).
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// let cert = cluster.client_certificate("alice", &["system:masters"], std::time::Duration::from_secs(60))?;
    /// assert!(cert.not_after > std::time::SystemTime::now());
    /// # Ok(()) }
    /// ```
    pub fn client_certificate(
        &self,
        user: &str,
        groups: &[&str],
        valid_for: Duration,
    ) -> Result<ClientCertificate, Error> {
        self.client_ca()?.1.mint(user, groups, valid_for)
    }

    /// A kubeconfig (YAML) for this HTTPS cluster whose user is a fresh client certificate
    /// ([`client_certificate`](Self::client_certificate)), with the certificate's NotAfter.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let cluster = mcr_envtest::TestCluster::start_https("a").await?;
    /// let (yaml, _not_after) = cluster.client_certificate_kubeconfig("alice", &[], std::time::Duration::from_secs(60))?;
    /// assert!(yaml.contains("client-certificate-data"));
    /// # Ok(()) }
    /// ```
    pub fn client_certificate_kubeconfig(
        &self,
        user: &str,
        groups: &[&str],
        valid_for: Duration,
    ) -> Result<(String, SystemTime), Error> {
        let (ca_pem, ca) = self.client_ca()?;
        let cert = ca.mint(user, groups, valid_for)?;
        let url = self
            .url()
            .ok_or_else(|| Error::NotHttps(self.name().into()))?;
        let yaml = crate::kubeconfig::render_client_cert(
            self.name(),
            &url,
            ca_pem,
            &cert.cert_pem,
            &cert.key_pem,
        );
        Ok((yaml, cert.not_after))
    }
}
