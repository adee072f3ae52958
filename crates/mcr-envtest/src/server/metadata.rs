//! Content negotiation: the `Accept` header picks full objects or metadata only.
//!
//! A client asks for metadata only with
//! `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (objects, watch
//! events) or `...;as=PartialObjectMetadataList;...` (lists), as kube's `Api::get_metadata`,
//! `list_metadata` and `watch_metadata` do. As on a real API server:
//! - the clauses are tried in order and the first one the server can produce wins; a
//!   conversion (`as=`, `g=`, `v=`) is producible when it names `Table`, `PartialObjectMetadata`
//!   or `PartialObjectMetadataList` in `meta.k8s.io/v1` or `v1beta1` (`Table` is answered with
//!   full objects: it is not emulated); JSON is written whatever JSON-compatible type won;
//! - the conversion happens when the response is encoded, so it applies to every verb that
//!   returns an object or a list (writes included; a `Status` passes unchanged), and asking
//!   for the wrong one of the two (an object as a list or the reverse) is 406 NotAcceptable
//!   even when a later clause would have fitted: the choice is made before the server knows
//!   what it will return;
//! - on a watch each event's object is converted, `BOOKMARK`s included; `ERROR` events carry a
//!   `Status` and stay as they are.

use futures::StreamExt;
use http::{HeaderMap, header};
use serde_json::{Value, json};

use crate::engine::{ApiError, WatchEvent, WatchEventType, WatchStream};

const GROUP: &str = "meta.k8s.io";
const OBJECT: &str = "PartialObjectMetadata";
const LIST: &str = "PartialObjectMetadataList";

/// What the response body is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Output {
    /// The objects as stored (also what `as=Table` gets).
    Full,
    /// `PartialObjectMetadata` of `meta.k8s.io/<version>`.
    Metadata(&'static str),
    /// `PartialObjectMetadataList` of `meta.k8s.io/<version>`.
    MetadataList(&'static str),
}

impl Output {
    /// Picks the first `Accept` clause the server can produce; no header means full objects.
    pub(super) fn negotiate(headers: &HeaderMap) -> Result<Output, ApiError> {
        let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
            return Ok(Output::Full);
        };
        accept.split(',').find_map(clause).ok_or_else(|| {
            not_acceptable(format!(
                "only application/json (full objects, or metadata only with \
                 as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1) is served, not {accept:?}"
            ))
        })
    }

    /// Converts a response document; a `Status` passes unchanged.
    pub(super) fn encode(self, value: Value) -> Result<Value, ApiError> {
        if self == Output::Full || is_status(&value) {
            return Ok(value);
        }
        match (self, is_list(&value)) {
            (Output::Metadata(v), false) => Ok(partial(&value, v)),
            (Output::MetadataList(v), true) => Ok(partial_list(&value, v)),
            (Output::Metadata(_), true) => Err(not_acceptable(format!(
                "you requested {OBJECT}, but the requested object is a list ({})",
                kind(&value)
            ))),
            _ => Err(not_acceptable(format!(
                "you requested {LIST}, but the requested object is not a list ({})",
                kind(&value)
            ))),
        }
    }

    /// Converts the objects of a watch's events. A watch streams objects, never lists: a list
    /// conversion is refused up front (a real server sends an empty stream instead).
    pub(super) fn watch(self, events: WatchStream) -> Result<WatchStream, ApiError> {
        match self {
            Output::Full => Ok(events),
            Output::MetadataList(_) => Err(not_acceptable(format!(
                "you requested {LIST}, but a watch streams objects: use {OBJECT}"
            ))),
            Output::Metadata(version) => Ok(events
                .map(move |event| match event.kind() {
                    WatchEventType::Error => event,
                    kind => WatchEvent::new(kind, partial(&event.object(), version).into()),
                })
                .boxed()),
        }
    }
}

