//! A client that stands in for a narrow Role: some requests are answered 403 Forbidden on the
//! client side, as an API server enforcing RBAC would, and the rest go to the real server.

use http::{Method, Request, Response, StatusCode, header};
use kube::client::Body;

/// `client`, with every list and watch of `coordination.k8s.io` Leases refused with 403: the
/// host client of a replica whose Role lacks `list` and `watch` on Leases. Gets and writes go
/// through to the server.
///
/// ```no_run
/// # fn demo(host: kube::Client) {
/// let narrow = mcr_test_support::without_lease_lists(host);
/// # }
/// ```
pub fn without_lease_lists(client: kube::Client) -> kube::Client {
    let service = tower::service_fn(move |req: Request<Body>| {
        let client = client.clone();
        async move {
            if req.method() == Method::GET && req.uri().path().ends_with("/leases") {
                return Ok::<_, kube::Error>(forbidden("list", "leases"));
            }
            client.send(req).await
        }
    });
    kube::Client::new(service, "default")
}

/// The Status an API server answers a request RBAC does not allow.
fn forbidden(verb: &str, resource: &str) -> Response<Body> {
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("{resource}.coordination.k8s.io is forbidden: cannot {verb} resource \"{resource}\""),
        "reason": "Forbidden",
        "details": {"group": "coordination.k8s.io", "kind": resource},
        "code": 403
    });
    let mut resp = Response::new(Body::from(status.to_string().into_bytes()));
    *resp.status_mut() = StatusCode::FORBIDDEN;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}
