//! The OpenAPI documents kube-apiserver serves, from the emulator's one schema source (the
//! table of [`crate::engine::schema::builtin`] for the built-in kinds, each CRD's
//! `openAPIV3Schema` for custom resources):
//!
//! - `/openapi/v3`: the index of group-version documents, and each document with its
//!   resources' paths (kubectl looks for a PATCH operation of the object's kind that takes
//!   `fieldValidation`, and leaves validation to the server when it finds one) and the
//!   schemas they use (`kubectl explain` reads them);
//! - `/openapi/v2`: every definition in one Swagger 2.0 document, as JSON or as the gnostic
//!   protobuf kubectl asks for ([`gnostic`]). kubectl validates the items of a `v1 List`
//!   against it and reads strategic merge keys from it for a client-side apply.
//!
//! Descriptions are left out (no prose is copied); a CRD's own descriptions are kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::engine::ResourceType;

pub(crate) mod gnostic;

/// A served custom resource type and its version's `openAPIV3Schema`.
pub(crate) struct Custom {
    /// The type.
    pub rt: ResourceType,
    /// Its schema, if the CRD gives one.
    pub schema: Option<Value>,
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";
const V3_REF: &str = "#/components/schemas/";
const V2_REF: &str = "#/definitions/";

/// Definitions whose group-version-kind list is written per document.
const PER_DOCUMENT: &[&str] = &["DeleteOptions", "WatchEvent"];

/// The built-in definitions (parsed from the table the first time a document is asked for).
fn builtin() -> &'static Map<String, Value> {
    static DEFS: OnceLock<Map<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let doc: Value =
            serde_json::from_str(crate::engine::schema::builtin::SOURCE).unwrap_or_default();
        match doc {
            Value::Object(mut m) => match m.remove("definitions") {
                Some(Value::Object(defs)) => defs,
                _ => Map::new(),
            },
            _ => Map::new(),
        }
    })
}

