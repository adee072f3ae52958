//! CRD conversion: one `/convert` route (as in controller-runtime) that hands each object of
//! a `ConversionReview` to the converter registered for its group and kind, on the server's
//! [`ConverterPool`] (a converter is a synchronous function: the server's handler timeout must
//! be able to answer while it runs, and a flood of slow ones must not take more threads than
//! the pool's bound).

use std::{collections::HashMap, sync::Arc};

use http::StatusCode;
use kube::core::{
    Status,
    conversion::{ConversionRequest, ConversionResponse, ConversionReview},
};
use mcr_core::{BoxFuture, Cluster};
use parking_lot::RwLock;
use serde_json::Value;

use crate::{
    admission::{Call, Handle},
    pool::PoolError,
    review::{Reply, ReviewKind, uid_of},
};

/// A converter: the object as stored, the `apiVersion` asked for (and the cluster, for one
/// that is handed it); returns the object in that version, or why it cannot.
#[derive(Clone)]
pub(crate) enum Converter {
    /// Handed the member's `Cluster`: only a replica that engages the member converts.
    WithCluster(Arc<ClusterConvertFn>),
    /// Needs only the object: any replica converts, for any member.
    ReviewOnly(Arc<ObjectConvertFn>),
}

/// A converter handed the cluster.
pub(crate) type ClusterConvertFn =
    dyn Fn(Value, &str, &Cluster) -> Result<Value, String> + Send + Sync + 'static;
/// A converter of the object alone.
pub(crate) type ObjectConvertFn =
    dyn Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static;

/// The group and kind of a stored object.
fn group_kind(object: &Value) -> (&str, &str) {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    (group, kind)
}

/// The `/convert` route: converters by (group, kind).
#[derive(Default)]
pub(crate) struct ConversionHandle {
    converters: RwLock<HashMap<(String, String), Converter>>,
}

impl ConversionHandle {
    /// Registers `converter` for `group`/`kind`; false if one was there already.
    pub(crate) fn insert(&self, group: String, kind: String, converter: Converter) -> bool {
        let mut map = self.converters.write();
        if map.contains_key(&(group.clone(), kind.clone())) {
            return false;
        }
        map.insert((group, kind), converter);
        true
    }

    /// Whether some converter is handed the member's cluster.
    pub(crate) fn hands_out_clusters(&self) -> bool {
        self.converters
            .read()
            .values()
            .any(|c| matches!(c, Converter::WithCluster(_)))
    }

    fn converter(&self, group: &str, kind: &str) -> Option<Converter> {
        self.converters
            .read()
            .get(&(group.to_owned(), kind.to_owned()))
            .cloned()
    }

    /// Whether converting `request` needs the member's `Cluster` (a converter of one of its
    /// objects is handed it).
    fn needs_cluster_for(&self, request: &ConversionRequest) -> bool {
        request.objects.iter().any(|object| {
            let (group, kind) = group_kind(object);
            matches!(self.converter(group, kind), Some(Converter::WithCluster(_)))
        })
    }

    fn convert(
        &self,
        request: &ConversionRequest,
        cluster: Option<&Cluster>,
    ) -> Result<Vec<Value>, String> {
        let desired = request.desired_api_version.as_str();
        request
            .objects
            .iter()
            .enumerate()
            .map(|(i, object)| {
                let (group, kind) = group_kind(object);
                let converter = self.converter(group, kind).ok_or_else(|| {
                    format!("object {i}: no converter for kind {kind:?} of group {group:?}")
                })?;
                let converted = match (&converter, cluster) {
                    (Converter::ReviewOnly(f), _) => f(object.clone(), desired),
                    (Converter::WithCluster(f), Some(cluster)) => {
                        f(object.clone(), desired, cluster)
                    }
                    // `handle` answers 503 before converting when the cluster is needed and
                    // not served here.
                    (Converter::WithCluster(_), None) => {
                        Err("the cluster is not served by this replica".to_owned())
                    }
                }
                .map_err(|e| format!("object {i} ({kind}): {e}"))?;
                let got = converted.get("apiVersion").and_then(Value::as_str);
                if got != Some(desired) {
                    return Err(format!(
                        "object {i} ({kind}): converted to apiVersion {got:?}, not {desired:?}"
                    ));
                }
                Ok(converted)
            })
            .collect()
    }
}

