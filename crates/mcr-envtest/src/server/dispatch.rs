//! Resource requests: method + path + query -> one engine call -> response.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, header};
use serde_json::Value;

use super::Shared;
use super::metadata::Output;
use super::query::Query;
use super::response::{self, Body};
use super::route::ResourcePath;
use crate::engine::{ApiError, PatchType, SubresourceWrite, WriteOptions};

/// The verb of a resource request, as counted and as Kubernetes names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    fn from_request(method: &Method, path: &ResourcePath, query: &Query) -> Result<Verb, ApiError> {
        let named = path.name.is_some();
        let sub = path.subresource.is_some();
        let watch = path.legacy_watch || query.is_watch()?;
        let verb = match *method {
            Method::GET if watch && !sub => Verb::Watch,
            Method::GET if named => Verb::Get,
            Method::GET => Verb::List,
            Method::POST if !named || sub => Verb::Create,
            Method::PUT if named => Verb::Update,
            Method::PATCH if named => Verb::Patch,
            Method::DELETE if named && !sub => Verb::Delete,
            Method::DELETE if !named => Verb::DeleteCollection,
            _ => {
                return Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource ({method})"
                )));
            }
        };
        if path.legacy_watch && verb != Verb::Watch {
            return Err(ApiError::method_not_allowed(
                "only GET is allowed on watch paths",
            ));
        }
        Ok(verb)
    }
}

/// Serves a request for a resource or collection.
pub(super) async fn resource_request(
    shared: &Shared,
    req: Request<Bytes>,
    path: ResourcePath,
) -> Response<Body> {
    serve(shared, req, path).unwrap_or_else(|err| response::error(&err))
}

