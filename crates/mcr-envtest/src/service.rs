//! The in-process transport: a `tower::Service` over the shared handler, no sockets.

use std::io;
use std::sync::Arc;

use http::{Request, Response};
use http_body_util::BodyExt;

use crate::server::{self, Body, Shared};

/// The error type of the in-process service.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves one request: refused while the cluster is down, waits while it hangs.
pub(crate) async fn call(
    shared: Arc<Shared>,
    req: Request<kube::client::Body>,
) -> Result<Response<Body>, BoxError> {
    if shared.faults.admit().await.is_err() {
        return Err(Box::new(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!(
                "cluster {:?} refused the connection (mcr-envtest)",
                shared.name
            ),
        )));
    }
    let (parts, body) = req.into_parts();
    let bytes = body
        .collect()
        .await
        .map_err(|e| Box::new(e) as BoxError)?
        .to_bytes();
    Ok(server::handle(&shared, Request::from_parts(parts, bytes)).await)
}

/// A kube client whose requests go straight to the handler.
pub(crate) fn client(shared: Arc<Shared>) -> kube::Client {
    let service = tower::service_fn(move |req| call(shared.clone(), req));
    kube::Client::new(service, "default")
}
