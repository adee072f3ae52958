//! Typed admission handlers: [`Request`] (the apiserver's `AdmissionRequest<K>` plus the
//! cluster it came from), [`Denied`], and the adapters that turn a defaulter into a JSON patch
//! and a validator into an allow/deny answer.

use std::{future::Future, marker::PhantomData, ops::Deref, sync::Arc};

use bytes::Bytes;
use http::StatusCode;
use kube::{
    Resource,
    core::{
        Status,
        admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
    },
};
use mcr_core::{BoxFuture, Cluster, ClusterName};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    pool::ConverterPool,
    review::{Reply, ReviewKind, uid_of},
};

/// An admission request for a `K`, and the cluster it was made in: the host on the
/// conventional paths, a member on `/clusters/{name}/...`. Derefs to kube's
/// [`AdmissionRequest`] (`operation`, `user_info`, `object`, `old_object`, `dry_run`, ...).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::core::admission::Operation;
/// use mcr_webhook::Request;
///
/// fn describe(req: &Request<ConfigMap>) -> String {
///     let op = if req.operation == Operation::Create { "create" } else { "change" };
///     format!("{op} of {} in {}", req.name, req.cluster().name())
/// }
/// ```
pub struct Request<K: Resource> {
    inner: AdmissionRequest<K>,
    cluster: Cluster,
}

impl<K: Resource> Request<K> {
    /// The cluster the request was made in (the host, or the member named in the path).
    /// Its [`cache`](Cluster::cache) and [`client`](Cluster::client) are that cluster's.
    ///
    /// ```no_run
    /// # fn demo(req: mcr_webhook::Request<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let client = req.cluster().client();
    /// # }
    /// ```
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// kube's request, by value.
    ///
    /// ```no_run
    /// # fn demo(req: mcr_webhook::Request<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let raw = req.into_inner();
    /// # }
    /// ```
    pub fn into_inner(self) -> AdmissionRequest<K> {
        self.inner
    }
}

impl<K: Resource> Deref for Request<K> {
    type Target = AdmissionRequest<K>;
    fn deref(&self) -> &AdmissionRequest<K> {
        &self.inner
    }
}

impl<K: Resource + std::fmt::Debug> std::fmt::Debug for Request<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("cluster", self.cluster.name())
            .field("uid", &self.inner.uid)
            .field("operation", &self.inner.operation)
            .field("name", &self.inner.name)
            .field("namespace", &self.inner.namespace)
            .finish_non_exhaustive()
    }
}

/// An admission request for a `K` and the *name* of the cluster it was made in, for handlers
/// that decide from the review alone ([`with_review_validator`] and
/// [`with_review_defaulter`]): such a route is answered by any replica, for any member name,
/// whether or not this replica engages the member, so in a sharded fleet behind one Service
/// no review for it fails. Derefs to kube's [`AdmissionRequest`].
///
/// [`with_review_validator`]: crate::WebhookBuilder::with_review_validator
/// [`with_review_defaulter`]: crate::WebhookBuilder::with_review_defaulter
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use mcr_webhook::Review;
///
/// fn describe(req: &Review<ConfigMap>) -> String {
///     format!("{} in {}", req.name, req.cluster_name())
/// }
/// ```
pub struct Review<K: Resource> {
    inner: AdmissionRequest<K>,
    cluster: ClusterName,
}

impl<K: Resource> Review<K> {
    /// The name of the cluster the request was made in (the host, or the member named in the
    /// path).
    ///
    /// ```no_run
    /// # fn demo(req: mcr_webhook::Review<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let from_host = req.cluster_name().is_host();
    /// # }
    /// ```
    pub fn cluster_name(&self) -> &ClusterName {
        &self.cluster
    }

    /// kube's request, by value.
    ///
    /// ```no_run
    /// # fn demo(req: mcr_webhook::Review<k8s_openapi::api::core::v1::ConfigMap>) {
    /// let raw = req.into_inner();
    /// # }
    /// ```
    pub fn into_inner(self) -> AdmissionRequest<K> {
        self.inner
    }
}