fn serve(
    shared: &Shared,
    req: Request<Bytes>,
    path: ResourcePath,
) -> Result<Response<Body>, ApiError> {
    let query = Query::parse(req.uri().query());
    let verb = Verb::from_request(req.method(), &path, &query)?;
    let resource = match &path.subresource {
        Some(sub) => format!("{}/{sub}", path.plural),
        None => path.plural.clone(),
    };
    tracing::debug!(verb = verb.as_str(), %resource, namespace = ?path.namespace, name = ?path.name);
    shared.counters.record(verb.as_str(), &resource);
    if let Some(code) = shared.faults.injected_error(verb.as_str(), &resource) {
        return Err(response::injected(code));
    }
    let output = Output::negotiate(req.headers())?;
    if output != Output::Full {
        shared
            .counters
            .record(&format!("{}-metadata", verb.as_str()), &resource);
    }

    let engine = &shared.engine;
    let rt = engine
        .resolve(&path.group, &path.version, &path.plural)
        .ok_or_else(ApiError::path_not_found)?;
    let needs_namespace = matches!(
        verb,
        Verb::Get | Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
    );
    let scope_ok = if rt.namespaced {
        path.namespace.is_some() || !needs_namespace
    } else {
        path.namespace.is_none()
    };
    let sub_ok = match path.subresource.as_deref() {
        None => true,
        Some(sub) => rt.subresources.contains(&sub),
    };
    if !scope_ok || !sub_ok {
        return Err(ApiError::path_not_found());
    }
    let allowed = match path.subresource.as_deref() {
        None => rt.verbs,
        Some(sub) => crate::discovery::subresource_verbs(sub),
    };
    if !allowed.contains(&verb.as_str()) {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            req.method()
        )));
    }
    let ns = path.namespace.as_deref();
    let name = path.name.as_deref().unwrap_or_default();
    let sub = path.subresource.as_deref();
    let body = req.body();
    // The subresources other than `status` read and write their own shapes.
    if let Some(sub) = sub.filter(|s| *s != "status") {
        let (code, value) = match verb {
            Verb::Get => (200, engine.get_subresource(&rt, ns, name, sub)?),
            Verb::Create => {
                let object = parse_object(req.headers(), body)?;
                let opts = write_options(&query, req.headers(), "CreateOptions", false)?;
                let answer = engine.post_subresource(&rt, ns, name, sub, object, &opts)?;
                (201, answer)
            }
            Verb::Update => {
                let object = parse_object(req.headers(), body)?;
                let opts = write_options(&query, req.headers(), "UpdateOptions", false)?;
                let write = SubresourceWrite::Replace(&object);
                (
                    200,
                    engine.write_subresource(&rt, ns, name, sub, write, &opts)?,
                )
            }
            Verb::Patch => {
                let patch_type = patch_type(req.headers())?;
                let apply = patch_type == PatchType::Apply;
                let opts = write_options(&query, req.headers(), "PatchOptions", apply)?;
                let write = SubresourceWrite::Patch(patch_type, body);
                (
                    200,
                    engine.write_subresource(&rt, ns, name, sub, write, &opts)?,
                )
            }
            _ => return Err(ApiError::path_not_found()),
        };
        return Ok(response::json(code, &output.encode(value)?));
    }
    let value = match verb {
        Verb::Get => engine.get(&rt, ns, name)?,
        Verb::List => engine.list(&rt, ns, &query.list_params()?)?,
        Verb::Watch => {
            let mut params = query.watch_params()?;
            if let Some(name) = &path.name {
                let by_name = format!("metadata.name={name}");
                params.list.field_selector = Some(match params.list.field_selector.take() {
                    Some(fs) => format!("{fs},{by_name}"),
                    None => by_name,
                });
            }
            return match engine.watch(&rt, ns, &params) {
                Ok(events) => Ok(response::watch_stream(
                    output.watch(events)?,
                    shared.faults.subscribe(),
                )),
                Err(err) if err.code == 410 => Ok(response::watch_error(&err)),
                Err(err) => Err(err),
            };
        }
        Verb::Create => {
            let object = parse_object(req.headers(), body)?;
            let opts = write_options(&query, req.headers(), "CreateOptions", false)?;
            let created = engine.create(&rt, ns, object, &opts)?;
            return Ok(warned(response::json(201, &output.encode(created)?), &opts));
        }
        Verb::Update => {
            let object = parse_object(req.headers(), body)?;
            let opts = write_options(&query, req.headers(), "UpdateOptions", false)?;
            let (updated, created) = engine.update_created(&rt, ns, name, object, sub, &opts)?;
            let code = if created { 201 } else { 200 };
            return Ok(warned(
                response::json(code, &output.encode(updated)?),
                &opts,
            ));
        }
        Verb::Patch => {
            let patch_type = patch_type(req.headers())?;
            let apply = patch_type == PatchType::Apply;
            let opts = write_options(&query, req.headers(), "PatchOptions", apply)?;
            let (patched, created) =
                engine.patch_created(&rt, ns, name, patch_type, body, sub, &opts)?;
            let code = if created { 201 } else { 200 };
            return Ok(warned(
                response::json(code, &output.encode(patched)?),
                &opts,
            ));
        }
        Verb::Delete => engine.delete(&rt, ns, name, &query.delete_options(body)?)?,
        Verb::DeleteCollection => engine.delete_collection(
            &rt,
            ns,
            &query.list_params()?,
            &query.delete_options(body)?,
        )?,
    };
    let mut response = response::json(200, &output.encode(value)?);
    if rt.group.is_empty() && rt.kind == "ComponentStatus" {
        // kube-apiserver marks the reads of a deprecated kind.
        response.headers_mut().append(
            header::WARNING,
            http::HeaderValue::from_static("299 - \"v1 ComponentStatus is deprecated in v1.19+\""),
        );
    }
    Ok(response)
}

/// A write's response with its warnings as `Warning` headers (`299 - "text"`, as
/// kube-apiserver writes them).
fn warned(mut response: Response<Body>, opts: &WriteOptions) -> Response<Body> {
    for warning in opts.warnings.take() {
        let text = format!("299 - {}", serde_json::Value::String(warning));
        if let Ok(value) = http::HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// The write options of a request (`kind` names them in errors: `CreateOptions`, ...).
/// Without a `fieldManager`, kube-apiserver names the manager after the `User-Agent` (up to
/// its first `/`); an apply must name one.
fn write_options(
    query: &Query,
    headers: &HeaderMap,
    kind: &str,
    apply: bool,
) -> Result<WriteOptions, ApiError> {
    let mut opts = query.write_options(kind)?;
    if opts.field_manager.is_none() && !apply {
        let agent = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let prefix: String = agent
            .split('/')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_control())
            .take(128)
            .collect();
        opts.field_manager = Some(prefix);
    }
    Ok(opts)
}

/// The media type of a header without parameters, lower-cased.
fn media_type(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let value = headers.get(name)?.to_str().ok()?;
    Some(
        value
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase(),
    )
}

/// Reads a create/update body (JSON, YAML, or Kubernetes protobuf for the kinds
/// [`protobuf`](super::protobuf) decodes).
fn parse_object(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let content_type = media_type(headers, header::CONTENT_TYPE);
    match content_type.as_deref() {
        None | Some("application/json") => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}"))),
        Some("application/yaml" | "application/x-yaml" | "text/yaml") => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::bad_request("the YAML body is not UTF-8"))?;
            serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("invalid YAML body: {e}")))
        }
        Some(super::protobuf::MEDIA_TYPE) => Ok(super::protobuf::decode(body)?),
        Some(other) => Err(ApiError::unsupported_media_type(other)),
    }
}

