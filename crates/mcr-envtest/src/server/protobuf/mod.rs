//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded to JSON.
//!
//! kubectl's imperative generators (`kubectl create configmap|secret|namespace|serviceaccount|
//! deployment`) send their object as protobuf. The body is the 4-byte magic `k8s\0` followed by
//! a `runtime.Unknown` message (`typeMeta = 1 {apiVersion = 1, kind = 2}`, `raw = 2`,
//! `contentEncoding = 3`, `contentType = 4`) whose `raw` holds the object's own message.
//! [`decode`] turns that into the `serde_json::Value` the JSON path would have parsed, so the
//! rest of the server never sees protobuf. Responses stay JSON, which kubectl accepts.
//!
//! Supported kinds: `v1` ConfigMap, Secret, Namespace, ServiceAccount and `apps/v1` Deployment
//! (the fields kubectl's generators fill, see [`schema`]); any other kind is a 415 that points
//! to `kubectl create -f` / `kubectl apply`. Malformed input is a 400, never a panic.

use serde_json::Value;

use crate::engine::ApiError;

mod convert;
mod schema;
mod wire;

#[cfg(test)]
mod tests;

use wire::{Fields, WireValue};

/// The media type of Kubernetes protobuf bodies.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("the protobuf body does not start with the Kubernetes magic prefix")]
    NoMagic,
    /// The bytes are not a valid protobuf encoding.
    #[error("malformed protobuf body: {0}")]
    Malformed(&'static str),
    /// A known field holds a value of the wrong shape.
    #[error("invalid protobuf body: {message}.{field}: {why}")]
    Invalid {
        /// Protobuf message name.
        message: &'static str,
        /// JSON field name.
        field: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// The envelope names no kind.
    #[error("the protobuf body names no kind")]
    NoKind,
    /// The envelope carries a kind this server cannot decode.
    #[error(
        "protobuf bodies are decoded only for v1 ConfigMap, Secret, Namespace, ServiceAccount, apps/v1 Deployment and authentication.k8s.io/v1 TokenRequest, not {kind} ({api_version}): send JSON or YAML instead, e.g. `kubectl create -f` or `kubectl apply -f`"
    )]
    UnsupportedKind {
        /// `apiVersion` from the envelope.
        api_version: String,
        /// `kind` from the envelope.
        kind: String,
    },
    /// The envelope's `raw` is compressed or not protobuf.
    #[error("unsupported protobuf envelope: {0}")]
    UnsupportedEnvelope(String),
}

impl From<ProtobufError> for ApiError {
    fn from(err: ProtobufError) -> Self {
        match err {
            ProtobufError::UnsupportedKind { .. } | ProtobufError::UnsupportedEnvelope(_) => {
                ApiError::new(415, "UnsupportedMediaType", err.to_string())
            }
            _ => ApiError::bad_request(err.to_string()),
        }
    }
}

/// Decodes a Kubernetes protobuf body into the JSON object it encodes, with `apiVersion` and
/// `kind` set from the envelope.
///
/// ```ignore
/// let object = protobuf::decode(&body)?; // body from `kubectl create configmap`
/// assert_eq!(object["kind"], "ConfigMap");
/// ```
pub(crate) fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let unknown = Unknown::parse(envelope)?;
    if !unknown.content_encoding.is_empty() {
        return Err(ProtobufError::UnsupportedEnvelope(format!(
            "content encoding {:?}",
            unknown.content_encoding
        )));
    }
    if !unknown.content_type.is_empty() && unknown.content_type != MEDIA_TYPE {
        return Err(ProtobufError::UnsupportedEnvelope(format!(
            "content type {:?}",
            unknown.content_type
        )));
    }
    if unknown.kind.is_empty() {
        return Err(ProtobufError::NoKind);
    }
    let message = schema::lookup(&unknown.api_version, &unknown.kind).ok_or_else(|| {
        ProtobufError::UnsupportedKind {
            api_version: unknown.api_version.clone(),
            kind: unknown.kind.clone(),
        }
    })?;
    let mut object = convert::message(message, unknown.raw)?;
    object.insert("apiVersion".into(), Value::String(unknown.api_version));
    object.insert("kind".into(), Value::String(unknown.kind));
    tracing::debug!(kind = message.name, "decoded a protobuf body");
    Ok(Value::Object(object))
}

/// `runtime.Unknown`, the envelope around the object's bytes.
#[derive(Debug, Default)]
struct Unknown<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
    content_type: String,
}

impl<'a> Unknown<'a> {
    fn parse(buf: &'a [u8]) -> Result<Self, ProtobufError> {
        let mut unknown = Unknown::default();
        let mut fields = Fields::new(buf);
        while let Some((number, value)) = fields.next_field()? {
            match number {
                1 => {
                    let mut type_meta = Fields::new(envelope_bytes("typeMeta", value)?);
                    while let Some((number, value)) = type_meta.next_field()? {
                        match number {
                            1 => unknown.api_version = envelope_string("apiVersion", value)?,
                            2 => unknown.kind = envelope_string("kind", value)?,
                            _ => {}
                        }
                    }
                }
                2 => unknown.raw = envelope_bytes("raw", value)?,
                3 => unknown.content_encoding = envelope_string("contentEncoding", value)?,
                4 => unknown.content_type = envelope_string("contentType", value)?,
                _ => {}
            }
        }
        Ok(unknown)
    }
}

fn envelope_bytes<'a>(
    field: &'static str,
    value: WireValue<'a>,
) -> Result<&'a [u8], ProtobufError> {
    match value {
        WireValue::Bytes(buf) => Ok(buf),
        _ => Err(ProtobufError::Invalid {
            message: "Unknown",
            field,
            why: "unexpected wire type",
        }),
    }
}

fn envelope_string(field: &'static str, value: WireValue<'_>) -> Result<String, ProtobufError> {
    let buf = envelope_bytes(field, value)?;
    std::str::from_utf8(buf)
        .map(str::to_string)
        .map_err(|_| ProtobufError::Invalid {
            message: "Unknown",
            field,
            why: "string is not UTF-8",
        })
}