impl<K: Resource> Deref for Review<K> {
    type Target = AdmissionRequest<K>;
    fn deref(&self) -> &AdmissionRequest<K> {
        &self.inner
    }
}

impl<K: Resource + std::fmt::Debug> std::fmt::Debug for Review<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Review")
            .field("cluster", &self.cluster)
            .field("uid", &self.inner.uid)
            .field("operation", &self.inner.operation)
            .field("name", &self.inner.name)
            .field("namespace", &self.inner.namespace)
            .finish_non_exhaustive()
    }
}

/// What an admission handler is given: a [`Request`] (needs the cluster engaged here) or a
/// [`Review`] (needs only its name).
pub(crate) trait Incoming<K: Resource>: Sized + Send + 'static {
    /// Whether it needs the cluster engaged here.
    const NEEDS_CLUSTER: bool;
    /// The handler's argument for `request` made in cluster `name`, or why this replica
    /// cannot serve it.
    fn build(
        request: AdmissionRequest<K>,
        name: ClusterName,
        cluster: Result<Cluster, mcr_core::Error>,
    ) -> Result<Self, mcr_core::Error>;
    fn admission(&self) -> &AdmissionRequest<K>;
    fn admission_mut(&mut self) -> &mut AdmissionRequest<K>;
}

impl<K: Resource + Send + 'static> Incoming<K> for Request<K> {
    const NEEDS_CLUSTER: bool = true;
    fn build(
        request: AdmissionRequest<K>,
        _name: ClusterName,
        cluster: Result<Cluster, mcr_core::Error>,
    ) -> Result<Self, mcr_core::Error> {
        Ok(Request {
            inner: request,
            cluster: cluster?,
        })
    }
    fn admission(&self) -> &AdmissionRequest<K> {
        &self.inner
    }
    fn admission_mut(&mut self) -> &mut AdmissionRequest<K> {
        &mut self.inner
    }
}

impl<K: Resource + Send + 'static> Incoming<K> for Review<K> {
    const NEEDS_CLUSTER: bool = false;
    fn build(
        request: AdmissionRequest<K>,
        name: ClusterName,
        _cluster: Result<Cluster, mcr_core::Error>,
    ) -> Result<Self, mcr_core::Error> {
        Ok(Review {
            inner: request,
            cluster: name,
        })
    }
    fn admission(&self) -> &AdmissionRequest<K> {
        &self.inner
    }
    fn admission_mut(&mut self) -> &mut AdmissionRequest<K> {
        &mut self.inner
    }
}

/// A refusal from a defaulter or validator: the message reaches the API client that made the
/// request. The code defaults to 403 (Forbidden), as in controller-runtime.
///
/// ```
/// let no = mcr_webhook::Denied::new("data.size must be a number");
/// assert_eq!(no.code(), 403);
/// let no: mcr_webhook::Denied = "nope".into();
/// assert_eq!(no.message(), "nope");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    message: String,
    code: u16,
}

impl Denied {
    /// A refusal with `message` and code 403.
    ///
    /// ```
    /// let no = mcr_webhook::Denied::new("immutable field");
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 403,
        }
    }

    /// The same refusal with another HTTP code (reported in `status.code`).
    ///
    /// ```
    /// let no = mcr_webhook::Denied::new("bad value").with_code(422);
    /// assert_eq!(no.code(), 422);
    /// ```
    #[must_use]
    pub fn with_code(mut self, code: u16) -> Self {
        self.code = code;
        self
    }

    /// The message.
    ///
    /// ```
    /// assert_eq!(mcr_webhook::Denied::new("x").message(), "x");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The code.
    ///
    /// ```
    /// assert_eq!(mcr_webhook::Denied::new("x").code(), 403);
    /// ```
    pub fn code(&self) -> u16 {
        self.code
    }
}

impl From<String> for Denied {
    fn from(message: String) -> Self {
        Denied::new(message)
    }
}

