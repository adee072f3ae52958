//! The manager's HTTP endpoint: `/metrics`, `/healthz`, `/readyz`.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::{body::Incoming, service::service_fn};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::Manager;

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    res
}

/// Answers one request.
pub(crate) fn route(mgr: &Manager, path: &str) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    match path {
        "/metrics" => respond(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            mgr.metrics().encode(),
        ),
        "/healthz" | "/livez" => respond(StatusCode::OK, TEXT, "ok\n".to_owned()),
        "/readyz" => {
            let pending = mgr.unsynced_clusters();
            if pending.is_empty() {
                respond(StatusCode::OK, TEXT, "ok\n".to_owned())
            } else {
                let names: Vec<String> = pending
                    .iter()
                    .map(|n| {
                        if n.is_host() {
                            "<host>".to_owned()
                        } else {
                            n.to_string()
                        }
                    })
                    .collect();
                respond(
                    StatusCode::SERVICE_UNAVAILABLE,
                    TEXT,
                    format!("caches not synced: {}\n", names.join(", ")),
                )
            }
        }
        _ => respond(StatusCode::NOT_FOUND, TEXT, "not found\n".to_owned()),
    }
}

/// Serves until `token` fires.
pub(crate) async fn serve(listener: TcpListener, mgr: Manager, token: CancellationToken) {
    loop {
        let (stream, peer) = tokio::select! {
            () = token.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(err) => {
                    warn!(error = %err, "metrics endpoint: accept failed");
                    continue;
                }
            },
        };
        let mgr = mgr.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let res = route(&mgr, req.uri().path());
                async move { Ok::<_, Infallible>(res) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                res = conn => if let Err(err) = res {
                    debug!(%peer, error = %err, "metrics endpoint: connection ended");
                },
                () = token.cancelled() => {}
            }
        });
    }
}
