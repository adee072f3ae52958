//! Certificates for HTTPS clusters: a per-cluster CA and a serving certificate signed by it.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::Error;
use crate::x509::ClientCa;

/// The subject alternative names of every serving certificate.
pub(crate) const SANS: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

/// The TLS material of one HTTPS cluster.
pub(crate) struct TlsMaterial {
    /// The CA certificate (PEM), as it goes into `certificate-authority-data`.
    pub(crate) ca_pem: String,
    /// The server configuration (serving certificate and key, ring provider, h2 + http/1.1,
    /// client certificates requested).
    pub(crate) server_config: Arc<ServerConfig>,
    /// The CA for client-certificate authentication.
    pub(crate) client_ca: Arc<ClientCa>,
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

/// Generates a CA named after the cluster and a serving certificate for [`SANS`].
pub(crate) fn generate(cluster: &str) -> Result<TlsMaterial, Error> {
    let ca_key = KeyPair::generate().map_err(tls_err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("mcr-envtest CA {cluster}"));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_err)?;
    let issuer = Issuer::new(ca_params.clone(), ca_key);
    let client_issuer = Issuer::new(
        ca_params,
        KeyPair::from_pem(&issuer.key().serialize_pem()).map_err(tls_err)?,
    );
    let client_ca = Arc::new(ClientCa::new(ca_cert.der().clone(), client_issuer)?);

    let server_key = KeyPair::generate().map_err(tls_err)?;
    let mut params = CertificateParams::new(SANS.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .map_err(tls_err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("mcr-envtest {cluster}"));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = params.signed_by(&server_key, &issuer).map_err(tls_err)?;

    let chain: Vec<CertificateDer<'static>> = vec![server_cert.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?
        .with_client_cert_verifier(client_ca.handshake_verifier())
        .with_single_cert(chain, key)
        .map_err(tls_err)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_pem: ca_cert.pem(),
        server_config: Arc::new(config),
        client_ca,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_ca_and_serving_config() {
        let a = generate("a").unwrap();
        let b = generate("b").unwrap();
        assert!(a.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(a.ca_pem, b.ca_pem, "every cluster has its own CA");
        assert_eq!(a.server_config.alpn_protocols.len(), 2);
    }
}
