//! The client of a namespace cluster: a tower service that rewrites requests into one namespace
//! of the host cluster and responses back to `default`, under a plain `kube::Client`.

mod body;
mod path;
mod scopes;
mod watch;

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode, Uri, header};
use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::json;
use tower::BoxError;

use crate::Error;
pub(crate) use path::VIRTUAL_NAMESPACE;
use path::{Target, is_watch, parse, with_query};
pub(crate) use scopes::Scopes;
use watch::{BoxBody, rewrite_watch_body};

/// How to treat the response of a forwarded request.
enum Rewrite {
    /// Cluster-scoped or discovery: unchanged.
    None,
    /// Namespaced: objects of the real namespace back to `default`.
    Namespaced,
    /// The Namespace object itself: renamed to `default`.
    NamespaceObject,
}

/// A tower service that maps a virtual cluster containing only the namespace `default` onto
/// one namespace of the host cluster. Build a client with [`namespace_client`].
#[derive(Clone)]
pub struct NamespaceService {
    host: kube::Client,
    scopes: Arc<Scopes>,
    namespace: Arc<str>,
}

impl std::fmt::Debug for NamespaceService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceService")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// A `kube::Client` that sees only `namespace` of the host cluster, as the namespace `default`.
///
/// Reads, lists, watches, creates, updates, patches (all patch types, server-side apply
/// included) and deletes addressed to `default` go to `namespace` on the host; objects come
/// back with `metadata.namespace: default`. Cluster-wide lists and watches of namespaced
/// resources become lists and watches of `namespace`. Requests for any other namespace get a
/// 404 `Status`; listing, watching or changing Namespaces gets a 403 (`GET` of the Namespace
/// `default` returns the real Namespace renamed). Cluster-scoped resources (Nodes, CRDs, …)
/// pass through unchanged: they are the host's. A resource the host's discovery does not list
/// gets a 404 `Status` from this client and is never forwarded (it fails closed: a CRD
/// installed meanwhile could otherwise be listed across every namespace).
///
/// ```no_run
/// # async fn f() -> Result<(), kube::Error> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::Api;
///
/// let host = kube::Client::try_default().await?;
/// let team_a = mcr_provider_namespace::namespace_client(host, "team-a");
/// // Lists the ConfigMaps of namespace `team-a`, shown in namespace `default`.
/// let cms = Api::<ConfigMap>::default_namespaced(team_a).list(&Default::default()).await?;
/// # Ok(()) }
/// ```
pub fn namespace_client(host: kube::Client, namespace: &str) -> kube::Client {
    let scopes = Arc::new(Scopes::new(host.clone()));
    NamespaceService::new(host, scopes, namespace).into_client()
}

impl NamespaceService {
    pub(crate) fn new(host: kube::Client, scopes: Arc<Scopes>, namespace: &str) -> Self {
        Self {
            host,
            scopes,
            namespace: Arc::from(namespace),
        }
    }

    pub(crate) fn into_client(self) -> kube::Client {
        kube::Client::new(self, VIRTUAL_NAMESPACE)
    }

