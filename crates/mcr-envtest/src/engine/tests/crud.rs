//! Create / get / update: server fields, validation, conflicts, no-ops, generation, status.

use super::*;

#[test]
fn create_sets_server_fields() {
    let e = Engine::new();
    let before = e.resource_version();
    let body = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    let created = e.create(&cms(&e), NS, body, &opts()).unwrap();
    assert_eq!(created["apiVersion"], "v1");
    assert_eq!(created["kind"], "ConfigMap");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["metadata"]["uid"].as_str().unwrap().len(), 36);
    let ts = created["metadata"]["creationTimestamp"].as_str().unwrap();
    assert!(ts.ends_with('Z') && ts.len() == 20, "{ts}");
    assert_eq!(rv(&created), before + 1);
    assert_eq!(e.resource_version(), before + 1);
    assert!(
        created["metadata"].get("generation").is_none(),
        "ConfigMaps have no generation"
    );
    assert_eq!(e.get(&cms(&e), NS, "a").unwrap(), created);
}

#[test]
fn create_validation_errors() {
    let e = Engine::new();
    let c = cms(&e);
    let err = |r: Result<Value, ApiError>| r.expect_err("should fail");
    let missing = err(e.create(&c, Some("nope"), cm("a", json!({})), &opts()));
    assert_eq!(
        (missing.code, missing.message.as_str()),
        (404, "namespaces \"nope\" not found")
    );
    e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    let dup = err(e.create(&c, NS, cm("a", json!({})), &opts()));
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(
        err(e.create(&c, NS, cm("Bad_Name", json!({})), &opts())).code,
        422
    );
    assert_eq!(
        err(e.create(&c, NS, json!({"metadata": {}}), &opts())).code,
        422
    );
    let wrong_kind = json!({"kind": "Secret", "metadata": {"name": "b"}});
    assert_eq!(err(e.create(&c, NS, wrong_kind, &opts())).code, 400);
    let wrong_version = json!({"apiVersion": "v2", "metadata": {"name": "b"}});
    assert_eq!(err(e.create(&c, NS, wrong_version, &opts())).code, 400);
    let wrong_ns = json!({"metadata": {"name": "b", "namespace": "kube-system"}});
    assert_eq!(err(e.create(&c, NS, wrong_ns, &opts())).code, 400);
    assert_eq!(
        err(e.create(&c, None, cm("b", json!({})), &opts())).code,
        405
    );
    let nss = rt(&e, "", "v1", "namespaces");
    assert_eq!(
        err(e.create(&nss, None, json!({"metadata": {"name": "a.b"}}), &opts())).code,
        422
    );
    assert_eq!(err(e.get(&c, NS, "zzz")).code, 404);
}

