//! A minimal OpenAPI v3 surface, just enough for kubectl to use server-side field validation.
//!
//! kubectl (`--validate=strict`, the default) reads `/openapi/v3`, then the document of the
//! object's group-version, and looks for a PATCH operation tagged with the object's
//! `x-kubernetes-group-version-kind` that accepts the `fieldValidation` query parameter. If it
//! finds one it leaves validation to the server (which here accepts any fields) instead of
//! downloading schemas, so `kubectl create -f` works without `--validate=false`. The
//! documents carry no schemas: `kubectl explain` does not work.

use serde_json::{Map, Value, json};

use crate::engine::ResourceType;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group-version.
pub(crate) fn root(types: &[ResourceType]) -> Value {
    let mut paths = Map::new();
    for rt in types {
        let path = gv_path(&rt.group, &rt.version);
        let url = format!("/openapi/v3/{path}");
        paths
            .entry(path)
            .or_insert_with(|| json!({ "serverRelativeURL": url }));
    }
    json!({ "paths": paths })
}

/// `/openapi/v3/{api/v1 | apis/g/v}`: a PATCH operation per resource, no schemas.
pub(crate) fn group_version(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    for rt in types
        .iter()
        .filter(|rt| rt.group == group && rt.version == version)
    {
        let scope = if rt.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let path = format!("/{}/{scope}{}/{{name}}", gv_path(group, version), rt.plural);
        let operation = json!({
            "operationId": format!("patch{}", rt.kind),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": { "group": group, "version": version, "kind": rt.kind },
            "parameters": [
                { "name": "fieldValidation", "in": "query", "schema": { "type": "string" } },
                { "name": "fieldManager", "in": "query", "schema": { "type": "string" } },
                { "name": "dryRun", "in": "query", "schema": { "type": "string" } },
                { "name": "force", "in": "query", "schema": { "type": "boolean" } },
            ],
            "responses": { "200": { "description": "OK" } },
        });
        paths.insert(path, json!({ "patch": operation }));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes (mcr-envtest)", "version": crate::discovery::GIT_VERSION },
        "paths": paths,
        "components": { "schemas": {} },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_name_patch_operations() {
        let rt = ResourceType {
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
            verbs: &["patch"],
            custom: false,
        };
        let types = vec![rt];
        let root = root(&types);
        assert_eq!(
            root["paths"]["apis/apps/v1"]["serverRelativeURL"],
            "/openapi/v3/apis/apps/v1"
        );
        let doc = group_version(&types, "apps", "v1").unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert_eq!(op["parameters"][0]["name"], "fieldValidation");
        assert!(group_version(&types, "", "v1").is_none());
    }
}