    async fn handle(self, req: Request<Body>) -> Result<Response<BoxBody>, BoxError> {
        let (mut parts, body) = req.into_parts();
        let path = parts.uri.path().to_owned();
        let query = parts.uri.query().map(str::to_owned);
        let watch = is_watch(query.as_deref());
        let real = self.namespace.clone();
        let (new_path, rewrite) = match parse(&path) {
            Target::Other => (None, Rewrite::None),
            Target::LegacyWatch => {
                return Ok(refuse(
                    StatusCode::FORBIDDEN,
                    "the deprecated /watch/ paths are not served by a namespace cluster",
                ));
            }
            Target::InNamespace {
                prefix,
                namespace,
                tail,
            } => {
                if namespace != VIRTUAL_NAMESPACE {
                    return Ok(not_found(namespace));
                }
                (
                    Some(format!("{prefix}/namespaces/{real}/{tail}")),
                    Rewrite::Namespaced,
                )
            }
            Target::Namespace { name } => {
                if name != VIRTUAL_NAMESPACE {
                    return Ok(not_found(name));
                }
                if parts.method != Method::GET || watch {
                    return Ok(refuse(
                        StatusCode::FORBIDDEN,
                        "the namespace \"default\" of a namespace cluster is read-only",
                    ));
                }
                let suffix = &path["/api/v1/namespaces/default".len().min(path.len())..];
                (
                    Some(format!("/api/v1/namespaces/{real}{suffix}")),
                    Rewrite::NamespaceObject,
                )
            }
            Target::Namespaces => {
                return Ok(refuse(
                    StatusCode::FORBIDDEN,
                    "a namespace cluster has only the namespace \"default\": \
                     get it by name instead of listing, watching or creating namespaces",
                ));
            }
            Target::Resource {
                prefix,
                group_version,
                plural,
                has_tail,
            } => match self.scopes.namespaced(&group_version, plural).await {
                Ok(Some(true)) if !has_tail => (
                    Some(format!("{prefix}/namespaces/{real}/{plural}")),
                    Rewrite::Namespaced,
                ),
                Ok(Some(true)) => {
                    return Ok(refuse(
                        StatusCode::NOT_FOUND,
                        &format!("{plural} is namespaced: address it in namespace \"default\""),
                    ));
                }
                Ok(Some(false)) => (None, Rewrite::None),
                // Fail closed: a resource discovery did not list may be served by the time the
                // request reaches the host (a new CRD), and would then be answered across
                // every namespace. Never forward what cannot be classified.
                Ok(None) => return Ok(unknown_resource(&group_version, plural)),
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    return Ok(unknown_resource(&group_version, plural));
                }
                Err(err) => {
                    tracing::warn!(cluster = %real, error = %err, "discovery on the host failed");
                    return Ok(refuse(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "could not discover whether the resource is namespaced",
                    ));
                }
            },
        };
        if let Some(new_path) = new_path {
            parts.uri = with_query(&new_path, query.as_deref())
                .parse::<Uri>()
                .map_err(|err| Error::Request {
                    namespace: real.to_string(),
                    reason: err.to_string(),
                })?;
        }
        let body = match rewrite {
            Rewrite::Namespaced => self.rewrite_request_body(&mut parts, body).await?,
            Rewrite::None | Rewrite::NamespaceObject => body,
        };
        tracing::trace!(cluster = %real, method = %parts.method, uri = %parts.uri, "forwarding");
        let response = self
            .host
            .send(Request::from_parts(parts, body))
            .await
            .map_err(|source| Error::Host {
                namespace: real.to_string(),
                source,
            })?;
        self.rewrite_response(response, rewrite, watch).await
    }

    async fn rewrite_request_body(
        &self,
        parts: &mut http::request::Parts,
        body: Body,
    ) -> Result<Body, Error> {
        if !matches!(parts.method, Method::POST | Method::PUT | Method::PATCH) {
            return Ok(body);
        }
        let bytes = body.collect_bytes().await.map_err(|source| Error::Body {
            namespace: self.namespace.to_string(),
            source,
        })?;
        match body::rewrite_bytes(&bytes, VIRTUAL_NAMESPACE, &self.namespace) {
            Some(rewritten) => {
                parts.headers.remove(header::CONTENT_LENGTH);
                Ok(Body::from(rewritten))
            }
            None => Ok(Body::from(bytes)),
        }
    }

    async fn rewrite_response(
        &self,
        response: Response<Body>,
        rewrite: Rewrite,
        watch: bool,
    ) -> Result<Response<BoxBody>, BoxError> {
        let (mut parts, body) = response.into_parts();
        let real = self.namespace.clone();
        let body = match rewrite {
            Rewrite::None => body.map_err(BoxError::from).boxed_unsync(),
            Rewrite::Namespaced if watch && parts.status.is_success() => {
                rewrite_watch_body(body, real, Arc::from(VIRTUAL_NAMESPACE))
            }
            Rewrite::Namespaced | Rewrite::NamespaceObject => {
                let bytes = body.collect_bytes().await.map_err(|source| Error::Body {
                    namespace: real.to_string(),
                    source,
                })?;
                let rewritten = match rewrite {
                    Rewrite::NamespaceObject => rename(&bytes, &real),
                    _ => body::rewrite_bytes(&bytes, &real, VIRTUAL_NAMESPACE),
                };
                let bytes = match rewritten {
                    Some(rewritten) => {
                        parts.headers.remove(header::CONTENT_LENGTH);
                        bytes::Bytes::from(rewritten)
                    }
                    None => bytes,
                };
                http_body_util::Full::new(bytes)
                    .map_err(BoxError::from)
                    .boxed_unsync()
            }
        };
        Ok(Response::from_parts(parts, body))
    }
}

/// The Namespace object `real` renamed to `default`.
fn rename(bytes: &[u8], real: &str) -> Option<Vec<u8>> {
    let mut value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if !body::rename_namespace(&mut value, real, VIRTUAL_NAMESPACE) {
        return None;
    }
    serde_json::to_vec(&value).ok()
}

fn not_found(namespace: &str) -> Response<BoxBody> {
    refuse(
        StatusCode::NOT_FOUND,
        &format!(
            "namespaces \"{namespace}\" not found: a namespace cluster has only the namespace \"default\""
        ),
    )
}

/// The answer for a resource the host's discovery does not list (not forwarded).
fn unknown_resource(group_version: &str, plural: &str) -> Response<BoxBody> {
    refuse(
        StatusCode::NOT_FOUND,
        &format!(
            "the server could not find the requested resource: {plural} in {group_version} is \
             not in the host's discovery (a namespace cluster does not forward requests for \
             resources whose scope it does not know; retry once the resource is served)"
        ),
    )
}

/// A Kubernetes `Status` response.
fn refuse(status: StatusCode, message: &str) -> Response<BoxBody> {
    let reason = match status {
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::FORBIDDEN => "Forbidden",
        _ => "ServiceUnavailable",
    };
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": status.as_u16(),
    });
    let bytes = bytes::Bytes::from(body.to_string());
    let mut response = Response::new(
        http_body_util::Full::new(bytes)
            .map_err(BoxError::from)
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

impl tower::Service<Request<Body>> for NamespaceService {
    type Response = Response<BoxBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        Box::pin(self.clone().handle(req))
    }
}
