//! Deletion: finalizers, preconditions, garbage collection, namespaces, CRDs.

use super::*;

fn del(policy: Option<&str>) -> DeleteOptions {
    DeleteOptions {
        propagation_policy: policy.map(str::to_string),
        ..DeleteOptions::default()
    }
}

fn owned_by(name: &str, owners: &[&Value]) -> Value {
    let refs: Vec<Value> = owners
        .iter()
        .map(|o| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}))
        .collect();
    json!({"metadata": {"name": name, "ownerReferences": refs}})
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let e = Engine::new();
    let c = cms(&e);
    let body = json!({"metadata": {"name": "a", "finalizers": ["example.com/f"]}});
    e.create(&c, NS, body, &opts()).unwrap();
    let marked = e.delete(&c, NS, "a", &del(None)).unwrap();
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    let stored = e.get(&c, NS, "a").unwrap();
    assert_eq!(stored, marked);
    // Deleting again changes nothing.
    assert_eq!(e.delete(&c, NS, "a", &del(None)).unwrap(), marked);
    let mut add = stored.clone();
    add["metadata"]["finalizers"] = json!(["example.com/f", "example.com/g"]);
    assert_eq!(
        e.update(&c, NS, "a", add, None, &opts()).unwrap_err().code,
        422
    );
    let remove = json!([{"op": "remove", "path": "/metadata/finalizers"}]).to_string();
    e.patch(
        &c,
        NS,
        "a",
        PatchType::Json,
        remove.as_bytes(),
        None,
        &opts(),
    )
    .unwrap();
    assert_eq!(e.get(&c, NS, "a").unwrap_err().code, 404);
}

#[test]
fn delete_preconditions() {
    let e = Engine::new();
    let c = cms(&e);
    let a = e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    let wrong_uid = DeleteOptions {
        precondition_uid: Some("nope".into()),
        ..DeleteOptions::default()
    };
    assert_eq!(e.delete(&c, NS, "a", &wrong_uid).unwrap_err().code, 409);
    let wrong_rv = DeleteOptions {
        precondition_resource_version: Some("1".into()),
        ..DeleteOptions::default()
    };
    assert_eq!(e.delete(&c, NS, "a", &wrong_rv).unwrap_err().code, 409);
    let dry = DeleteOptions {
        dry_run: true,
        ..DeleteOptions::default()
    };
    e.delete(&c, NS, "a", &dry).unwrap();
    assert!(e.get(&c, NS, "a").is_ok());
    let right = DeleteOptions {
        precondition_uid: a["metadata"]["uid"].as_str().map(str::to_string),
        precondition_resource_version: Some(rv(&a).to_string()),
        ..DeleteOptions::default()
    };
    let gone = e.delete(&c, NS, "a", &right).unwrap();
    assert_eq!(gone["status"], "Success", "{gone}");
    assert_eq!(gone["details"]["name"], "a");
    assert_eq!(e.delete(&c, NS, "a", &right).unwrap_err().code, 404);
}

#[test]
fn garbage_collection_background_foreground_orphan() {
    for policy in [None, Some("Background"), Some("Foreground")] {
        let e = Engine::new();
        let c = cms(&e);
        let owner = e.create(&c, NS, cm("owner", json!({})), &opts()).unwrap();
        let child = e
            .create(&c, NS, owned_by("child", &[&owner]), &opts())
            .unwrap();
        e.create(&c, NS, owned_by("grandchild", &[&child]), &opts())
            .unwrap();
        e.delete(&c, NS, "owner", &del(policy)).unwrap();
        assert_eq!(
            names(&e.list(&c, NS, &ListParams::default()).unwrap()),
            Vec::<String>::new(),
            "{policy:?}"
        );
    }
    let e = Engine::new();
    let c = cms(&e);
    let owner = e.create(&c, NS, cm("owner", json!({})), &opts()).unwrap();
    e.create(&c, NS, owned_by("child", &[&owner]), &opts())
        .unwrap();
    e.delete(&c, NS, "owner", &del(Some("Orphan"))).unwrap();
    let child = e.get(&c, NS, "child").unwrap();
    assert!(
        child["metadata"].get("ownerReferences").is_none(),
        "orphaned: {child}"
    );
    assert_eq!(
        e.delete(&c, NS, "child", &del(Some("Sideways")))
            .unwrap_err()
            .code,
        422
    );
}

