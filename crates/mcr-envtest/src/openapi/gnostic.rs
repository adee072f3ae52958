//! A Swagger 2.0 document as the protobuf of gnostic's `openapi.v2.Document`
//! (`github.com/google/gnostic-models/openapiv2/OpenAPIv2.proto`), which is what kubectl
//! asks `/openapi/v2` for (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`).
//!
//! Only the parts the emulator's documents use are written: the document's info, paths,
//! definitions and security; schemas with every keyword of the proto; `x-` extensions as
//! `NamedAny`s whose `yaml` is the value's JSON text (JSON is YAML).

use serde_json::{Map, Value};

/// The media type kubectl asks for.
pub(crate) const MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The media type kube-apiserver answers with.
pub(crate) const ANSWER_MEDIA_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.tag(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn message(&mut self, field: u32, m: Message) {
        self.bytes(field, &m.0);
    }

    fn boolean(&mut self, field: u32, b: bool) {
        if b {
            self.tag(field, 0);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.tag(field, 0);
            self.varint(v as u64);
        }
    }

    fn double(&mut self, field: u32, v: f64) {
        if v != 0.0 {
            self.tag(field, 1);
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn strings(&mut self, field: u32, v: &Value) {
        for s in v.as_array().into_iter().flatten().filter_map(Value::as_str) {
            self.bytes(field, s.as_bytes());
        }
    }
}

fn text<'a>(v: &'a Map<String, Value>, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn flag(v: &Map<String, Value>, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or_default()
}

/// `Any { yaml = 2 }`.
fn any(v: &Value) -> Message {
    let mut m = Message::default();
    m.string(2, &format!("{v}\n"));
    m
}

/// The `x-` keys of an object as `NamedAny`s at `field`.
fn extensions(m: &mut Message, field: u32, v: &Map<String, Value>) {
    for (k, v) in v.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Message::default();
        named.string(1, k);
        named.message(2, any(v));
        m.message(field, named);
    }
}

/// `Schema`.
fn schema(v: &Value) -> Message {
    let mut m = Message::default();
    let Some(s) = v.as_object() else {
        return m;
    };
    m.string(1, text(s, "$ref"));
    m.string(2, text(s, "format"));
    m.string(3, text(s, "title"));
    m.string(4, text(s, "description"));
    if let Some(d) = s.get("default") {
        m.message(5, any(d));
    }
    let num = |k: &str| s.get(k).and_then(Value::as_f64).unwrap_or_default();
    let int = |k: &str| s.get(k).and_then(Value::as_i64).unwrap_or_default();
    m.double(6, num("multipleOf"));
    m.double(7, num("maximum"));
    m.boolean(8, flag(s, "exclusiveMaximum"));
    m.double(9, num("minimum"));
    m.boolean(10, flag(s, "exclusiveMinimum"));
    m.int64(11, int("maxLength"));
    m.int64(12, int("minLength"));
    m.string(13, text(s, "pattern"));
    m.int64(14, int("maxItems"));
    m.int64(15, int("minItems"));
    m.boolean(16, flag(s, "uniqueItems"));
    m.int64(17, int("maxProperties"));
    m.int64(18, int("minProperties"));
    if let Some(required) = s.get("required") {
        m.strings(19, required);
    }
    for e in s
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, any(e));
    }
    match s.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Message::default();
            item.tag(2, 0);
            item.varint(u64::from(*b));
            m.message(21, item);
        }
        Some(a @ Value::Object(_)) => {
            let mut item = Message::default();
            item.message(1, schema(a));
            m.message(21, item);
        }
        _ => {}
    }
    match s.get("type") {
        Some(Value::String(t)) => {
            let mut item = Message::default();
            item.string(1, t);
            m.message(22, item);
        }
        Some(list @ Value::Array(_)) => {
            let mut item = Message::default();
            item.strings(1, list);
            m.message(22, item);
        }
        _ => {}
    }
    match s.get("items") {
        Some(Value::Array(items)) => {
            let mut item = Message::default();
            for i in items {
                item.message(1, schema(i));
            }
            m.message(23, item);
        }
        Some(i @ Value::Object(_)) => {
            let mut item = Message::default();
            item.message(1, schema(i));
            m.message(23, item);
        }
        _ => {}
    }
    for a in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, schema(a));
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        m.message(25, named_schemas(props));
    }
    m.string(26, text(s, "discriminator"));
    m.boolean(27, flag(s, "readOnly"));
    if let Some(e) = s.get("example") {
        m.message(30, any(e));
    }
    extensions(&mut m, 31, s);
    m
}

/// `Properties` / `Definitions`: `repeated NamedSchema additional_properties = 1`.
fn named_schemas(map: &Map<String, Value>) -> Message {
    let mut m = Message::default();
    for (name, s) in map {
        let mut named = Message::default();
        named.string(1, name);
        named.message(2, schema(s));
        m.message(1, named);
    }
    m
}

