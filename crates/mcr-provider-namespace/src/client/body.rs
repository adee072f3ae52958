//! Rewriting `metadata.namespace` in JSON request and response bodies.

use serde_json::Value;

/// Sets `metadata.namespace` of one object to `to` where it is `from`. True if changed.
fn rewrite_object(obj: &mut Value, from: &str, to: &str) -> bool {
    match obj.pointer_mut("/metadata/namespace") {
        Some(ns) if ns.as_str() == Some(from) => {
            *ns = Value::String(to.to_owned());
            true
        }
        _ => false,
    }
}

/// Rewrites an object, or every item of a list (`items`), from namespace `from` to `to`.
/// True if anything changed.
pub(crate) fn rewrite_value(value: &mut Value, from: &str, to: &str) -> bool {
    let mut changed = rewrite_object(value, from, to);
    if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            changed |= rewrite_object(item, from, to);
        }
    }
    changed
}

/// The JSON `bytes` with namespaces rewritten, or `None` if they are not a JSON object or
/// nothing changed (then the original bytes are used unchanged).
pub(crate) fn rewrite_bytes(bytes: &[u8], from: &str, to: &str) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(bytes).ok()?;
    if !value.is_object() || !rewrite_value(&mut value, from, to) {
        return None;
    }
    serde_json::to_vec(&value).ok()
}

/// One line of a watch stream (`{"type": …, "object": {…}}`) with the object's namespace
/// rewritten, or `None` if unchanged.
pub(crate) fn rewrite_watch_line(line: &[u8], from: &str, to: &str) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(line).ok()?;
    let object = value.get_mut("object")?;
    if !rewrite_value(object, from, to) {
        return None;
    }
    serde_json::to_vec(&value).ok()
}

/// Shows the real Namespace object `real` as `default`: renames it. True if changed.
pub(crate) fn rename_namespace(value: &mut Value, real: &str, to: &str) -> bool {
    match value.pointer_mut("/metadata/name") {
        Some(name) if name.as_str() == Some(real) => {
            *name = Value::String(to.to_owned());
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_and_lists() {
        let mut obj = json!({"metadata": {"name": "a", "namespace": "team-a"}});
        assert!(rewrite_value(&mut obj, "team-a", "default"));
        assert_eq!(obj["metadata"]["namespace"], "default");

        let mut list = json!({"kind": "ConfigMapList", "metadata": {}, "items": [
            {"metadata": {"name": "a", "namespace": "team-a"}},
            {"metadata": {"name": "b", "namespace": "other"}},
        ]});
        assert!(rewrite_value(&mut list, "team-a", "default"));
        assert_eq!(list["items"][0]["metadata"]["namespace"], "default");
        assert_eq!(list["items"][1]["metadata"]["namespace"], "other");
    }

    #[test]
    fn bytes_unchanged_or_not_json() {
        assert!(rewrite_bytes(b"not json", "a", "b").is_none());
        assert!(rewrite_bytes(br#"{"metadata":{"namespace":"x"}}"#, "a", "b").is_none());
        assert!(rewrite_bytes(br#"[{"op":"add"}]"#, "a", "b").is_none());
        let out = rewrite_bytes(br#"{"metadata":{"namespace":"a"}}"#, "a", "b").unwrap();
        assert_eq!(out, br#"{"metadata":{"namespace":"b"}}"#);
    }

    #[test]
    fn watch_lines() {
        let line = br#"{"type":"ADDED","object":{"metadata":{"name":"x","namespace":"real"}}}"#;
        let out = rewrite_watch_line(line, "real", "default").unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["object"]["metadata"]["namespace"], "default");
        assert_eq!(v["type"], "ADDED");
        let bookmark = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}"#;
        assert!(rewrite_watch_line(bookmark, "real", "default").is_none());
    }

    #[test]
    fn namespace_rename() {
        let mut ns = json!({"metadata": {"name": "team-a"}});
        assert!(rename_namespace(&mut ns, "team-a", "default"));
        assert_eq!(ns["metadata"]["name"], "default");
        assert!(!rename_namespace(&mut ns, "team-a", "default"));
    }
}