#[test]
fn dependents_with_another_live_owner_survive() {
    let e = Engine::new();
    let c = cms(&e);
    let a = e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    let b = e.create(&c, NS, cm("b", json!({})), &opts()).unwrap();
    e.create(&c, NS, owned_by("child", &[&a, &b]), &opts())
        .unwrap();
    e.delete(&c, NS, "a", &del(None)).unwrap();
    let child = e.get(&c, NS, "child").unwrap();
    assert_eq!(
        child["metadata"]["ownerReferences"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(child["metadata"]["ownerReferences"][0]["name"], "b");
    e.delete(&c, NS, "b", &del(None)).unwrap();
    assert_eq!(
        e.get(&c, NS, "child").unwrap_err().code,
        404,
        "last owner gone"
    );
}

#[test]
fn namespace_deletion() {
    let e = Engine::new();
    let c = cms(&e);
    let nss = rt(&e, "", "v1", "namespaces");
    create_ns(&e, "team");
    e.create(&c, Some("team"), cm("plain", json!({})), &opts())
        .unwrap();
    e.create(
        &c,
        Some("team"),
        json!({"metadata": {"name": "held", "finalizers": ["x/y"]}}),
        &opts(),
    )
    .unwrap();
    e.create(&c, NS, cm("elsewhere", json!({})), &opts())
        .unwrap();
    let terminating = e.delete(&nss, None, "team", &del(None)).unwrap();
    assert_eq!(terminating["status"]["phase"], "Terminating");
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        names(&e.list(&c, Some("team"), &ListParams::default()).unwrap()),
        ["held"]
    );
    let forbidden = e
        .create(&c, Some("team"), cm("new", json!({})), &opts())
        .unwrap_err();
    assert_eq!(forbidden.code, 403);
    assert!(
        e.get(&nss, None, "team").is_ok(),
        "namespace waits for its content"
    );
    let release = json!({"metadata": {"finalizers": null}}).to_string();
    e.patch(
        &c,
        Some("team"),
        "held",
        PatchType::Merge,
        release.as_bytes(),
        None,
        &opts(),
    )
    .unwrap();
    assert_eq!(e.get(&nss, None, "team").unwrap_err().code, 404);
    assert!(e.get(&c, NS, "elsewhere").is_ok());
}

#[test]
fn delete_collection_applies_selectors() {
    let e = Engine::new();
    let c = cms(&e);
    for (name, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
        e.create(&c, NS, cm(name, json!({"app": app})), &opts())
            .unwrap();
    }
    let params = ListParams {
        label_selector: Some("app=web".into()),
        ..ListParams::default()
    };
    let deleted = e.delete_collection(&c, NS, &params, &del(None)).unwrap();
    assert_eq!(names(&deleted), ["a", "c"]);
    assert_eq!(
        names(&e.list(&c, NS, &ListParams::default()).unwrap()),
        ["b"]
    );
}

#[test]
fn crd_lifecycle() {
    let e = Engine::new();
    let crds = rt(
        &e,
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
    );
    assert!(e.resolve("example.com", "v1", "widgets").is_none());
    let created = e
        .create(&crds, None, widget_crd("Namespaced"), &opts())
        .unwrap();
    // The create answers before the controllers accept the names, as kube-apiserver's does.
    assert_eq!(created["status"]["conditions"], Value::Null);
    assert_eq!(created["status"]["acceptedNames"]["kind"], "");
    let created = e.get(&crds, None, "widgets.example.com").unwrap();
    let conditions = created["status"]["conditions"].as_array().unwrap();
    for t in ["Established", "NamesAccepted"] {
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == t && c["status"] == "True"),
            "{t}"
        );
    }
    assert_eq!(created["status"]["acceptedNames"]["listKind"], "WidgetList");
    let v1 = rt(&e, "example.com", "v1", "widgets");
    assert!(v1.custom && v1.namespaced && v1.status_subresource && v1.short_names == ["wd"]);
    let beta = rt(&e, "example.com", "v1beta1", "widgets");
    assert!(!beta.status_subresource);
    let w = e
        .create(
            &v1,
            NS,
            json!({"metadata": {"name": "w"}, "spec": {"size": 1}}),
            &opts(),
        )
        .unwrap();
    assert_eq!(w["apiVersion"], "example.com/v1");
    assert_eq!(
        e.get(&beta, NS, "w").unwrap()["apiVersion"],
        "example.com/v1beta1"
    );

    // Stop serving v1beta1.
    let mut crd = e.get(&crds, None, "widgets.example.com").unwrap();
    crd["spec"]["versions"][1]["served"] = json!(false);
    e.update(&crds, None, "widgets.example.com", crd, None, &opts())
        .unwrap();
    assert!(e.resolve("example.com", "v1beta1", "widgets").is_none());
    assert_eq!(e.get(&beta, NS, "w").unwrap_err().code, 404);

    e.delete(&crds, None, "widgets.example.com", &del(None))
        .unwrap();
    assert!(e.resolve("example.com", "v1", "widgets").is_none());
    e.create(&crds, None, widget_crd("Cluster"), &opts())
        .unwrap();
    let cluster = rt(&e, "example.com", "v1", "widgets");
    assert!(!cluster.namespaced);
    assert_eq!(
        names(&e.list(&cluster, None, &ListParams::default()).unwrap()),
        Vec::<String>::new(),
        "objects went with the CRD"
    );

    let mut bad = widget_crd("Namespaced");
    bad["metadata"]["name"] = json!("wrong.example.com");
    assert_eq!(e.create(&crds, None, bad, &opts()).unwrap_err().code, 422);
}