/// The Kubernetes release of the table, as documents name it (`1.36`).
fn release() -> String {
    let full = crate::discovery::GIT_VERSION.trim_start_matches('v');
    full.rsplit_once('.')
        .map(|(minor, _)| minor.to_string())
        .unwrap_or_else(|| full.to_string())
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// The definition name of a custom kind: the group's domain reversed, the version, the kind
/// (`widgets.example.com/v1 Widget` is `com.example.v1.Widget`).
fn custom_name(rt: &ResourceType, kind: &str) -> String {
    let mut parts: Vec<&str> = rt.group.split('.').collect();
    parts.reverse();
    format!("{}.{}.{kind}", parts.join("."), rt.version)
}

/// The definitions a schema refers to (`$ref`s anywhere in it).
fn refs(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Some(name) = v.as_str().and_then(|r| r.strip_prefix(V3_REF)) {
                        out.push(name.to_string());
                    }
                } else {
                    refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// `roots` and every built-in definition they refer to, directly or not.
fn closure(roots: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    let defs = builtin();
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = roots.into_iter().collect();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(def) = defs.get(&name) {
            refs(def, &mut todo);
        }
    }
    seen
}

/// Whether a built-in definition is a kind of this group-version.
fn of_group_version(def: &Value, group: &str, version: &str) -> bool {
    def["x-kubernetes-group-version-kind"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|g| g["group"] == group && g["version"] == version)
}

/// A built-in definition as a document holds it; `per_document` is the group-version-kind
/// list of `DeleteOptions`/`WatchEvent` (their kind filled in).
fn builtin_def(name: &str, per_document: &[(String, String)]) -> Option<Value> {
    let mut def = builtin().get(name)?.clone();
    if let Some(short) = name.strip_prefix(META)
        && PER_DOCUMENT.contains(&short)
        && let Some(map) = def.as_object_mut()
    {
        let list: Vec<Value> = per_document.iter().map(|(g, v)| gvk(g, v, short)).collect();
        map.insert("x-kubernetes-group-version-kind".into(), Value::Array(list));
    }
    Some(def)
}

/// A custom resource's schema as kube-apiserver publishes it in OpenAPI v3 (int-or-string
/// fields gain their `anyOf`).
fn custom_v3(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let v = match k.as_str() {
                    "properties" | "patternProperties" | "definitions" => Value::Object(
                        v.as_object()
                            .into_iter()
                            .flatten()
                            .map(|(k, v)| (k.clone(), custom_v3(v)))
                            .collect(),
                    ),
                    "items" | "additionalProperties" | "not" => custom_v3(v),
                    "allOf" | "anyOf" | "oneOf" => {
                        Value::Array(v.as_array().into_iter().flatten().map(custom_v3).collect())
                    }
                    _ => v.clone(),
                };
                out.insert(k.clone(), v);
            }
            if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                && !out.contains_key("anyOf")
            {
                out.insert(
                    "anyOf".into(),
                    json!([{"type": "integer"}, {"type": "string"}]),
                );
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The object and list definitions of a custom kind (OpenAPI v3).
fn custom_defs(custom: &Custom) -> Vec<(String, Value)> {
    let rt = &custom.rt;
    let mut object = match custom.schema.as_ref().map(custom_v3) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    object.insert("type".into(), json!("object"));
    let properties = object
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let mut props = properties;
    props.insert("apiVersion".into(), json!({"type": "string"}));
    props.insert("kind".into(), json!({"type": "string"}));
    props.insert(
        "metadata".into(),
        json!({"allOf": [{"$ref": format!("{V3_REF}{META}ObjectMeta")}]}),
    );
    object.insert("properties".into(), Value::Object(props));
    object.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([gvk(&rt.group, &rt.version, &rt.kind)]),
    );
    let list_kind = format!("{}List", rt.kind);
    let list = json!({
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": format!("{V3_REF}{}", custom_name(rt, &rt.kind))}},
            "kind": {"type": "string"},
            "metadata": {"allOf": [{"$ref": format!("{V3_REF}{META}ListMeta")}], "default": {}},
        },
        "x-kubernetes-group-version-kind": [gvk(&rt.group, &rt.version, &list_kind)],
    });
    vec![
        (custom_name(rt, &rt.kind), Value::Object(object)),
        (custom_name(rt, &list_kind), list),
    ]
}

/// The schema name of a served type's object.
fn object_ref(rt: &ResourceType) -> Option<String> {
    if rt.custom {
        return Some(custom_name(rt, &rt.kind));
    }
    builtin()
        .iter()
        .find(|(_, def)| {
            def["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|g| {
                    g["group"] == rt.group && g["version"] == rt.version && g["kind"] == rt.kind
                })
        })
        .map(|(name, _)| name.clone())
}

fn query(name: &str, ty: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": ty, "uniqueItems": true}})
}

