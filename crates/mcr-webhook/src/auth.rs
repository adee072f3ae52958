//! [`ClientAuth`]: who may call which route. Each member's kube-apiserver presents a client
//! certificate (configured through its `AdmissionConfiguration`'s webhook kubeconfig) signed
//! by a CA the server trusts, whose common name is the member's name; a member's route answers
//! only that member's certificate, so one member's apiserver (or an administrator of that
//! member, who controls where its webhook configuration points) cannot have a handler run with
//! another member's, or the host's, `Cluster`.

use std::{fmt, sync::Arc};

use mcr_core::ClusterName;
use rustls::{
    RootCertStore,
    pki_types::CertificateDer,
    server::{WebPkiClientVerifier, danger::ClientCertVerifier},
};

use crate::{Error, review::ReviewKind};

/// Caller authentication for the webhook server (set
/// [`ServerOptions::client_auth`](crate::ServerOptions::client_auth)): client certificates
/// signed by the given CA, each naming its caller in its subject's common name.
///
/// - `/clusters/{name}/...` answers only a certificate whose common name is `name`;
/// - the host's routes answer only a certificate named [`host_identity`](Self::host_identity)
///   when one is set; otherwise only callers presenting no certificate (the host's apiserver,
///   reaching the server through the cluster network as with controller-runtime's webhooks),
///   so a member's apiserver, which presents its own certificate, is refused there too;
/// - conversion routes (`/convert`, `/clusters/{name}/convert`) also answer callers without a
///   certificate: kube-apiserver calls conversion webhooks with no client credentials at all
///   (its apiextensions server gives their client an empty authentication resolver). For
///   such a caller only converters of the object alone
///   ([`with_review_converter`](crate::WebhookBuilder::with_review_converter)) run; a
///   converter handed the cluster is refused (403).
///
/// A caller refused is answered HTTP 403 before any handler runs: a failed call, so the
/// webhook's `failurePolicy` decides for its own writes, and it learns nothing of the member.
/// A certificate from another CA fails the TLS handshake.
///
/// ```no_run
/// # fn demo(client_ca_pem: &[u8]) -> Result<(), mcr_webhook::Error> {
/// let mut options = mcr_webhook::ServerOptions::default();
/// options.client_auth = Some(
///     mcr_webhook::ClientAuth::from_ca_pem(client_ca_pem)?.host_identity("host-apiserver"),
/// );
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ClientAuth {
    roots: Arc<RootCertStore>,
    host_identity: Option<String>,
}

impl fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientAuth")
            .field("cas", &self.roots.len())
            .field("host_identity", &self.host_identity)
            .finish()
    }
}

impl ClientAuth {
    /// Trusts the client certificates signed by the CA certificates in `pem`.
    ///
    /// ```no_run
    /// # fn demo(pem: &[u8]) -> Result<(), mcr_webhook::Error> {
    /// let auth = mcr_webhook::ClientAuth::from_ca_pem(pem)?;
    /// # Ok(()) }
    /// ```
    pub fn from_ca_pem(pem: &[u8]) -> Result<Self, Error> {
        let mut roots = RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut &*pem) {
            let cert = cert.map_err(|e| Error::ClientCa {
                reason: format!("not a PEM certificate: {e}"),
            })?;
            roots.add(cert).map_err(|e| Error::ClientCa {
                reason: format!("not a usable CA certificate: {e}"),
            })?;
        }
        if roots.is_empty() {
            return Err(Error::ClientCa {
                reason: "holds no CERTIFICATE block".into(),
            });
        }
        Ok(Self {
            roots: Arc::new(roots),
            host_identity: None,
        })
    }

    /// Requires the host's routes to be called with a certificate of this common name.
    ///
    /// ```no_run
    /// # fn demo(auth: mcr_webhook::ClientAuth) {
    /// let auth = auth.host_identity("host-apiserver");
    /// # }
    /// ```
    #[must_use]
    pub fn host_identity(mut self, common_name: impl Into<String>) -> Self {
        self.host_identity = Some(common_name.into());
        self
    }

    /// The verifier of the TLS handshake: a certificate, when presented, must chain to the
    /// CA; presenting none is allowed (the route decides).
    pub(crate) fn verifier(&self) -> Result<Arc<dyn ClientCertVerifier>, Error> {
        WebPkiClientVerifier::builder_with_provider(
            self.roots.clone(),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| Error::ClientCa {
            reason: e.to_string(),
        })
    }

    /// Whether `caller` (the common name of the verified certificate, if any) may call the
    /// routes of `cluster` that speak `kind`; `Err` says why not.
    pub(crate) fn check(
        &self,
        cluster: &ClusterName,
        kind: ReviewKind,
        caller: Option<&str>,
    ) -> Result<(), String> {
        // kube-apiserver calls conversion webhooks with no client credentials at all (its
        // apiextensions server builds their client with an empty authentication resolver,
        // whatever the AdmissionConfiguration says): a conversion route takes a caller
        // without a certificate, and runs only converters that need no cluster for it.
        if kind == ReviewKind::Conversion && caller.is_none() {
            return Ok(());
        }
        let wanted = if cluster.is_host() {
            match (&self.host_identity, caller) {
                (Some(host), _) => host.as_str(),
                (None, None) => return Ok(()),
                // Signed by the client CA for someone else (a member): not the host.
                (None, Some(caller)) => {
                    return Err(format!(
                        "the caller's certificate names {:?}: it may not call the host's routes",
                        caller.escape_debug().to_string()
                    ));
                }
            }
        } else {
            cluster.as_str()
        };
        match caller {
            Some(caller) if caller == wanted => Ok(()),
            Some(caller) => Err(format!(
                "the caller's certificate names {:?}, not {:?}: it may not call these routes",
                caller.escape_debug().to_string(),
                wanted.escape_debug().to_string()
            )),
            None => Err(format!(
                "these routes need a client certificate naming {:?}",
                wanted.escape_debug().to_string()
            )),
        }
    }
}

/// The subject common name of a (verified) certificate.
pub(crate) fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
    let cn = cert.tbs_certificate().subject().common_name().ok()??;
    Some(String::from(cn))
}
