//! Responses: JSON documents, `Status` errors and streamed NDJSON watch bodies.

use std::convert::Infallible;

use bytes::Bytes;
use futures::StreamExt;
use http::{Response, StatusCode, header};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use serde_json::Value;
use tokio::sync::watch;

use crate::engine::{ApiError, WatchEvent, WatchEventType, WatchStream};
use crate::faults::{Link, Mode};

/// The response body type of both transports.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// A JSON response with the given status code.
pub(crate) fn json(code: u16, value: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Response::new(full(bytes));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A response of raw bytes (the caller sets their content type).
pub(crate) fn bytes(code: u16, bytes: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(full(bytes));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    response
}

/// An error as a `v1 Status` response.
pub(crate) fn error(err: &ApiError) -> Response<Body> {
    let mut response = json(err.code, &err.to_status());
    if response.status().is_success() {
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    }
    response
}

/// A plain-text response (health endpoints).
pub(crate) fn text(body: &'static str) -> Response<Body> {
    let mut response = Response::new(full(Bytes::from_static(body.as_bytes())));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}

/// The error a rule injects: a `Status` with a reason fitting the code.
pub(crate) fn injected(code: u16) -> ApiError {
    let reason = match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    ApiError::new(
        code,
        reason,
        format!("injected fault (mcr-envtest): {reason}"),
    )
}

/// A watch response that carries a single `ERROR` event (how a real API server reports 410).
pub(crate) fn watch_error(err: &ApiError) -> Response<Body> {
    let event = WatchEvent::new(WatchEventType::Error, std::sync::Arc::new(err.to_status()));
    let mut response = Response::new(full(event.to_line()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A streamed watch: one body frame per event line, ending when the engine ends the stream
/// or the link goes down; events pause while the link hangs.
pub(crate) fn watch_stream(events: WatchStream, link: watch::Receiver<Link>) -> Response<Body> {
    let epoch = link.borrow().epoch;
    let state = WatchState {
        events,
        link,
        epoch,
    };
    let frames = futures::stream::unfold(state, |mut state| async move {
        let line = state.next_line().await?;
        Some((Ok::<_, Infallible>(Frame::data(line)), state))
    });
    let mut response = Response::new(StreamBody::new(frames).boxed_unsync());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

struct WatchState {
    events: WatchStream,
    link: watch::Receiver<Link>,
    epoch: u64,
}

impl WatchState {
    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            let link = *self.link.borrow_and_update();
            if link.epoch != self.epoch || link.mode == Mode::Down {
                return None;
            }
            if link.mode == Mode::Hang {
                self.link.changed().await.ok()?;
                continue;
            }
            tokio::select! {
                event = self.events.next() => return event.map(|e| e.to_line()),
                changed = self.link.changed() => changed.ok()?,
            }
        }
    }
}