/// The operations of one resource (v3 shape): the object and list paths, and each
/// subresource's.
fn paths_of(rt: &ResourceType, out: &mut Map<String, Value>) {
    let Some(object) = object_ref(rt) else {
        return;
    };
    let base = format!("/{}", gv_path(&rt.group, &rt.version));
    let scope = if rt.namespaced {
        "namespaces/{namespace}/"
    } else {
        ""
    };
    let kind = gvk(&rt.group, &rt.version, &rt.kind);
    let content = |schema: &str| {
        let s = json!({"schema": {"$ref": format!("{V3_REF}{schema}")}});
        json!({"application/json": s, "application/yaml": s})
    };
    let op = |action: &str, params: Vec<Value>, body: Option<Value>, schema: &str| {
        let mut op = json!({
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": kind,
            "parameters": params,
            "responses": {"200": {"content": content(schema)}, "401": {}},
        });
        if let Some(body) = body {
            op["requestBody"] = json!({"content": body, "required": true});
        }
        op
    };
    let write_params = || {
        vec![
            query("dryRun", "string"),
            query("fieldManager", "string"),
            query("fieldValidation", "string"),
        ]
    };
    let mut patch_params = write_params();
    patch_params.push(query("force", "boolean"));
    let patch_body = {
        let s = json!({"schema": {"$ref": format!("{V3_REF}{META}Patch")}});
        let mut types = vec![
            "application/apply-patch+yaml",
            "application/json-patch+json",
            "application/merge-patch+json",
        ];
        if !rt.custom {
            types.push("application/strategic-merge-patch+json");
        }
        Value::Object(
            types
                .into_iter()
                .map(|t| (t.to_string(), s.clone()))
                .collect(),
        )
    };
    let list_name = if rt.custom {
        custom_name(rt, &format!("{}List", rt.kind))
    } else {
        format!("{object}List")
    };
    let creatable = rt.verbs.contains(&"create");
    let mut collection = Map::new();
    if rt.verbs.contains(&"list") {
        collection.insert(
            "get".into(),
            op(
                "list",
                vec![query("labelSelector", "string")],
                None,
                &list_name,
            ),
        );
    }
    if creatable {
        collection.insert(
            "post".into(),
            op("post", write_params(), Some(content(&object)), &object),
        );
    }
    if !collection.is_empty() {
        out.insert(
            format!("{base}/{scope}{}", rt.plural),
            Value::Object(collection),
        );
    }
    if rt.verbs.contains(&"get") {
        let item = json!({
            "get": op("get", vec![], None, &object),
            "put": op("put", write_params(), Some(content(&object)), &object),
            "patch": op("patch", patch_params.clone(), Some(patch_body.clone()), &object),
            "delete": op("delete", vec![query("dryRun", "string")], None, &format!("{META}Status")),
        });
        out.insert(format!("{base}/{scope}{}/{{name}}", rt.plural), item);
    }
    if rt.status_subresource {
        let status = json!({
            "get": op("get", vec![], None, &object),
            "put": op("put", write_params(), Some(content(&object)), &object),
            "patch": op("patch", patch_params, Some(patch_body), &object),
        });
        out.insert(
            format!("{base}/{scope}{}/{{name}}/status", rt.plural),
            status,
        );
    }
}

