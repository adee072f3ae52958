//! How stored objects keep `metadata.managedFields`: packed into the text of its JSON list,
//! one string instead of nested maps.
//!
//! A `serde_json::Map` is a B-tree whose smallest node holds eleven slots (about 630 bytes,
//! even for one entry), and a `fieldsV1` tree is maps all the way down, so the ownership
//! records were about half of every stored object (a ConfigMap with one key: about 2.4 of 5.5
//! KiB). [`pack`] runs as [`Store::put`](super::state::Store::put) stores an object;
//! [`unpacked`] gives the object back as it was written, for every reader: `Store::get`, the
//! answers (`registry::present`) and watch events. Parsing the text gives back the very list
//! that was packed (serde_json keeps map keys sorted), so what a client reads is unchanged to
//! the byte.
//!
//! Only the store holds packed objects: everything else sees `managedFields` as a list.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

/// Replaces `metadata.managedFields` (a list) with the text of its JSON; anything else is left
/// as it is, so packing twice changes nothing.
pub(crate) fn pack(obj: &mut Value) {
    let Some(slot) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("managedFields"))
        .filter(|v| v.is_array())
    else {
        return;
    };
    // Serializing a `Value` cannot fail; if it did, the object would stay unpacked.
    if let Ok(mut text) = serde_json::to_string(slot) {
        // The serializer's buffer grows by doubling; the store keeps the text for the object's
        // life.
        text.shrink_to_fit();
        *slot = Value::String(text);
    }
}

/// `obj` with `metadata.managedFields` unpacked: borrowed when there is nothing to unpack.
pub(crate) fn unpacked(obj: &Value) -> Cow<'_, Value> {
    let Some(Value::String(text)) = obj.get("metadata").and_then(|m| m.get("managedFields")) else {
        return Cow::Borrowed(obj);
    };
    let Ok(list) = serde_json::from_str::<Value>(text) else {
        return Cow::Borrowed(obj);
    };
    let mut out = obj.clone();
    if let Some(slot) = out.pointer_mut("/metadata/managedFields") {
        *slot = list;
    }
    Cow::Owned(out)
}

/// [`unpacked`] for a shared object: the same `Arc` when there is nothing to unpack.
pub(crate) fn unpacked_arc(obj: &Arc<Value>) -> Arc<Value> {
    match unpacked(obj) {
        Cow::Borrowed(_) => Arc::clone(obj),
        Cow::Owned(out) => Arc::new(out),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn packing_keeps_every_byte_of_the_object() {
        let obj = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "a",
                "managedFields": [
                    {"manager": "m", "operation": "Apply", "apiVersion": "v1", "time": "2026-11-27T00:00:00Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:k": {}}}},
                    {"manager": "n", "operation": "Update", "apiVersion": "v1",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:x": {}}}}, "subresource": "status"},
                ],
            },
            "data": {"k": "v"},
        });
        let mut packed = obj.clone();
        pack(&mut packed);
        assert!(packed["metadata"]["managedFields"].is_string(), "{packed}");
        assert_eq!(packed["data"], obj["data"]);
        let mut twice = packed.clone();
        pack(&mut twice);
        assert_eq!(twice, packed, "packing a packed object changes nothing");
        let back = unpacked(&packed);
        assert_eq!(*back, obj);
        assert_eq!(
            serde_json::to_vec(&*back).unwrap(),
            serde_json::to_vec(&obj).unwrap()
        );
    }

    #[test]
    fn the_store_keeps_managed_fields_packed_and_every_reader_sees_them_unpacked() {
        use crate::engine::{Engine, WriteOptions};
        let engine = Engine::new();
        let cms = engine.resolve("", "v1", "configmaps").unwrap();
        let opts = WriteOptions {
            field_manager: Some("me".into()),
            ..WriteOptions::default()
        };
        let body = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let created = engine.create(&cms, Some("default"), body, &opts).unwrap();
        assert_eq!(created["metadata"]["managedFields"][0]["manager"], "me");
        let key = ("default".to_string(), "a".to_string());
        {
            let store = engine.inner.read();
            let kept = store.peek("configmaps", &key).unwrap();
            assert!(kept["metadata"]["managedFields"].is_string(), "{kept}");
            assert_eq!(*store.get("configmaps", &key).unwrap(), created);
        }
        assert_eq!(engine.get(&cms, Some("default"), "a").unwrap(), created);
        let list = engine
            .list(&cms, Some("default"), &Default::default())
            .unwrap();
        assert_eq!(
            list["items"][0]["metadata"]["managedFields"],
            created["metadata"]["managedFields"]
        );
    }

    #[test]
    fn objects_without_managed_fields_are_borrowed() {
        let obj = json!({"metadata": {"name": "a"}});
        let mut packed = obj.clone();
        pack(&mut packed);
        assert_eq!(packed, obj);
        assert!(matches!(unpacked(&packed), Cow::Borrowed(_)));
    }
}