impl Handle for ConversionHandle {
    fn kind(&self) -> ReviewKind {
        ReviewKind::Conversion
    }

    fn needs_cluster(&self) -> bool {
        false
    }

    fn handle(self: Arc<Self>, call: Call) -> BoxFuture<'static, Reply> {
        let Call {
            body,
            cluster,
            pool,
            anonymous,
            ..
        } = call;
        Box::pin(async move {
            let refuse = |code: u16, reason: &str, message: &str| {
                ReviewKind::Conversion.refuse(StatusCode::OK, uid_of(&body), code, reason, message)
            };
            let review: ConversionReview = match serde_json::from_slice(&body) {
                Ok(review) => review,
                Err(err) => {
                    return refuse(
                        400,
                        "BadRequest",
                        &format!(
                            "the body is not an apiextensions.k8s.io/v1 ConversionReview: {err}"
                        ),
                    );
                }
            };
            let request = match ConversionRequest::from_review(review) {
                Ok(request) => request,
                Err(_) => return refuse(400, "BadRequest", "the ConversionReview has no request"),
            };
            if anonymous && self.needs_cluster_for(&request) {
                // kube-apiserver calls conversion webhooks without a client certificate, so
                // conversion routes take such callers; a converter handed the member's
                // cluster is not run for someone who could be anyone.
                return ReviewKind::Conversion.refuse(
                    StatusCode::FORBIDDEN,
                    uid_of(&body),
                    403,
                    "Forbidden",
                    "a converter handed the member's cluster (with_converter) runs only for a \
                     caller with the member's client certificate, and kube-apiserver presents \
                     none on conversion calls: register it with with_review_converter",
                );
            }
            let cluster = match cluster {
                Ok(cluster) => Some(cluster),
                Err(err) if self.needs_cluster_for(&request) => {
                    return crate::admission::not_served(
                        ReviewKind::Conversion,
                        uid_of(&body),
                        &err,
                    );
                }
                // Every converter needs only the objects: any replica converts.
                Err(_) => None,
            };
            // Converters are plain functions that may take long (large lists, heavy
            // transformations): run them on the converter pool, so the server's
            // `handler_timeout` can answer 504 in time (the thread finishes on its own, in its
            // slot), and past the pool's bound refuse at once.
            let this = self.clone();
            let outcome = pool
                .run(move || {
                    let outcome = this.convert(&request, cluster.as_ref());
                    (request, outcome)
                })
                .await;
            let response = match outcome {
                Ok((request, Ok(objects))) => {
                    ConversionResponse::for_request(request).success(objects)
                }
                Ok((request, Err(message))) => ConversionResponse::for_request(request)
                    .failure(Status::failure(&message, "ConversionFailed")),
                Err(err @ PoolError::Full { .. }) => {
                    tracing::warn!("conversion refused: {err}");
                    return ReviewKind::Conversion.refuse(
                        StatusCode::SERVICE_UNAVAILABLE,
                        uid_of(&body),
                        503,
                        "ServiceUnavailable",
                        &format!("{err}: the conversion was refused at once; try again"),
                    );
                }
                Err(err) => {
                    tracing::error!(
                        "{}; answered 500 for this request only",
                        mcr_core::ErrorChain(&err)
                    );
                    return ReviewKind::Conversion.refuse(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        uid_of(&body),
                        500,
                        "InternalError",
                        &mcr_core::ErrorChain(&err).to_string(),
                    );
                }
            };
            match serde_json::to_vec(&response.into_review()) {
                Ok(body) => Reply::ok(body),
                Err(err) => refuse(500, "InternalError", &err.to_string()),
            }
        })
    }
}