/// `ParametersItem`.
fn parameter(p: &Map<String, Value>) -> Message {
    let mut param = Message::default();
    if text(p, "in") == "body" {
        let mut body = Message::default();
        body.string(1, text(p, "description"));
        body.string(2, text(p, "name"));
        body.string(3, "body");
        body.boolean(4, flag(p, "required"));
        if let Some(s) = p.get("schema") {
            body.message(5, schema(s));
        }
        param.message(1, body);
    } else {
        let mut sub = Message::default();
        let path = text(p, "in") == "path";
        sub.boolean(1, flag(p, "required"));
        sub.string(2, text(p, "in"));
        sub.string(3, text(p, "description"));
        sub.string(4, text(p, "name"));
        // Query parameters have `allow_empty_value` at 5; path parameters do not.
        let shift = u32::from(!path);
        sub.string(5 + shift, text(p, "type"));
        sub.string(6 + shift, text(p, "format"));
        sub.boolean(19 + shift, flag(p, "uniqueItems"));
        let mut non_body = Message::default();
        non_body.message(if path { 4 } else { 3 }, sub);
        param.message(2, non_body);
    }
    let mut item = Message::default();
    item.message(1, param);
    item
}

/// `Operation`.
fn operation(op: &Map<String, Value>) -> Message {
    let mut m = Message::default();
    if let Some(tags) = op.get("tags") {
        m.strings(1, tags);
    }
    m.string(3, text(op, "description"));
    m.string(5, text(op, "operationId"));
    if let Some(p) = op.get("produces") {
        m.strings(6, p);
    }
    if let Some(c) = op.get("consumes") {
        m.strings(7, c);
    }
    for p in op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
    {
        m.message(8, parameter(p));
    }
    let mut responses = Message::default();
    for (code, r) in op
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut response = Message::default();
        let r = r.as_object();
        response.string(1, r.map(|r| text(r, "description")).unwrap_or_default());
        if let Some(s) = r.and_then(|r| r.get("schema")).filter(|s| s.is_object()) {
            let mut item = Message::default();
            item.message(1, schema(s));
            response.message(2, item);
        }
        let mut value = Message::default();
        value.message(1, response);
        let mut named = Message::default();
        named.string(1, code);
        named.message(2, value);
        responses.message(1, named);
    }
    m.message(9, responses);
    if let Some(s) = op.get("schemes") {
        m.strings(10, s);
    }
    extensions(&mut m, 13, op);
    m
}

/// The protobuf of a Swagger 2.0 document.
pub(crate) fn encode(doc: &Value) -> Vec<u8> {
    let mut m = Message::default();
    let Some(d) = doc.as_object() else {
        return m.0;
    };
    m.string(1, text(d, "swagger"));
    if let Some(info) = d.get("info").and_then(Value::as_object) {
        let mut i = Message::default();
        i.string(1, text(info, "title"));
        i.string(2, text(info, "version"));
        m.message(2, i);
    }
    let mut paths = Message::default();
    for (path, item) in d
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut p = Message::default();
        for (method, field) in [
            ("get", 2),
            ("put", 3),
            ("post", 4),
            ("delete", 5),
            ("options", 6),
            ("head", 7),
            ("patch", 8),
        ] {
            if let Some(op) = item.get(method).and_then(Value::as_object) {
                p.message(field, operation(op));
            }
        }
        let mut named = Message::default();
        named.string(1, path);
        named.message(2, p);
        paths.message(2, named);
    }
    m.message(8, paths);
    if let Some(defs) = d.get("definitions").and_then(Value::as_object) {
        m.message(9, named_schemas(defs));
    }
    for requirement in d
        .get("security")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
    {
        let mut r = Message::default();
        for (name, scopes) in requirement {
            let mut list = Message::default();
            list.strings(1, scopes);
            let mut named = Message::default();
            named.string(1, name);
            named.message(2, list);
            r.message(1, named);
        }
        m.message(12, r);
    }
    if let Some(defs) = d.get("securityDefinitions").and_then(Value::as_object) {
        let mut all = Message::default();
        for (name, def) in defs {
            let Some(def) = def.as_object() else {
                continue;
            };
            let mut key = Message::default();
            key.string(1, text(def, "type"));
            key.string(2, text(def, "name"));
            key.string(3, text(def, "in"));
            key.string(4, text(def, "description"));
            let mut item = Message::default();
            item.message(2, key);
            let mut named = Message::default();
            named.string(1, name);
            named.message(2, item);
            all.message(1, named);
        }
        m.message(13, all);
    }
    m.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_varints_and_nested_messages() {
        let doc = json!({"swagger": "2.0", "definitions": {"A": {"type": "object",
            "properties": {"x": {"type": "integer", "format": "int32"}},
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "A", "version": "v1"}]}}});
        let bytes = encode(&doc);
        // `swagger` is field 1 (tag 0x0a), three bytes long.
        assert_eq!(&bytes[..5], b"\x0a\x032.0");
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("x-kubernetes-group-version-kind"));
        assert!(text.contains("[{\"group\":\"\",\"kind\":\"A\",\"version\":\"v1\"}]\n"));
        let mut m = Message::default();
        m.varint(300);
        assert_eq!(m.0, [0xac, 0x02]);
    }
}