/// The patch type from the `Content-Type`.
fn patch_type(headers: &HeaderMap) -> Result<PatchType, ApiError> {
    let content_type = media_type(headers, header::CONTENT_TYPE).unwrap_or_default();
    match content_type.as_str() {
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(name: header::HeaderName, value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_static(value));
        h
    }

    fn path(name: Option<&str>, sub: Option<&str>) -> ResourcePath {
        ResourcePath {
            plural: "configmaps".into(),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
            ..ResourcePath::default()
        }
    }

    #[test]
    fn verbs() {
        let q = Query::parse(None);
        let w = Query::parse(Some("watch=true"));
        let v = |m: Method, p: ResourcePath, q: &Query| Verb::from_request(&m, &p, q);
        assert_eq!(v(Method::GET, path(None, None), &q).unwrap(), Verb::List);
        assert_eq!(v(Method::GET, path(None, None), &w).unwrap(), Verb::Watch);
        assert_eq!(
            v(Method::GET, path(Some("a"), None), &q).unwrap(),
            Verb::Get
        );
        assert_eq!(
            v(Method::GET, path(Some("a"), Some("status")), &q).unwrap(),
            Verb::Get
        );
        assert_eq!(v(Method::POST, path(None, None), &q).unwrap(), Verb::Create);
        assert_eq!(
            v(Method::PUT, path(Some("a"), Some("status")), &q).unwrap(),
            Verb::Update
        );
        assert_eq!(
            v(Method::PATCH, path(Some("a"), None), &q).unwrap(),
            Verb::Patch
        );
        assert_eq!(
            v(Method::DELETE, path(Some("a"), None), &q).unwrap(),
            Verb::Delete
        );
        assert_eq!(
            v(Method::DELETE, path(None, None), &q).unwrap(),
            Verb::DeleteCollection
        );
        assert_eq!(
            v(Method::POST, path(Some("a"), None), &q).unwrap_err().code,
            405
        );
        assert_eq!(v(Method::PUT, path(None, None), &q).unwrap_err().code, 405);
        assert_eq!(v(Method::HEAD, path(None, None), &q).unwrap_err().code, 405);
        let mut legacy = path(None, None);
        legacy.legacy_watch = true;
        assert_eq!(v(Method::GET, legacy.clone(), &q).unwrap(), Verb::Watch);
        assert_eq!(v(Method::POST, legacy, &q).unwrap_err().code, 405);
    }

    #[test]
    fn content_negotiation() {
        let negotiate = |v| Output::negotiate(&headers(header::ACCEPT, v));
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(kubectl).unwrap(), Output::Full);
        let proto = "application/vnd.kubernetes.protobuf,application/json";
        assert_eq!(negotiate(proto).unwrap(), Output::Full);
        let only = "application/vnd.kubernetes.protobuf";
        assert_eq!(negotiate(only).unwrap_err().code, 406);
        assert_eq!(Output::negotiate(&HeaderMap::new()).unwrap(), Output::Full);

        let ct = |v| headers(header::CONTENT_TYPE, v);
        assert_eq!(
            patch_type(&ct("application/merge-patch+json")).unwrap(),
            PatchType::Merge
        );
        assert_eq!(
            patch_type(&ct("application/json-patch+json")).unwrap(),
            PatchType::Json
        );
        assert_eq!(
            patch_type(&ct("application/strategic-merge-patch+json; charset=utf-8")).unwrap(),
            PatchType::Strategic
        );
        assert_eq!(
            patch_type(&ct("application/apply-patch+yaml")).unwrap(),
            PatchType::Apply
        );
        assert_eq!(patch_type(&ct("text/plain")).unwrap_err().code, 415);

        let obj = parse_object(&ct("application/yaml"), b"a: 1\nb: [x]\n").unwrap();
        assert_eq!(obj, serde_json::json!({"a": 1, "b": ["x"]}));
        let obj = parse_object(&ct("application/json"), br#"{"a":1}"#).unwrap();
        assert_eq!(obj["a"], 1);
        let err = parse_object(&ct("application/vnd.kubernetes.protobuf"), b"").unwrap_err();
        assert_eq!(err.code, 400);
        let err = parse_object(&ct("application/cbor"), b"").unwrap_err();
        assert_eq!(err.code, 415);
        assert_eq!(parse_object(&HeaderMap::new(), b"{").unwrap_err().code, 400);
    }
}