#[test]
fn generate_name_appends_five_characters() {
    let e = Engine::new();
    let body = json!({"metadata": {"generateName": "job-"}});
    let a = e.create(&cms(&e), NS, body.clone(), &opts()).unwrap();
    let b = e.create(&cms(&e), NS, body, &opts()).unwrap();
    let name = a["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("job-") && name.len() == 9, "{name}");
    assert_ne!(a["metadata"]["name"], b["metadata"]["name"]);
}

#[test]
fn update_conflicts_and_noops() {
    let e = Engine::new();
    let c = cms(&e);
    let created = e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    let mut changed = created.clone();
    changed["data"]["k"] = json!("w");
    let updated = e
        .update(&c, NS, "a", changed.clone(), None, &opts())
        .unwrap();
    assert!(rv(&updated) > rv(&created));
    let stale = e
        .update(&c, NS, "a", changed.clone(), None, &opts())
        .unwrap_err();
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    let mut wrong_uid = updated.clone();
    wrong_uid["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    assert_eq!(
        e.update(&c, NS, "a", wrong_uid, None, &opts())
            .unwrap_err()
            .code,
        409
    );
    // No resourceVersion: unconditional.
    let mut blind = cm("a", json!({}));
    blind["data"]["k"] = json!("x");
    let blind = e.update(&c, NS, "a", blind, None, &opts()).unwrap();
    assert_eq!(blind["data"]["k"], "x");
    assert_eq!(
        blind["metadata"]["uid"], created["metadata"]["uid"],
        "uid is kept"
    );
    // A no-op keeps the resourceVersion.
    let rv_before = e.resource_version();
    let same = e.update(&c, NS, "a", blind.clone(), None, &opts()).unwrap();
    assert_eq!(rv(&same), rv(&blind));
    assert_eq!(e.resource_version(), rv_before);
    // Absent objects and mismatched names.
    assert_eq!(
        e.update(&c, NS, "zzz", cm("zzz", json!({})), None, &opts())
            .unwrap_err()
            .code,
        404
    );
    assert_eq!(
        e.update(&c, NS, "a", cm("b", json!({})), None, &opts())
            .unwrap_err()
            .code,
        400
    );
    assert_eq!(
        e.update(&c, NS, "a", blind, Some("status"), &opts())
            .unwrap_err()
            .code,
        404
    );
}

#[test]
fn generation_and_status_subresource() {
    let e = Engine::new();
    let d = rt(&e, "apps", "v1", "deployments");
    let mut body = deployment("web");
    body["status"] = json!({"replicas": 5});
    let created = e.create(&d, NS, body, &opts()).unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(
        created["status"],
        json!({}),
        "the status sent is dropped on create; a new Deployment's is empty"
    );

    let mut labels_only = created.clone();
    labels_only["metadata"]["labels"] = json!({"x": "y"});
    let labelled = e.update(&d, NS, "web", labels_only, None, &opts()).unwrap();
    assert_eq!(
        labelled["metadata"]["generation"], 1,
        "metadata changes keep generation"
    );

    let mut spec_and_status = labelled.clone();
    spec_and_status["spec"]["replicas"] = json!(3);
    spec_and_status["status"] = json!({"replicas": 9});
    let scaled = e
        .update(&d, NS, "web", spec_and_status, None, &opts())
        .unwrap();
    assert_eq!(scaled["metadata"]["generation"], 2);
    assert_eq!(scaled["status"], json!({}), "main resource ignores status");

    let mut status_write = scaled.clone();
    status_write["status"] = json!({"replicas": 3, "observedGeneration": 2});
    status_write["spec"]["replicas"] = json!(7);
    let with_status = e
        .update(&d, NS, "web", status_write, Some("status"), &opts())
        .unwrap();
    assert_eq!(with_status["status"]["replicas"], 3);
    assert_eq!(with_status["spec"]["replicas"], 3, "/status ignores spec");
    assert_eq!(with_status["metadata"]["generation"], 2);
}

#[test]
fn secret_string_data_is_folded() {
    let e = Engine::new();
    let s = rt(&e, "", "v1", "secrets");
    let body =
        json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "hello"}});
    let created = e.create(&s, NS, body, &opts()).unwrap();
    assert_eq!(created["data"], json!({"a": "eA==", "b": "aGVsbG8="}));
    assert!(created.get("stringData").is_none());
    assert_eq!(created["type"], "Opaque");
    let mut update = created.clone();
    update["stringData"] = json!({"a": "y"});
    let updated = e.update(&s, NS, "s", update, None, &opts()).unwrap();
    assert_eq!(updated["data"]["a"], "eQ==");
}

#[test]
fn dry_run_stores_nothing() {
    let e = Engine::new();
    let rv_before = e.resource_version();
    let dry = WriteOptions {
        dry_run: true,
        ..opts()
    };
    let out = e.create(&cms(&e), NS, cm("a", json!({})), &dry).unwrap();
    assert_eq!(out["metadata"]["name"], "a");
    assert_eq!(e.get(&cms(&e), NS, "a").unwrap_err().code, 404);
    assert_eq!(e.resource_version(), rv_before);
}

#[test]
fn builtin_discovery_rows() {
    let e = Engine::new();
    let d = rt(&e, "apps", "v1", "deployments");
    assert_eq!(
        (d.short_names.clone(), d.categories.clone()),
        (vec!["deploy".to_string()], vec!["all".to_string()])
    );
    assert!(d.status_subresource && d.namespaced && !d.custom);
    let ns = rt(&e, "", "v1", "namespaces");
    assert!(!ns.namespaced && ns.short_names == ["ns"]);
    assert!(e.resolve("events.k8s.io", "v1", "events").is_some());
    assert!(e.resolve("coordination.k8s.io", "v1", "leases").is_some());
    let list = e.list(&ns, None, &ListParams::default()).unwrap();
    assert_eq!(
        names(&list),
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    assert_eq!(list["kind"], "NamespaceList");
    assert_eq!(
        list["items"][0]["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "default"
    );
}
