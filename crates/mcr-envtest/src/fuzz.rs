//! Entry points for the cargo-fuzz targets in the repository's `fuzz/` directory. Not a stable
//! API: each function feeds outside input to one parser and discards the result (errors are
//! expected; panics, hangs and crashes are the findings).

use serde_json::{Value, json};

use crate::engine::PatchType;
use crate::engine::selector::Selectors;
use crate::server::protobuf;
use crate::server::query::Query;

/// Parses a request query string and every option the server derives from it; `body` is a
/// `DeleteOptions` body.
pub fn query(raw: &str, body: &[u8]) {
    let q = Query::parse(Some(raw));
    let _ = q.is_watch();
    let _ = q.list_params();
    let _ = q.watch_params();
    let _ = q.write_options("PatchOptions");
    let _ = q.delete_options(body);
}

/// Parses a label and a field selector and matches them against a small object.
pub fn selectors(label: &str, field: &str) {
    let labels = crate::engine::selector::Labels {
        group: "",
        kind: "Pod",
        custom: None,
    };
    if let Ok(s) = Selectors::parse(Some(label), Some(field), &labels) {
        let obj = json!({
            "metadata": {
                "name": "n", "namespace": "ns",
                "labels": { "app": "web", "tier": "front", "a.b/c": "d" },
            }
        });
        let _ = s.matches(&obj);
        let _ = s.is_empty();
    }
}

/// Decodes a Kubernetes protobuf body.
pub fn protobuf(body: &[u8]) {
    let _ = protobuf::decode(body);
}

/// Applies a merge (`kind % 3 == 0`), JSON (`1`) or strategic (`2`) patch to `current`.
pub fn patch(current: &Value, kind: u8, body: &[u8]) {
    let patch_type = match kind % 3 {
        0 => PatchType::Merge,
        1 => PatchType::Json,
        _ => PatchType::Strategic,
    };
    let schema = crate::engine::schema::builtin("apps", "v1", "Deployment");
    let _ = crate::engine::patch::apply_patch(current, patch_type, body, &schema);
}
