//! Patches: merge, JSON, strategic, server-side apply.

use super::*;

fn patch(
    e: &Engine,
    rt: &ResourceType,
    name: &str,
    ty: PatchType,
    body: Value,
    sub: Option<&str>,
) -> Result<Value, ApiError> {
    e.patch(
        rt,
        NS,
        name,
        ty,
        body.to_string().as_bytes(),
        sub,
        &managed("test"),
    )
}

#[test]
fn merge_patch() {
    let e = Engine::new();
    let c = cms(&e);
    e.create(&c, NS, cm("a", json!({"x": "1"})), &opts())
        .unwrap();
    let out = patch(
        &e,
        &c,
        "a",
        PatchType::Merge,
        json!({"data": {"k": null, "n": "2"}, "metadata": {"labels": {"y": "2"}}}),
        None,
    )
    .unwrap();
    assert_eq!(out["data"], json!({"n": "2"}));
    assert_eq!(out["metadata"]["labels"], json!({"x": "1", "y": "2"}));
    let entry = &out["metadata"]["managedFields"][0];
    assert_eq!(
        (entry["manager"].as_str(), entry["operation"].as_str()),
        (Some("test"), Some("Update"))
    );
    let rv_before = e.resource_version();
    let same = patch(
        &e,
        &c,
        "a",
        PatchType::Merge,
        json!({"data": {"n": "2"}}),
        None,
    )
    .unwrap();
    assert_eq!(
        e.resource_version(),
        rv_before,
        "a no-op patch does not bump the resourceVersion"
    );
    assert_eq!(rv(&same), rv(&out));
    assert_eq!(
        patch(&e, &c, "zzz", PatchType::Merge, json!({}), None)
            .unwrap_err()
            .code,
        404
    );
    assert_eq!(
        e.patch(&c, NS, "a", PatchType::Merge, b"not json", None, &opts())
            .unwrap_err()
            .code,
        400
    );
}

#[test]
fn json_patch_and_identity_rules() {
    let e = Engine::new();
    let c = cms(&e);
    let created = e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    let ops = json!([{"op": "test", "path": "/data/k", "value": "v"}, {"op": "add", "path": "/data/j", "value": "w"}]);
    let out = patch(&e, &c, "a", PatchType::Json, ops, None).unwrap();
    assert_eq!(out["data"], json!({"k": "v", "j": "w"}));
    let failing = json!([{"op": "test", "path": "/data/k", "value": "nope"}]);
    assert_eq!(
        patch(&e, &c, "a", PatchType::Json, failing, None)
            .unwrap_err()
            .code,
        422
    );
    let rename = json!({"metadata": {"name": "b"}});
    assert_eq!(
        patch(&e, &c, "a", PatchType::Merge, rename, None)
            .unwrap_err()
            .code,
        400
    );
    let uid = json!({"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}});
    assert_eq!(
        patch(&e, &c, "a", PatchType::Merge, uid, None)
            .unwrap_err()
            .code,
        409
    );
    let stale =
        json!({"metadata": {"resourceVersion": rv(&created).to_string()}, "data": {"z": "1"}});
    assert_eq!(
        patch(&e, &c, "a", PatchType::Merge, stale, None)
            .unwrap_err()
            .code,
        409
    );
}

#[test]
fn strategic_merge_on_builtins_only() {
    let e = Engine::new();
    let d = rt(&e, "apps", "v1", "deployments");
    e.create(&d, NS, deployment("web"), &opts()).unwrap();
    let body = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "envoy:1"},
        {"name": "main", "image": "nginx:2"}]}}}});
    let out = patch(&e, &d, "web", PatchType::Strategic, body, None).unwrap();
    let containers: Vec<Value> = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!({"name": c["name"], "image": c["image"]}))
        .collect();
    assert_eq!(
        Value::Array(containers),
        json!([{"name": "sidecar", "image": "envoy:1"}, {"name": "main", "image": "nginx:2"}]),
        "the patch's order, as kube-apiserver merges it"
    );
    assert_eq!(out["metadata"]["generation"], 2);

    let widgets = install_widgets(&e);
    e.create(
        &widgets,
        NS,
        json!({"metadata": {"name": "w"}, "spec": {"size": 1}}),
        &opts(),
    )
    .unwrap();
    let err = patch(
        &e,
        &widgets,
        "w",
        PatchType::Strategic,
        json!({"spec": {"size": 2}}),
        None,
    )
    .unwrap_err();
    assert_eq!(err.code, 415);
}

#[test]
fn status_patch_touches_only_status() {
    let e = Engine::new();
    let d = rt(&e, "apps", "v1", "deployments");
    e.create(&d, NS, deployment("web"), &opts()).unwrap();
    let body = json!({"spec": {"replicas": 9}, "status": {"readyReplicas": 1}});
    let out = patch(
        &e,
        &d,
        "web",
        PatchType::Merge,
        body.clone(),
        Some("status"),
    )
    .unwrap();
    assert_eq!(
        (
            out["spec"]["replicas"].as_i64(),
            out["status"]["readyReplicas"].as_i64()
        ),
        (Some(1), Some(1))
    );
    let out = patch(&e, &d, "web", PatchType::Merge, body, None).unwrap();
    assert_eq!(
        (
            out["spec"]["replicas"].as_i64(),
            out["status"]["readyReplicas"].as_i64()
        ),
        (Some(9), Some(1))
    );
}

#[test]
fn server_side_apply() {
    let e = Engine::new();
    let c = cms(&e);
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: web\ndata:\n  k: v\n";
    let no_manager = e
        .patch(&c, NS, "a", PatchType::Apply, yaml, None, &opts())
        .unwrap_err();
    assert_eq!(no_manager.code, 400);
    let created = e
        .patch(&c, NS, "a", PatchType::Apply, yaml, None, &managed("mgr"))
        .unwrap();
    assert_eq!(created["data"]["k"], "v");
    assert!(
        created["metadata"]["uid"].is_string(),
        "apply creates when absent"
    );
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "mgr");
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["apiVersion"], "v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );
    assert!(entry["time"].is_string());

    let again =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"j":"w"}}"#;
    let merged = e
        .patch(
            &c,
            NS,
            "a",
            PatchType::Apply,
            again,
            None,
            &managed("other"),
        )
        .unwrap();
    assert_eq!(merged["data"], json!({"k": "v", "j": "w"}));
    assert_eq!(
        merged["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let renamed = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}"#;
    assert_eq!(
        e.patch(&c, NS, "a", PatchType::Apply, renamed, None, &managed("m"))
            .unwrap_err()
            .code,
        400
    );
    let wrong_kind = br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}"#;
    assert_eq!(
        e.patch(
            &c,
            NS,
            "a",
            PatchType::Apply,
            wrong_kind,
            None,
            &managed("m")
        )
        .unwrap_err()
        .code,
        400
    );
}

#[test]
fn apply_status_of_custom_resource() {
    let e = Engine::new();
    let w = install_widgets(&e);
    let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}});
    let created = e
        .patch(
            &w,
            NS,
            "w",
            PatchType::Apply,
            obj.to_string().as_bytes(),
            None,
            &managed("m"),
        )
        .unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    let status = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let out = e
        .patch(
            &w,
            NS,
            "w",
            PatchType::Apply,
            status.to_string().as_bytes(),
            Some("status"),
            &managed("ctl"),
        )
        .unwrap();
    assert_eq!(out["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(
        out["metadata"]["generation"], 1,
        "status changes keep generation"
    );
    let entries = out["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|m| m["manager"] == "ctl" && m["subresource"] == "status")
    );
}
