//! The request handler shared by the in-process service and the HTTPS server.
//!
//! [`handle`] takes a fully read request (`Request<Bytes>`), applies latency and injected
//! errors, counts it, routes it ([`route`]), parses its query ([`query`]) and answers with a
//! JSON document, a `v1 Status`, or a streamed watch ([`response`]). Connection-level faults
//! (stopped, partitioned) are the transports' business: they call
//! [`Faults::admit`](crate::faults::Faults) first.

use bytes::Bytes;
use http::{Method, Request, Response};
use tracing::Instrument;

use crate::counters::Counters;
use crate::engine::{ApiError, Engine};
use crate::faults::Faults;
use crate::{discovery, openapi};

mod dispatch;
mod metadata;
pub(crate) mod protobuf;
pub(crate) mod query;
pub(crate) mod response;
pub(crate) mod route;

pub(crate) use response::Body;
use route::{DiscoveryPath, Route};

/// Everything one cluster's handler needs.
pub(crate) struct Shared {
    /// Cluster name (for tracing).
    pub(crate) name: String,
    /// The API state.
    pub(crate) engine: Engine,
    /// Fault injection state.
    pub(crate) faults: Faults,
    /// Request counters.
    pub(crate) counters: Counters,
    /// Extra `POST .../{name}/{subresource}` handlers (e.g. the garden's `adminkubeconfig`).
    pub(crate) subresources: crate::garden::Subresources,
}

/// Answers one request.
pub(crate) async fn handle(shared: &Shared, req: Request<Bytes>) -> Response<Body> {
    let span = tracing::debug_span!(
        "request",
        cluster = %shared.name,
        method = %req.method(),
        path = %req.uri().path(),
        status = tracing::field::Empty,
    );
    async move {
        if let Some(latency) = shared.faults.latency() {
            tokio::time::sleep(latency).await;
        }
        let response = match route::parse_path(req.uri().path()) {
            None => response::error(&ApiError::path_not_found()),
            Some(Route::Discovery(path)) => discovery_request(shared, &req, &path),
            Some(Route::Resource(path)) => match shared.subresources.serve(&path, &req) {
                Some(answer) => {
                    shared.counters.record(
                        "create",
                        &format!(
                            "{}/{}",
                            path.plural,
                            path.subresource.as_deref().unwrap_or_default()
                        ),
                    );
                    answer.map_or_else(|e| response::error(&e), |v| response::json(201, &v))
                }
                None => dispatch::resource_request(shared, req, path).await,
            },
        };
        tracing::Span::current().record("status", response.status().as_u16());
        tracing::debug!("answered");
        response
    }
    .instrument(span)
    .await
}

fn discovery_request(
    shared: &Shared,
    req: &Request<Bytes>,
    path: &DiscoveryPath,
) -> Response<Body> {
    let method = req.method();
    if path == &DiscoveryPath::Health {
        return response::text("ok");
    }
    if method != Method::GET {
        return response::error(&ApiError::method_not_allowed(format!(
            "{method} is not allowed on discovery endpoints"
        )));
    }
    shared.counters.record("get", "discovery");
    if let Some(code) = shared.faults.injected_error("get", "discovery") {
        return response::error(&response::injected(code));
    }
    let types = || shared.engine.resource_types();
    let accept = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let core = match path {
        DiscoveryPath::LegacyRoot => Some(true),
        DiscoveryPath::Groups => Some(false),
        _ => None,
    };
    if let Some(core) = core
        && discovery::wants_aggregated(accept)
    {
        let doc = discovery::aggregated(&types(), core);
        let mut response = response::json(200, &doc);
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(discovery::AGGREGATED_MEDIA_TYPE),
        );
        return response;
    }
    let customs = || {
        shared
            .engine
            .custom_schemas()
            .into_iter()
            .map(|(rt, schema)| openapi::Custom { rt, schema })
            .collect::<Vec<_>>()
    };
    if matches!(path, DiscoveryPath::OpenApiV2) {
        return openapi_v2(&openapi::swagger(&types(), &customs()), accept);
    }
    let doc = match path {
        DiscoveryPath::Version => Some(discovery::version()),
        DiscoveryPath::LegacyRoot => Some(discovery::legacy_root()),
        DiscoveryPath::LegacyVersion(v) => discovery::resource_list(&types(), "", v),
        DiscoveryPath::Groups => Some(discovery::group_list(&types())),
        DiscoveryPath::Group(g) => discovery::group(&types(), g),
        DiscoveryPath::GroupVersion(g, v) => discovery::resource_list(&types(), g, v),
        DiscoveryPath::OpenApiV3Root => Some(openapi::root(&types(), &customs())),
        DiscoveryPath::OpenApiV3(g, v) => openapi::group_version(&types(), &customs(), g, v),
        DiscoveryPath::OpenApiV2 | DiscoveryPath::OpenApiOther | DiscoveryPath::Health => None,
    };
    match doc {
        Some(doc) => {
            let mut response = response::json(200, &doc);
            if matches!(
                path,
                DiscoveryPath::OpenApiV3Root | DiscoveryPath::OpenApiV3(..)
            ) {
                not_cached(&mut response);
            }
            response
        }
        None => response::error(&ApiError::path_not_found()),
    }
}

/// `/openapi/v2` as JSON, or as gnostic protobuf when the `Accept` header asks for it (as
/// kubectl does).
fn openapi_v2(doc: &serde_json::Value, accept: &str) -> Response<Body> {
    let protobuf = accept.split(',').any(|clause| {
        let media = clause.split(';').next().unwrap_or_default().trim();
        media == openapi::gnostic::MEDIA_TYPE || media == openapi::gnostic::ANSWER_MEDIA_TYPE
    });
    let mut response = if protobuf {
        let mut r = response::bytes(200, openapi::gnostic::encode(doc));
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(openapi::gnostic::ANSWER_MEDIA_TYPE),
        );
        r
    } else {
        response::json(200, doc)
    };
    not_cached(&mut response);
    response
}

/// Documents that change with the CRDs are revalidated, as kube-apiserver marks them.
fn not_cached(response: &mut Response<Body>) {
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache, private"),
    );
}
