//! Lists: selectors, ordering, pagination, resourceVersion semantics.

use super::*;

fn params(label: Option<&str>, field: Option<&str>) -> ListParams {
    ListParams {
        label_selector: label.map(str::to_string),
        field_selector: field.map(str::to_string),
        ..ListParams::default()
    }
}

fn seed(e: &Engine) {
    create_ns(e, "other");
    let c = cms(e);
    e.create(
        &c,
        NS,
        cm("b", json!({"app": "web", "tier": "front"})),
        &opts(),
    )
    .unwrap();
    e.create(&c, NS, cm("a", json!({"app": "db"})), &opts())
        .unwrap();
    e.create(&c, Some("other"), cm("a", json!({"app": "web"})), &opts())
        .unwrap();
    e.create(&c, NS, cm("c", json!({})), &opts()).unwrap();
}

#[test]
fn sorted_by_namespace_then_name_with_selectors() {
    let e = Engine::new();
    seed(&e);
    let c = cms(&e);
    let all = e.list(&c, None, &ListParams::default()).unwrap();
    let keys: Vec<String> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["metadata"]["namespace"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(keys, ["default/a", "default/b", "default/c", "other/a"]);
    assert_eq!(all["kind"], "ConfigMapList");
    assert_eq!(all["apiVersion"], "v1");
    assert_eq!(
        all["metadata"]["resourceVersion"],
        e.resource_version().to_string()
    );
    assert!(
        all["items"][0].get("kind").is_none() && all["items"][0].get("apiVersion").is_none(),
        "items of a built-in list carry no kind, as on kube-apiserver (tests/fidelity.rs)"
    );

    assert_eq!(
        names(&e.list(&c, NS, &ListParams::default()).unwrap()),
        ["a", "b", "c"]
    );
    assert_eq!(
        names(&e.list(&c, NS, &params(Some("app=web"), None)).unwrap()),
        ["b"]
    );
    assert_eq!(
        names(&e.list(&c, NS, &params(Some("app"), None)).unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        names(&e.list(&c, NS, &params(Some("!app"), None)).unwrap()),
        ["c"]
    );
    assert_eq!(
        names(
            &e.list(&c, NS, &params(Some("app notin (web)"), None))
                .unwrap()
        ),
        ["a", "c"]
    );
    assert_eq!(
        names(
            &e.list(
                &c,
                None,
                &params(Some("app in (web)"), Some("metadata.namespace=other"))
            )
            .unwrap()
        ),
        ["a"]
    );
    assert_eq!(
        names(
            &e.list(&c, NS, &params(None, Some("metadata.name!=a")))
                .unwrap()
        ),
        ["b", "c"]
    );
    assert_eq!(
        e.list(&c, NS, &params(Some("app in web"), None))
            .unwrap_err()
            .code,
        400
    );
    let err = e
        .list(&c, NS, &params(None, Some("spec.foo=x")))
        .unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            400,
            "\"spec.foo\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        ),
        "what kube-apiserver says for a kind without field labels of its own"
    );
}

#[test]
fn pages_are_consistent_snapshots() {
    let e = Engine::new();
    let c = cms(&e);
    for name in ["a", "b", "c", "d", "e"] {
        e.create(&c, NS, cm(name, json!({})), &opts()).unwrap();
    }
    let first = e
        .list(
            &c,
            NS,
            &ListParams {
                limit: Some(2),
                ..ListParams::default()
            },
        )
        .unwrap();
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let snapshot_rv = first["metadata"]["resourceVersion"].clone();
    // Changes after the first page are not visible in later pages.
    e.delete(&c, NS, "c", &DeleteOptions::default()).unwrap();
    e.create(&c, NS, cm("bb", json!({})), &opts()).unwrap();
    let mut changed = e.get(&c, NS, "d").unwrap();
    changed["data"]["k"] = json!("changed");
    e.update(&c, NS, "d", changed, None, &opts()).unwrap();

    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let next = |token: &str| {
        let p = ListParams {
            limit: Some(2),
            continue_token: Some(token.to_string()),
            ..ListParams::default()
        };
        e.list(&c, NS, &p).unwrap()
    };
    let second = next(&token);
    assert_eq!(names(&second), ["c", "d"]);
    assert_eq!(second["items"][1]["data"]["k"], "v", "old state of d");
    assert_eq!(second["metadata"]["resourceVersion"], snapshot_rv);
    let third = next(second["metadata"]["continue"].as_str().unwrap());
    assert_eq!(names(&third), ["e"]);
    assert!(third["metadata"].get("continue").is_none());

    let with_rv = ListParams {
        continue_token: Some(token.clone()),
        resource_version: Some("5".into()),
        ..ListParams::default()
    };
    assert_eq!(e.list(&c, NS, &with_rv).unwrap_err().code, 400);
    let garbage = ListParams {
        continue_token: Some("!!".into()),
        ..ListParams::default()
    };
    assert_eq!(e.list(&c, NS, &garbage).unwrap_err().code, 400);
    e.compact();
    let expired = e
        .list(
            &c,
            NS,
            &ListParams {
                continue_token: Some(token),
                ..ListParams::default()
            },
        )
        .unwrap_err();
    assert_eq!((expired.code, expired.reason.as_str()), (410, "Expired"));
}

#[test]
fn selectors_with_limit_omit_remaining_count() {
    let e = Engine::new();
    seed(&e);
    let p = ListParams {
        limit: Some(1),
        ..params(Some("app"), None)
    };
    let page = e.list(&cms(&e), None, &p).unwrap();
    assert_eq!(names(&page), ["a"]);
    assert!(page["metadata"]["continue"].is_string());
    assert!(page["metadata"].get("remainingItemCount").is_none());
}

#[test]
fn resource_version_match() {
    let e = Engine::new();
    let c = cms(&e);
    let a = e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    e.create(&c, NS, cm("b", json!({})), &opts()).unwrap();
    let exact = |rv: String| ListParams {
        resource_version: Some(rv),
        resource_version_match: Some("Exact".into()),
        ..ListParams::default()
    };
    let at_a = e.list(&c, NS, &exact(rv(&a).to_string())).unwrap();
    assert_eq!(names(&at_a), ["a"]);
    assert_eq!(at_a["metadata"]["resourceVersion"], rv(&a).to_string());
    let future = e
        .list(&c, NS, &exact((e.resource_version() + 10).to_string()))
        .unwrap_err();
    assert_eq!(future.code, 504);
    let any = ListParams {
        resource_version: Some("0".into()),
        ..ListParams::default()
    };
    assert_eq!(names(&e.list(&c, NS, &any).unwrap()), ["a", "b"]);
    let not_older = ListParams {
        resource_version_match: Some("NotOlderThan".into()),
        ..exact(rv(&a).to_string())
    };
    assert_eq!(names(&e.list(&c, NS, &not_older).unwrap()), ["a", "b"]);
    assert_eq!(
        e.list(
            &c,
            NS,
            &ListParams {
                resource_version: Some("x".into()),
                ..ListParams::default()
            }
        )
        .unwrap_err()
        .code,
        400
    );
    e.compact();
    assert_eq!(
        e.list(&c, NS, &exact(rv(&a).to_string())).unwrap_err().code,
        410
    );
}
