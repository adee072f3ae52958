//! Sending a webhook server, by hand, the reviews kube-apiserver would send (feature
//! `testing`): for tests against API servers that do not call webhooks (`mcr-envtest`'s
//! emulator), and for tests of the server's TLS and caller authentication.
//!
//! - [`ReviewClient`]: one HTTPS/1.1 connection to a webhook server, trusting only the given
//!   CA and presenting a client certificate when given one, as a member's apiserver does;
//! - [`admission_review`]: the `AdmissionReview` kube-apiserver sends for a write of an object;
//! - [`install_admission_types`]: `ValidatingWebhookConfiguration` and
//!   `MutatingWebhookConfiguration` served as CRDs, so that
//!   [`MemberConfigurations`](crate::MemberConfigurations) can write into an API server that
//!   does not serve `admissionregistration.k8s.io`.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use mcr_webhook::testing::{ReviewClient, admission_review};
//!
//! # async fn demo(server: &mcr_webhook::Server, ca_pem: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! cm.metadata.namespace = Some("default".into());
//! let review = admission_review("0001", "CREATE", &cm);
//! let mut client = ReviewClient::connect(server.local_addr(), ca_pem).await?;
//! let (status, answer) = client.post("/clusters/member-1/validate--v1-configmap", &review).await?;
//! assert_eq!(status, 200);
//! println!("allowed: {}", answer["response"]["allowed"]);
//! # Ok(()) }
//! ```

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use kube::{
    Api, Resource,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use rustls::pki_types::{CertificateDer, ServerName};
use serde::Serialize;
use serde_json::{Value, json};

/// What can go wrong while sending a review by hand.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// The CA, the client certificate or its key is not usable PEM.
    #[error("{what}: {reason}")]
    Pem {
        /// Which of the three.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// rustls refused the client configuration.
    #[error("the TLS client configuration")]
    Tls(#[source] rustls::Error),
    /// The TCP connection or the TLS handshake failed (for example: the server refused the
    /// client certificate, or presented one the CA did not sign).
    #[error("connecting to the webhook server at {addr}")]
    Connect {
        /// The server's address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed (the connection closed before an answer, for one).
    #[error("the HTTP exchange with the webhook server")]
    Http(#[source] hyper::Error),
    /// The request could not be built (a path that is not a URI path).
    #[error("building the request")]
    Request(#[source] http::Error),
    /// The review could not be serialized.
    #[error("serializing the review")]
    Json(#[source] serde_json::Error),
}

/// One HTTPS/1.1 connection to a webhook server, kept open across requests.
pub struct ReviewClient {
    sender: SendRequest<Full<Bytes>>,
    peer: Vec<u8>,
    /// The server's address, the `host` header of every request.
    addr: SocketAddr,
}

impl std::fmt::Debug for ReviewClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewClient")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn pem_error(what: &'static str) -> impl FnOnce(String) -> ReviewError {
    move |reason| ReviewError::Pem { what, reason }
}

/// The certificates of a PEM bundle; an error if it holds none.
fn certificates(
    what: &'static str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, ReviewError> {
    let certs = rustls_pemfile::certs(&mut &*pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(what)(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_error(what)("holds no CERTIFICATE block".into()));
    }
    Ok(certs)
}

impl ReviewClient {
    /// Connects to the server at `addr` (its certificate must be valid for that IP address),
    /// trusting only the CA certificates in `ca_pem`, presenting no client certificate.
    ///
    /// ```no_run
    /// # async fn demo(addr: std::net::SocketAddr, ca_pem: &[u8]) -> Result<(), mcr_webhook::testing::ReviewError> {
    /// let client = mcr_webhook::testing::ReviewClient::connect(addr, ca_pem).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(addr: SocketAddr, ca_pem: &[u8]) -> Result<Self, ReviewError> {
        Self::connect_as(addr, ca_pem, None).await
    }

    /// Like [`connect`](Self::connect), presenting `client` (certificate PEM, key PEM) when
    /// given: as a member's apiserver does with the kubeconfig of its
    /// `AdmissionConfiguration`. A refused certificate fails here, in the handshake, or at the
    /// first request (TLS 1.3 reports it after the handshake).
    ///
    /// ```no_run
    /// # async fn demo(addr: std::net::SocketAddr, ca: &[u8], cert: &[u8], key: &[u8]) -> Result<(), mcr_webhook::testing::ReviewError> {
    /// let client = mcr_webhook::testing::ReviewClient::connect_as(addr, ca, Some((cert, key))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_as(
        addr: SocketAddr,
        ca_pem: &[u8],
        client: Option<(&[u8], &[u8])>,
    ) -> Result<Self, ReviewError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates("the CA", ca_pem)? {
            roots
                .add(cert)
                .map_err(|e| pem_error("the CA")(e.to_string()))?;
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(ReviewError::Tls)?
        .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certificates("the client certificate", cert)?;
                let key = rustls_pemfile::private_key(&mut &*key)
                    .map_err(|e| pem_error("the client key")(e.to_string()))?
                    .ok_or_else(|| pem_error("the client key")("holds no private key".into()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(ReviewError::Tls)?
            }
        };
        let connect = |source| ReviewError::Connect { addr, source };
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(connect)?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await
            .map_err(connect)?;
        let peer = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|leaf| leaf.to_vec())
            .unwrap_or_default();
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(ReviewError::Http)?;
        tokio::spawn(conn);
        Ok(Self { sender, peer, addr })
    }

    /// The leaf certificate (DER) the server presented in the handshake.
    ///
    /// ```no_run
    /// # fn demo(client: &mcr_webhook::testing::ReviewClient) {
    /// let leaf: &[u8] = client.peer_certificate();
    /// # }
    /// ```
    pub fn peer_certificate(&self) -> &[u8] {
        &self.peer
    }

    /// POSTs `review` as JSON to `path`: the HTTP status and the answer's JSON body
    /// (`Value::Null` if it is not JSON). A status other than 200 is a failed call for
    /// kube-apiserver: the webhook's `failurePolicy` decides.
    ///
    /// ```no_run
    /// # async fn demo(mut client: mcr_webhook::testing::ReviewClient, review: serde_json::Value) -> Result<(), mcr_webhook::testing::ReviewError> {
    /// let (status, answer) = client.post("/validate--v1-configmap", &review).await?;
    /// # Ok(()) }
    /// ```
    pub async fn post(&mut self, path: &str, review: &Value) -> Result<(u16, Value), ReviewError> {
        let body = serde_json::to_vec(review).map_err(ReviewError::Json)?;
        self.request("POST", path, "application/json", body.into())
            .await
    }

    /// Sends any request on the connection (to test what the server does with a wrong
    /// method, content type or body): the HTTP status and the JSON body (`Value::Null` if it
    /// is not JSON).
    ///
    /// ```no_run
    /// # async fn demo(mut client: mcr_webhook::testing::ReviewClient) -> Result<(), mcr_webhook::testing::ReviewError> {
    /// let (status, _) = client.request("POST", "/validate--v1-configmap", "text/plain", "hi".into()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(u16, Value), ReviewError> {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string())
            .header("content-type", content_type)
            .body(Full::new(body))
            .map_err(ReviewError::Request)?;
        self.sender.ready().await.map_err(ReviewError::Http)?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(ReviewError::Http)?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(ReviewError::Http)?
            .to_bytes();
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }
}

/// The `admission.k8s.io/v1` `AdmissionReview` kube-apiserver sends for `operation`
/// (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`) of `object`, with request uid `uid`, by user
/// `mcr-webhook-testing`.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("settings".into());
/// let review = mcr_webhook::testing::admission_review("0001", "CREATE", &cm);
/// assert_eq!(review["request"]["resource"]["resource"], "configmaps");
/// ```
pub fn admission_review<K>(uid: &str, operation: &str, object: &K) -> Value
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let meta = object.meta();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": { "group": K::group(&()), "version": K::version(&()), "kind": K::kind(&()) },
            "resource": { "group": K::group(&()), "version": K::version(&()), "resource": K::plural(&()) },
            "name": meta.name,
            "namespace": meta.namespace,
            "operation": operation,
            "userInfo": { "username": "mcr-webhook-testing" },
            "object": object,
            "oldObject": null,
            "dryRun": false
        }
    })
}