impl From<&str> for Denied {
    fn from(message: &str) -> Self {
        Denied::new(message)
    }
}

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `response`, refused with `denied`.
pub(crate) fn deny(response: AdmissionResponse, denied: &Denied) -> AdmissionResponse {
    let reason = match denied.code {
        400 => "BadRequest",
        403 => "Forbidden",
        409 => "Conflict",
        422 => "Invalid",
        500 => "InternalError",
        _ => "",
    };
    let mut response = response.deny(&denied.message);
    response.result = Status::failure(&denied.message, reason).with_code(denied.code);
    response
}

/// The answer to a review for a cluster this replica cannot serve: not engaged here (unknown,
/// left, not engaged yet) or owned by another replica (sharded mode, [`NotOwned`]). It is a
/// *failed call* (HTTP 503, with a review body naming the cluster for whoever reads it), never
/// a denial: kube-apiserver then applies the webhook's `failurePolicy` (`Fail` refuses the
/// write, `Ignore` lets it through), which an answered `allowed: false` would bypass.
///
/// [`NotOwned`]: mcr_core::Error::NotOwned
pub(crate) fn not_served(kind: ReviewKind, uid: Option<String>, err: &mcr_core::Error) -> Reply {
    let why = match err {
        mcr_core::Error::ClusterNotFound(name) => {
            format!("cluster \"{name}\" is not engaged by this replica")
        }
        other => other.to_string(),
    };
    kind.refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        uid,
        503,
        "ServiceUnavailable",
        &format!(
            "{why}: this replica cannot serve it, so the call fails (for admission, the webhook's failurePolicy decides)"
        ),
    )
}

/// One request, as the server hands it to its route.
pub(crate) struct Call {
    /// The review, read whole.
    pub(crate) body: Bytes,
    /// The cluster the path names (the host, or a member).
    pub(crate) name: ClusterName,
    /// That cluster, if this replica serves it; why not otherwise.
    pub(crate) cluster: Result<Cluster, mcr_core::Error>,
    /// Where synchronous work (converters) runs.
    pub(crate) pool: Arc<ConverterPool>,
    /// The server authenticates callers and this one presented no certificate (as
    /// kube-apiserver does on conversion calls).
    pub(crate) anonymous: bool,
}

/// What a route calls: parse the body, find the cluster, answer.
pub(crate) trait Handle: Send + Sync + 'static {
    fn kind(&self) -> ReviewKind;
    /// Whether every review needs the cluster engaged here: one this replica cannot serve is
    /// then answered "not served" (503) before its body is even parsed. (A conversion decides
    /// by the kinds in its review, once parsed.)
    fn needs_cluster(&self) -> bool;
    /// Answers `call`.
    fn handle(self: Arc<Self>, call: Call) -> BoxFuture<'static, Reply>;
}

/// The raw admission route for `K`: the user's function gets the typed request (an `R`:
/// [`Request`] or [`Review`]) and returns kube's [`AdmissionResponse`].
pub(crate) struct AdmissionHandle<K, R, F> {
    f: F,
    _k: PhantomData<fn() -> (K, R)>,
}

impl<K, R, F> AdmissionHandle<K, R, F> {
    pub(crate) fn new(f: F) -> Self {
        Self { f, _k: PhantomData }
    }
}

