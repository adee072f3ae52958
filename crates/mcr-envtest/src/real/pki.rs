//! The certificates and keys of one real control plane: a CA, the API server's serving
//! certificate signed by it, and the service-account signing key pair.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::Error;

/// The files the API server reads, and the CA clients trust.
pub(crate) struct Pki {
    /// The CA certificate (PEM), for kubeconfigs.
    pub(crate) ca_pem: String,
    /// The CA certificate (DER), for `kube::Config::root_cert`.
    pub(crate) ca_der: Vec<u8>,
    /// `ca.crt`: also the API server's `--client-ca-file`.
    pub(crate) ca_file: PathBuf,
    /// `apiserver.crt` and `apiserver.key`.
    pub(crate) serving_cert: PathBuf,
    pub(crate) serving_key: PathBuf,
    /// `sa.pub` and `sa.key`: service-account token verification and signing.
    pub(crate) sa_public: PathBuf,
    pub(crate) sa_private: PathBuf,
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

/// Writes a file readable by the owner only.
pub(crate) fn write_private(path: &Path, contents: &str) -> Result<(), Error> {
    crate::kubeconfig::write(path, contents)
}

/// Generates the material for `cluster` into `dir`.
pub(crate) fn generate(cluster: &str, dir: &Path) -> Result<Pki, Error> {
    let ca_key = KeyPair::generate().map_err(tls_err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("mcr-envtest real CA {cluster}"));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_err)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let serving_key = KeyPair::generate().map_err(tls_err)?;
    let sans: Vec<String> = crate::tls::SANS.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(sans).map_err(tls_err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = params.signed_by(&serving_key, &issuer).map_err(tls_err)?;
    let sa_key = KeyPair::generate().map_err(tls_err)?;

    let pki = Pki {
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().to_vec(),
        ca_file: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        sa_public: dir.join("sa.pub"),
        sa_private: dir.join("sa.key"),
    };
    write_private(&pki.ca_file, &pki.ca_pem)?;
    write_private(&pki.serving_cert, &serving_cert.pem())?;
    write_private(&pki.serving_key, &serving_key.serialize_pem())?;
    write_private(&pki.sa_public, &sa_key.public_key_pem())?;
    write_private(&pki.sa_private, &sa_key.serialize_pem())?;
    Ok(pki)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let pki = generate("a", dir.path()).unwrap();
        for path in [
            &pki.ca_file,
            &pki.serving_cert,
            &pki.serving_key,
            &pki.sa_public,
            &pki.sa_private,
        ] {
            let text = std::fs::read_to_string(path).unwrap();
            assert!(text.starts_with("-----BEGIN "), "{}", path.display());
        }
        assert!(
            std::fs::read_to_string(&pki.sa_public)
                .unwrap()
                .contains("PUBLIC KEY")
        );
        assert_eq!(pki.ca_pem, std::fs::read_to_string(&pki.ca_file).unwrap());
    }
}