/// Serves `ValidatingWebhookConfiguration` and `MutatingWebhookConfiguration` as CRDs (any
/// content kept) in `client`'s cluster, for an API server that does not serve
/// `admissionregistration.k8s.io` (`mcr-envtest`'s emulator); a real kube-apiserver has them
/// built in and refuses these CRDs.
///
/// ```no_run
/// # async fn demo(member: kube::Client) -> Result<(), kube::Error> {
/// mcr_webhook::testing::install_admission_types(&member).await?;
/// # Ok(()) }
/// ```
pub async fn install_admission_types(client: &kube::Client) -> Result<(), kube::Error> {
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    for (kind, plural) in [
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    ] {
        let crd: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {
                "name": format!("{plural}.admissionregistration.k8s.io"),
                // A protected group (k8s.io): kube-apiserver refuses its CRDs without this
                // annotation; "unapproved" says these are stand-ins, not the real API.
                "annotations": {
                    "api-approved.kubernetes.io": "unapproved, test stand-ins for the built-in types"
                }
            },
            "spec": {
                "group": "admissionregistration.k8s.io",
                "scope": "Cluster",
                "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase() },
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }
                }]
            }
        }))
        .map_err(kube::Error::SerdeError)?;
        crds.create(&PostParams::default(), &crd).await?;
    }
    Ok(())
}