impl<K, R, F, Fut> Handle for AdmissionHandle<K, R, F>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
    R: Incoming<K>,
    F: Fn(R) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = AdmissionResponse> + Send + 'static,
{
    fn kind(&self) -> ReviewKind {
        ReviewKind::Admission
    }

    fn needs_cluster(&self) -> bool {
        R::NEEDS_CLUSTER
    }

    fn handle(self: Arc<Self>, call: Call) -> BoxFuture<'static, Reply> {
        let Call {
            body,
            name,
            cluster,
            ..
        } = call;
        Box::pin(async move {
            let refuse = |code: u16, reason: &str, message: &str| {
                ReviewKind::Admission.refuse(StatusCode::OK, uid_of(&body), code, reason, message)
            };
            let review: AdmissionReview<K> = match serde_json::from_slice(&body) {
                Ok(review) => review,
                Err(err) => {
                    return refuse(
                        400,
                        "BadRequest",
                        &format!("the body is not an admission.k8s.io/v1 AdmissionReview: {err}"),
                    );
                }
            };
            let request: AdmissionRequest<K> = match review.try_into() {
                Ok(request) => request,
                Err(_) => return refuse(400, "BadRequest", "the AdmissionReview has no request"),
            };
            let uid = request.uid.clone();
            let incoming = match R::build(request, name, cluster) {
                Ok(incoming) => incoming,
                Err(err) => return not_served(ReviewKind::Admission, uid_of(&body), &err),
            };
            let mut response = (self.f)(incoming).await;
            // The apiserver rejects an answer for another uid; the request's uid is the only
            // right one.
            response.uid = uid;
            if response.types.api_version.is_empty() {
                response.types.api_version = kube::core::admission::META_API_VERSION_V1.into();
                response.types.kind = kube::core::admission::META_KIND.into();
            }
            match serde_json::to_vec(&response.into_review()) {
                Ok(body) => Reply::ok(body),
                Err(err) => refuse(
                    500,
                    "InternalError",
                    &format!("the webhook's answer could not be serialized: {err}"),
                ),
            }
        })
    }
}

/// The raw handler of a defaulter: it gets the object (and the request without it), returns
/// the defaulted object, and the difference becomes a JSON patch. Requests without an object
/// (DELETE) are allowed unchanged.
pub(crate) fn defaulter<K, R, D, Fut>(
    d: D,
) -> impl Fn(R) -> BoxFuture<'static, AdmissionResponse> + Send + Sync + 'static
where
    K: Resource + Serialize + Send + Sync + 'static,
    R: Incoming<K>,
    D: Fn(K, R) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<K, Denied>> + Send + 'static,
{
    let d = Arc::new(d);
    move |mut req: R| {
        let d = d.clone();
        Box::pin(async move {
            let response = AdmissionResponse::from(req.admission());
            let Some(object) = req.admission_mut().object.take() else {
                return response;
            };
            let before = match serde_json::to_value(&object) {
                Ok(v) => v,
                Err(err) => {
                    return deny(
                        response,
                        &Denied::new(format!("the object could not be serialized: {err}"))
                            .with_code(500),
                    );
                }
            };
            let after = match d(object, req).await {
                Ok(after) => after,
                Err(denied) => return deny(response, &denied),
            };
            let patch = match serde_json::to_value(&after) {
                Ok(after) => json_patch::diff(&before, &after),
                Err(err) => {
                    return deny(
                        response,
                        &Denied::new(format!(
                            "the defaulted object could not be serialized: {err}"
                        ))
                        .with_code(500),
                    );
                }
            };
            if patch.0.is_empty() {
                return response;
            }
            match response.clone().with_patch(patch) {
                Ok(patched) => patched,
                Err(err) => deny(response, &Denied::new(err.to_string()).with_code(500)),
            }
        }) as BoxFuture<'static, AdmissionResponse>
    }
}

/// The raw handler of a validator: allowed on `Ok`, refused with the message on `Err`.
pub(crate) fn validator<K, R, V, Fut>(
    v: V,
) -> impl Fn(R) -> BoxFuture<'static, AdmissionResponse> + Send + Sync + 'static
where
    K: Resource + Send + Sync + 'static,
    R: Incoming<K>,
    V: Fn(R) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Denied>> + Send + 'static,
{
    let v = Arc::new(v);
    move |req: R| {
        let v = v.clone();
        Box::pin(async move {
            let response = AdmissionResponse::from(req.admission());
            match v(req).await {
                Ok(()) => response,
                Err(denied) => deny(response, &denied),
            }
        }) as BoxFuture<'static, AdmissionResponse>
    }
}