/// A short hash of the text, so that a document's URL changes with its content.
fn hash(text: &str) -> String {
    // FNV-1a, 64 bits: stable across runs and processes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `/openapi/v3`: one entry per served group-version, its URL naming a hash of what the
/// document holds.
pub(crate) fn root(types: &[ResourceType], customs: &[Custom]) -> Value {
    let mut by_gv: BTreeMap<String, String> = BTreeMap::new();
    for rt in types {
        let key = by_gv.entry(gv_path(&rt.group, &rt.version)).or_default();
        key.push_str(&format!("{}/{};", rt.plural, rt.kind));
    }
    for c in customs {
        if let Some(key) = by_gv.get_mut(&gv_path(&c.rt.group, &c.rt.version)) {
            key.push_str(&c.schema.as_ref().map(Value::to_string).unwrap_or_default());
        }
    }
    let paths: Map<String, Value> = by_gv
        .into_iter()
        .map(|(path, key)| {
            let url = format!("/openapi/v3/{path}?hash={}", hash(&key));
            (path, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// `/openapi/v3/{api/v1 | apis/g/v}`: the resources' operations and the schemas they use.
pub(crate) fn group_version(
    types: &[ResourceType],
    customs: &[Custom],
    group: &str,
    version: &str,
) -> Option<Value> {
    let served: Vec<&ResourceType> = types
        .iter()
        .filter(|rt| rt.group == group && rt.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for rt in &served {
        paths_of(rt, &mut paths);
    }
    let mut schemas = Map::new();
    let mut roots: Vec<String> = ["DeleteOptions", "Status", "Patch", "ListMeta", "ObjectMeta"]
        .iter()
        .map(|s| format!("{META}{s}"))
        .collect();
    if served.iter().any(|rt| !rt.custom) {
        roots.push(format!("{META}APIResourceList"));
        roots.push(format!("{META}WatchEvent"));
        roots.extend(
            builtin()
                .iter()
                .filter(|(_, def)| of_group_version(def, group, version))
                .map(|(name, _)| name.clone()),
        );
    }
    for c in customs
        .iter()
        .filter(|c| c.rt.group == group && c.rt.version == version)
    {
        for (name, def) in custom_defs(c) {
            schemas.insert(name, def);
        }
    }
    let mut per_document = vec![(String::new(), "v1".to_string())];
    if !group.is_empty() {
        per_document.push((group.to_string(), version.to_string()));
    }
    for name in closure(roots) {
        if let Some(def) = builtin_def(&name, &per_document) {
            schemas.insert(name, def);
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": release()},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
        },
    }))
}

/// A schema in OpenAPI v2 form: `$ref`s into `#/definitions`, `allOf` wrappers unwrapped,
/// no `default`s, `oneOf` leaves as strings. For a custom resource's schema also as
/// kube-apiserver publishes it in v2: no `nullable`, `anyOf`, `oneOf`, `not`, and no `type`
/// where it would reject what the schema allows (nullable, int-or-string, preserved
/// unknown fields).
fn to_v2(schema: &Value, custom: bool) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut map = map.clone();
    if let Some(Value::Array(all)) = map.get("allOf")
        && let [only] = all.as_slice()
        && only.get("$ref").is_some()
    {
        let reference = only["$ref"].clone();
        map.remove("allOf");
        map.insert("$ref".into(), reference);
    }
    if map.contains_key("$ref") {
        map.remove("default");
    }
    if map.remove("oneOf").is_some() && !custom {
        map.insert("type".into(), json!("string"));
    }
    map.remove("default");
    if custom {
        let flag = |k: &str| map.get(k) == Some(&Value::Bool(true));
        if flag("nullable")
            || flag("x-kubernetes-int-or-string")
            || flag("x-kubernetes-preserve-unknown-fields")
        {
            map.remove("type");
        }
        for k in ["nullable", "anyOf", "allOf", "not"] {
            map.remove(k);
        }
    }
    let mut out = Map::new();
    for (k, v) in map {
        let v = match k.as_str() {
            "$ref" => match v.as_str().and_then(|r| r.strip_prefix(V3_REF)) {
                Some(name) => Value::String(format!("{V2_REF}{name}")),
                None => v,
            },
            "properties" => Value::Object(
                v.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), to_v2(v, custom)))
                    .collect(),
            ),
            "items" | "additionalProperties" => to_v2(&v, custom),
            _ => v,
        };
        out.insert(k, v);
    }
    Value::Object(out)
}

/// `/openapi/v2`: every served definition, and the resources' operations, as Swagger 2.0.
pub(crate) fn swagger(types: &[ResourceType], customs: &[Custom]) -> Value {
    let mut gvs: BTreeSet<(String, String)> = BTreeSet::new();
    for rt in types.iter().filter(|rt| !rt.custom) {
        gvs.insert((rt.group.clone(), rt.version.clone()));
    }
    let per_document: Vec<(String, String)> = gvs.into_iter().collect();
    let mut definitions = Map::new();
    for name in builtin().keys() {
        if let Some(def) = builtin_def(name, &per_document) {
            definitions.insert(name.clone(), to_v2(&def, false));
        }
    }
    for c in customs {
        for (name, def) in custom_defs(c) {
            definitions.insert(name, to_v2(&def, true));
        }
    }
    let mut v3_paths = Map::new();
    for rt in types {
        paths_of(rt, &mut v3_paths);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": release()},
        "paths": paths_v2(&v3_paths),
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    })
}

