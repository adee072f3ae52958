//! Raw requests through a kube-rs client, for what its typed API does not show: `Warning`
//! headers, exact status codes and bodies of refused writes. Each test binary that includes
//! it uses part of it.
#![allow(dead_code)]

use http::Request;
use serde_json::Value;

/// The answer to one request: status, `Warning` headers (in order), body (`null` if not JSON).
pub struct Answer {
    pub code: u16,
    pub warnings: Vec<String>,
    pub body: Value,
}

/// Sends `body` as JSON (`Content-Type: ct`) to `path`.
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    ct: &str,
    body: Value,
) -> Answer {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", ct)
        .body(serde_json::to_vec(&body).unwrap().into())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Answer {
        code,
        warnings,
        body,
    }
}

/// `POST`s a JSON object.
pub async fn post(client: &kube::Client, path: &str, body: Value) -> Answer {
    send(client, "POST", path, "application/json", body).await
}

/// `GET`s a path.
pub async fn get(client: &kube::Client, path: &str) -> Answer {
    send(client, "GET", path, "application/json", Value::Null).await
}
