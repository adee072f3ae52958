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

/// `client`, with every watch of `coordination.k8s.io` Leases deaf: the watch is opened and
/// stays open, but for Leases no object has (its label selector is replaced), so it delivers no
/// event, as a watch whose connection hangs does. Lists, gets and writes go through: the
/// host client of a replica that can learn its peers only from consistent lists.
///
/// ```no_run
/// # fn demo(host: kube::Client) {
/// let deaf = mcr_test_support::with_deaf_lease_watches(host);
/// # }
/// ```
pub fn with_deaf_lease_watches(client: kube::Client) -> kube::Client {
    let service = tower::service_fn(move |mut req: Request<Body>| {
        let client = client.clone();
        async move {
            let uri = req.uri().clone();
            let query = uri.query().unwrap_or_default();
            let watching = query
                .split('&')
                .any(|p| p == "watch=true" || p == "watch=1");
            if req.method() == Method::GET && uri.path().ends_with("/leases") && watching {
                let mut params: Vec<&str> = query
                    .split('&')
                    .filter(|p| !p.starts_with("labelSelector="))
                    .collect();
                params.push("labelSelector=mcr-test-support%3Ddeaf");
                let deaf = format!("{}?{}", uri.path(), params.join("&"));
                *req.uri_mut() = deaf.parse().map_err(|e: http::uri::InvalidUri| {
                    kube::Error::Service(e.to_string().into())
                })?;
            }
            client.send(req).await
        }
    });
    kube::Client::new(service, "default")
}