/// Paths in Swagger 2.0 form: parameters typed in place, bodies as `in: body`, responses with
/// one schema.
fn paths_v2(paths: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    for (path, item) in paths {
        let mut ops = Map::new();
        for (method, op) in item.as_object().into_iter().flatten() {
            let mut params: Vec<Value> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    json!({"name": p["name"], "in": p["in"], "type": p["schema"]["type"], "uniqueItems": true})
                })
                .collect();
            if let Some(schema) = op
                .pointer("/requestBody/content")
                .and_then(Value::as_object)
                .and_then(|c| c.values().next())
            {
                params.insert(
                    0,
                    json!({"name": "body", "in": "body", "required": true, "schema": to_v2(&schema["schema"], false)}),
                );
            }
            let response = op
                .pointer("/responses/200/content")
                .and_then(Value::as_object)
                .and_then(|c| c.values().next())
                .map(|c| to_v2(&c["schema"], false))
                .unwrap_or(Value::Null);
            let consumes = op
                .pointer("/requestBody/content")
                .and_then(Value::as_object)
                .map(|c| c.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_else(|| vec!["*/*".to_string()]);
            ops.insert(
                method.clone(),
                json!({
                    "consumes": consumes,
                    "produces": ["application/json", "application/yaml"],
                    "parameters": params,
                    "responses": {"200": {"description": "OK", "schema": response}, "401": {"description": "Unauthorized"}},
                    "schemes": ["https"],
                    "x-kubernetes-action": op["x-kubernetes-action"],
                    "x-kubernetes-group-version-kind": op["x-kubernetes-group-version-kind"],
                }),
            );
        }
        out.insert(path.clone(), Value::Object(ops));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> ResourceType {
        ResourceType {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            singular: "deployment".into(),
            namespaced: true,
            short_names: vec![],
            categories: vec![],
            status_subresource: true,
            subresources: &["status"],
            verbs: &[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ],
            custom: false,
        }
    }

    #[test]
    fn group_version_documents_name_patch_operations_and_carry_their_schemas() {
        let types = vec![deployment()];
        let root = root(&types, &[]);
        let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        let doc = group_version(&types, &[], "apps", "v1").unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for name in [
            "io.k8s.api.apps.v1.Deployment",
            "io.k8s.api.core.v1.PodSpec",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        ] {
            assert!(schemas.contains_key(name), "{name}");
        }
        assert!(!schemas.contains_key("io.k8s.api.batch.v1.Job"));
        assert_eq!(
            schemas["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"]["x-kubernetes-group-version-kind"],
            json!([
                gvk("", "v1", "DeleteOptions"),
                gvk("apps", "v1", "DeleteOptions")
            ])
        );
        assert!(group_version(&types, &[], "", "v1").is_none());
    }

    #[test]
    fn swagger_uses_definitions_refs_without_defaults() {
        let doc = swagger(&[deployment()], &[]);
        let container = &doc["definitions"]["io.k8s.api.core.v1.Container"]["properties"];
        assert_eq!(
            container["resources"],
            json!({"$ref": "#/definitions/io.k8s.api.core.v1.ResourceRequirements"})
        );
        assert_eq!(container["name"], json!({"type": "string"}));
        assert_eq!(
            doc["definitions"]["io.k8s.apimachinery.pkg.api.resource.Quantity"],
            json!({"type": "string"})
        );
    }

    #[test]
    fn custom_kinds_are_named_by_their_reversed_group() {
        let rt = ResourceType {
            group: "example.com".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            custom: true,
            ..deployment()
        };
        let custom = Custom {
            rt: rt.clone(),
            schema: Some(
                json!({"type": "object", "properties": {"spec": {"type": "object",
                "properties": {"port": {"x-kubernetes-int-or-string": true},
                    "color": {"type": "string", "nullable": true}}}}}),
            ),
        };
        let doc = group_version(
            std::slice::from_ref(&rt),
            std::slice::from_ref(&custom),
            "example.com",
            "v1",
        )
        .unwrap();
        let widget = &doc["components"]["schemas"]["com.example.v1.Widget"];
        assert_eq!(
            widget["properties"]["spec"]["properties"]["port"]["anyOf"],
            json!([{"type": "integer"}, {"type": "string"}])
        );
        assert!(doc["components"]["schemas"]["com.example.v1.WidgetList"].is_object());
        let v2 = swagger(&[rt], &[custom]);
        let spec = &v2["definitions"]["com.example.v1.Widget"]["properties"]["spec"]["properties"];
        assert_eq!(spec["port"], json!({"x-kubernetes-int-or-string": true}));
        assert_eq!(spec["color"], json!({}));
    }
}