/// One `Accept` clause: `type/subtype;param=value;...`, `None` when the server cannot produce it.
fn clause(range: &str) -> Option<Output> {
    let mut parts = range.split(';');
    let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let json_like = media.is_empty()
        || media == "*/*"
        || media == "application/*"
        || media.ends_with("json")
        || media.ends_with("yaml");
    if !json_like {
        return None;
    }
    let (mut kind, mut group, mut version) = (None, None, None);
    for param in parts {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        let value = Some(value.trim().trim_matches('"'));
        match key.trim().to_ascii_lowercase().as_str() {
            "as" => kind = value,
            "g" => group = value,
            "v" => version = value,
            _ => {}
        }
    }
    if (kind, group, version) == (None, None, None) {
        return Some(Output::Full);
    }
    let version = match version {
        Some("v1") => "v1",
        Some("v1beta1") => "v1beta1",
        _ => return None,
    };
    match (group?, kind?) {
        (GROUP, "Table") => Some(Output::Full),
        (GROUP, OBJECT) => Some(Output::Metadata(version)),
        (GROUP, LIST) => Some(Output::MetadataList(version)),
        _ => None,
    }
}

fn not_acceptable(message: String) -> ApiError {
    ApiError::new(406, "NotAcceptable", message)
}

fn kind(value: &Value) -> &str {
    value["kind"].as_str().unwrap_or_default()
}

fn is_status(value: &Value) -> bool {
    kind(value) == "Status" && value["apiVersion"] == "v1"
}

fn is_list(value: &Value) -> bool {
    kind(value).ends_with("List") && value["items"].is_array()
}

/// The `PartialObjectMetadata` of an object: its whole `metadata`, nothing else.
fn partial(object: &Value, version: &str) -> Value {
    json!({
        "kind": OBJECT,
        "apiVersion": format!("{GROUP}/{version}"),
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The `PartialObjectMetadataList` of a list: its list metadata (`resourceVersion`,
/// `continue`, `remainingItemCount`) and each item as a `PartialObjectMetadata`.
fn partial_list(list: &Value, version: &str) -> Value {
    let items: Vec<Value> = list["items"]
        .as_array()
        .map(|items| items.iter().map(|item| partial(item, version)).collect())
        .unwrap_or_default();
    json!({
        "kind": LIST,
        "apiVersion": format!("{GROUP}/{version}"),
        "metadata": list.get("metadata").cloned().unwrap_or_else(|| json!({})),
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn negotiate(accept: &'static str) -> Result<Output, ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
        Output::negotiate(&headers)
    }

    #[test]
    fn accept_clauses() {
        // What kube's get_metadata/watch_metadata and list_metadata send.
        let object = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(negotiate(object).unwrap(), Output::Metadata("v1"));
        assert_eq!(negotiate(list).unwrap(), Output::MetadataList("v1"));
        let spaced =
            "application/json; as=PartialObjectMetadata; g=meta.k8s.io; v=v1beta1; pretty=1";
        assert_eq!(negotiate(spaced).unwrap(), Output::Metadata("v1beta1"));
        assert_eq!(
            negotiate("*/*;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").unwrap(),
            Output::MetadataList("v1")
        );
        // The first producible clause wins.
        let first = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(negotiate(first).unwrap(), Output::Metadata("v1"));
        let fallback = "application/json;as=Foo;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(negotiate(fallback).unwrap(), Output::Full);
        let table = "application/json;as=Table;g=meta.k8s.io;v=v1";
        assert_eq!(negotiate(table).unwrap(), Output::Full);
        // Not producible: unknown kind, missing or foreign group/version, protobuf only.
        for refused in [
            "application/json;as=Foo;g=meta.k8s.io;v=v1",
            "application/json;as=PartialObjectMetadata",
            "application/json;as=PartialObjectMetadata;g=apps;v=v1",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2",
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ] {
            assert_eq!(negotiate(refused).unwrap_err().code, 406, "{refused}");
        }
    }

    #[test]
    fn encoding() {
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "y"}},
            "data": {"k": "v"}});
        let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "9", "continue": "c", "remainingItemCount": 1},
            "items": [cm.clone()]});
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});

        assert_eq!(Output::Full.encode(cm.clone()).unwrap(), cm);
        let meta = Output::Metadata("v1").encode(cm.clone()).unwrap();
        assert_eq!(
            meta,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": cm["metadata"]})
        );
        let metas = Output::MetadataList("v1").encode(list.clone()).unwrap();
        assert_eq!(metas["kind"], "PartialObjectMetadataList");
        assert_eq!(metas["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(metas["metadata"], list["metadata"]);
        assert_eq!(metas["items"], json!([meta]));

        assert_eq!(Output::Metadata("v1").encode(list).unwrap_err().code, 406);
        assert_eq!(Output::MetadataList("v1").encode(cm).unwrap_err().code, 406);
        assert_eq!(
            Output::Metadata("v1").encode(status.clone()).unwrap(),
            status
        );
    }
}
