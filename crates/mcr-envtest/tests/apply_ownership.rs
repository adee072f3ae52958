//! Server-side apply field ownership, checked against what kube-apiserver returns: which
//! fields a manager's apply removes, conflicts and `force`, the handover from an updating
//! manager to an applying one, and `managedFields` exactly (timestamps left out).
//!
//! Every test runs on both backends (`MCR_ENVTEST=real` for kube-apiserver).

use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use mcr_test_support::DEADLINE;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const GADGETS: &str = "/apis/ssa.example.com/v1/namespaces/default/gadgets";

/// One raw request: the status code and the JSON body of the answer.
async fn send(
    client: &kube::Client,
    method: http::Method,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    let res = client.send(req.map(Into::into)).await.unwrap();
    let code = res.status().as_u16();
    let bytes = res.into_body().collect_bytes().await.unwrap();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (code, value)
}

/// A server-side apply of `body` to `{collection}/{name}` by `manager`.
async fn apply(
    client: &kube::Client,
    collection: &str,
    name: &str,
    manager: &str,
    force: bool,
    body: Value,
) -> (u16, Value) {
    let force = if force { "&force=true" } else { "" };
    let uri = format!("{collection}/{name}?fieldManager={manager}{force}");
    send(
        client,
        http::Method::PATCH,
        &uri,
        "application/apply-patch+yaml",
        &body,
    )
    .await
}

/// An apply that must succeed; returns the object.
async fn apply_ok(
    client: &kube::Client,
    collection: &str,
    name: &str,
    manager: &str,
    body: Value,
) -> Value {
    let (code, out) = apply(client, collection, name, manager, false, body).await;
    assert!(
        code == 200 || code == 201,
        "apply by {manager} failed: {code} {out}"
    );
    out
}

/// `metadata.managedFields` without the timestamps, in a stable order.
fn managed(obj: &Value) -> Vec<Value> {
    let mut entries: Vec<Value> = obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for e in &mut entries {
        e.as_object_mut().unwrap().remove("time");
    }
    entries.sort_by_key(|e| {
        (
            e["operation"].as_str().unwrap_or("").to_string(),
            e["manager"].as_str().unwrap_or("").to_string(),
            e["subresource"].as_str().unwrap_or("").to_string(),
        )
    });
    entries
}

fn entry(manager: &str, operation: &str, api_version: &str, fields: Value) -> Value {
    json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    })
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// The issue's reproduction: a key the first manager stops applying goes, the second
/// manager's key stays.
#[tokio::test]
async fn dropped_key_is_removed_and_other_managers_keys_stay() {
    let cluster = TestCluster::start("ssa-drop").await.unwrap();
    let client = cluster.client();
    let (code, out) = apply(
        &client,
        CMS,
        "c",
        "a",
        false,
        configmap("c", json!({"a": "1", "b": "1"})),
    )
    .await;
    assert_eq!(
        code, 201,
        "an apply that creates answers 201 Created: {out}"
    );
    apply_ok(&client, CMS, "c", "b", configmap("c", json!({"c": "1"}))).await;
    let out = apply_ok(&client, CMS, "c", "a", configmap("c", json!({"a": "1"}))).await;
    assert_eq!(out["data"], json!({"a": "1", "c": "1"}));
    assert_eq!(
        managed(&out),
        vec![
            entry("a", "Apply", "v1", json!({"f:data": {"f:a": {}}})),
            entry("b", "Apply", "v1", json!({"f:data": {"f:c": {}}})),
        ]
    );
    // Dropping everything removes the map itself when no one else owns a key in it.
    apply_ok(&client, CMS, "c", "b", configmap("c", json!({}))).await;
    let out = apply_ok(
        &client,
        CMS,
        "c",
        "a",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    )
    .await;
    assert!(out.get("data").is_none(), "{out}");
    assert_eq!(
        managed(&out),
        vec![entry("b", "Apply", "v1", json!({"f:data": {}}))]
    );
}

/// A Secret synced with apply loses a key that its source lost.
#[tokio::test]
async fn secret_key_dropped_from_apply_is_removed() {
    let cluster = TestCluster::start("ssa-secret").await.unwrap();
    let client = cluster.client();
    let secret = |data: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque", "data": data});
    apply_ok(
        &client,
        SECRETS,
        "s",
        "sync",
        secret(json!({"x": "eA==", "y": "eQ=="})),
    )
    .await;
    let out = apply_ok(&client, SECRETS, "s", "sync", secret(json!({"x": "eA=="}))).await;
    assert_eq!(out["data"], json!({"x": "eA=="}));
    assert_eq!(
        managed(&out),
        vec![entry(
            "sync",
            "Apply",
            "v1",
            json!({"f:data": {"f:x": {}}, "f:type": {}})
        )]
    );
}

/// Two appliers setting one field to different values conflict; `force` moves the field.
#[tokio::test]
async fn conflicting_apply_is_refused_and_force_takes_the_field() {
    let cluster = TestCluster::start("ssa-conflict").await.unwrap();
    let client = cluster.client();
    apply_ok(
        &client,
        CMS,
        "c",
        "a",
        configmap("c", json!({"a": "1", "b": "1"})),
    )
    .await;
    // The same value is no conflict: both own the field.
    let out = apply_ok(&client, CMS, "c", "b", configmap("c", json!({"a": "1"}))).await;
    assert_eq!(
        managed(&out),
        vec![
            entry(
                "a",
                "Apply",
                "v1",
                json!({"f:data": {"f:a": {}, "f:b": {}}})
            ),
            entry("b", "Apply", "v1", json!({"f:data": {"f:a": {}}})),
        ]
    );
    let (code, status) = apply(
        &client,
        CMS,
        "c",
        "b",
        false,
        configmap("c", json!({"a": "2"})),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"a\": .data.a"
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"a\"", "field": ".data.a"}])
    );
    let (code, out) = apply(
        &client,
        CMS,
        "c",
        "b",
        true,
        configmap("c", json!({"a": "2"})),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(out["data"], json!({"a": "2", "b": "1"}));
    assert_eq!(
        managed(&out),
        vec![
            entry("a", "Apply", "v1", json!({"f:data": {"f:b": {}}})),
            entry("b", "Apply", "v1", json!({"f:data": {"f:a": {}}})),
        ]
    );
    // `a` no longer owns the key, so dropping it from a's configuration keeps it.
    let out = apply_ok(&client, CMS, "c", "a", configmap("c", json!({"b": "1"}))).await;
    assert_eq!(out["data"], json!({"a": "2", "b": "1"}));
}

/// A manager that created with POST and patched with merge patches hands its fields over to
/// an applier: updates are recorded (operation `Update`), conflicts name them with their
/// apiVersion, and an update takes a field back without conflict.
#[tokio::test]
async fn update_manager_hands_over_to_applier() {
    let cluster = TestCluster::start("ssa-handover").await.unwrap();
    let client = cluster.client();
    let (code, out) = send(
        &client,
        http::Method::POST,
        &format!("{CMS}?fieldManager=u"),
        "application/json",
        &json!({"metadata": {"name": "c", "labels": {"l": "1"}}, "data": {"a": "1", "b": "1"}}),
    )
    .await;
    assert_eq!(code, 201, "{out}");
    assert_eq!(
        managed(&out),
        vec![entry(
            "u",
            "Update",
            "v1",
            json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
        )]
    );
    let out = apply_ok(&client, CMS, "c", "a", configmap("c", json!({"a": "1"}))).await;
    assert_eq!(managed(&out).len(), 2, "{out}");
    let (code, status) = apply(
        &client,
        CMS,
        "c",
        "a",
        false,
        configmap("c", json!({"a": "2"})),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"u\" using v1: .data.a"
    );
    let (code, out) = apply(
        &client,
        CMS,
        "c",
        "a",
        true,
        configmap("c", json!({"a": "2"})),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(
        managed(&out),
        vec![
            entry("a", "Apply", "v1", json!({"f:data": {"f:a": {}}})),
            entry(
                "u",
                "Update",
                "v1",
                json!({"f:data": {".": {}, "f:b": {}}, "f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
            ),
        ]
    );
    // An update never conflicts: it takes the field, and the applier's empty entry goes.
    let (code, out) = send(
        &client,
        http::Method::PATCH,
        &format!("{CMS}/c?fieldManager=u"),
        "application/merge-patch+json",
        &json!({"data": {"a": "3"}}),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(
        managed(&out),
        vec![entry(
            "u",
            "Update",
            "v1",
            json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
        )]
    );
    // The applier owns nothing now, so applying without `a` removes nothing.
    let out = apply_ok(&client, CMS, "c", "a", configmap("c", json!({"z": "1"}))).await;
    assert_eq!(out["data"], json!({"a": "3", "b": "1", "z": "1"}));
    // A PUT by another manager that removes `b` takes it from `u`.
    let mut body = out.clone();
    body["data"] = json!({"a": "3", "z": "1"});
    let (code, out) = send(
        &client,
        http::Method::PUT,
        &format!("{CMS}/c?fieldManager=p"),
        "application/json",
        &body,
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(
        managed(&out),
        vec![
            entry("a", "Apply", "v1", json!({"f:data": {"f:z": {}}})),
            entry(
                "u",
                "Update",
                "v1",
                json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
            ),
        ]
    );
}

fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": containers}}},
    })
}

/// Containers, env and ports merge by their keys; `args` is atomic; `selector` is an atomic
/// struct.
#[tokio::test]
async fn deployment_lists_merge_by_key() {
    let cluster = TestCluster::start("ssa-deploy").await.unwrap();
    let client = cluster.client();
    let full = |env: Value, ports: Value| {
        let mut d = deployment(json!([{
            "name": "main", "image": "main:1", "args": ["x", "y"], "env": env, "ports": ports,
        }]));
        d["spec"]["replicas"] = json!(1);
        d["spec"]["selector"] = json!({"matchLabels": {"app": "web"}});
        d["spec"]["template"]["metadata"] = json!({"labels": {"app": "web"}});
        d
    };
    let port = |n: u16| json!({"name": format!("p{n}"), "containerPort": n, "protocol": "TCP"});
    apply_ok(
        &client,
        DEPLOYS,
        "web",
        "a",
        full(
            json!([{"name": "E1", "value": "1"}, {"name": "E2", "value": "2"}]),
            json!([port(80)]),
        ),
    )
    .await;
    apply_ok(
        &client,
        DEPLOYS,
        "web",
        "b",
        deployment(json!([{"name": "main", "env": [{"name": "E3", "value": "3"}]}])),
    )
    .await;
    let out = apply_ok(
        &client,
        DEPLOYS,
        "web",
        "a",
        full(
            json!([{"name": "E1", "value": "1"}]),
            json!([port(80), port(443)]),
        ),
    )
    .await;
    let container = &out["spec"]["template"]["spec"]["containers"][0];
    let names = |list: &Value, key: &str| -> Vec<Value> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|i| i[key].clone())
            .collect()
    };
    assert_eq!(
        names(&container["env"], "name"),
        vec![json!("E1"), json!("E3")]
    );
    assert_eq!(
        names(&container["ports"], "containerPort"),
        vec![json!(80), json!(443)]
    );
    let port_fields = json!({".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}});
    let env_fields = json!({".": {}, "f:name": {}, "f:value": {}});
    assert_eq!(
        managed(&out),
        vec![
            entry(
                "a",
                "Apply",
                "apps/v1",
                json!({"f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {
                            ".": {},
                            "f:args": {},
                            "f:env": {"k:{\"name\":\"E1\"}": env_fields},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {
                                "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": port_fields,
                                "k:{\"containerPort\":443,\"protocol\":\"TCP\"}": port_fields,
                            },
                        }}},
                    },
                }})
            ),
            entry(
                "b",
                "Apply",
                "apps/v1",
                json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {
                    ".": {},
                    "f:env": {"k:{\"name\":\"E3\"}": env_fields},
                    "f:name": {},
                }}}}}})
            ),
        ]
    );
    // `args` is atomic: a different list is a conflict on the whole list.
    let (code, status) = apply(
        &client,
        DEPLOYS,
        "web",
        "b",
        false,
        deployment(json!([{"name": "main", "args": ["z"], "env": [{"name": "E3", "value": "3"}]}])),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["field"],
        ".spec.template.spec.containers[name=\"main\"].args"
    );
}

async fn install_gadgets(cluster: &TestCluster) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.ssa.example.com"},
        "spec": {
            "group": "ssa.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "items": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "required": ["name"], "properties": {
                                    "name": {"type": "string"}, "size": {"type": "integer"},
                                }},
                            },
                            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                            "args": {"type": "array", "items": {"type": "string"}},
                            "selector": {
                                "type": "object",
                                "x-kubernetes-map-type": "atomic",
                                "additionalProperties": {"type": "string"},
                            },
                            "settings": {"type": "object", "additionalProperties": {"type": "string"}},
                        }},
                        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                    },
                }},
            }],
        },
    });
    let (code, out) = send(
        &cluster.client(),
        http::Method::POST,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        &crd,
    )
    .await;
    assert_eq!(code, 201, "{out}");
    let client = cluster.client();
    eventually_async("gadgets to be served", DEADLINE, || {
        let client = client.clone();
        async move {
            let req = http::Request::get(GADGETS).body(Vec::new()).unwrap();
            client.request_text(req).await.is_ok()
        }
    })
    .await;
}

fn gadget(spec: Value) -> Value {
    json!({"apiVersion": "ssa.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec})
}

/// A CRD's schema decides: list-type map and set merge by item, atomic lists and atomic
/// maps are owned whole, maps are granular.
#[tokio::test]
async fn crd_schema_decides_list_and_map_ownership() {
    let cluster = TestCluster::start("ssa-crd").await.unwrap();
    install_gadgets(&cluster).await;
    let client = cluster.client();
    apply_ok(
        &client,
        GADGETS,
        "g",
        "a",
        gadget(json!({
            "items": [{"name": "a", "size": 1}, {"name": "b", "size": 2}],
            "tags": ["x", "y"],
            "args": ["p", "q"],
            "selector": {"k": "v"},
            "settings": {"s1": "1", "s2": "2"},
        })),
    )
    .await;
    apply_ok(
        &client,
        GADGETS,
        "g",
        "b",
        gadget(
            json!({"items": [{"name": "c", "size": 3}], "tags": ["z"], "settings": {"s3": "3"}}),
        ),
    )
    .await;
    let out = apply_ok(
        &client,
        GADGETS,
        "g",
        "a",
        gadget(json!({
            "items": [{"name": "a", "size": 1}],
            "tags": ["x"],
            "args": ["p"],
            "selector": {"k": "v"},
            "settings": {"s1": "1"},
        })),
    )
    .await;
    assert_eq!(
        out["spec"],
        json!({
            "items": [{"name": "a", "size": 1}, {"name": "c", "size": 3}],
            "tags": ["x", "z"],
            "args": ["p"],
            "selector": {"k": "v"},
            "settings": {"s1": "1", "s3": "3"},
        })
    );
    let item = json!({".": {}, "f:name": {}, "f:size": {}});
    assert_eq!(
        managed(&out),
        vec![
            entry(
                "a",
                "Apply",
                "ssa.example.com/v1",
                json!({"f:spec": {
                    "f:args": {},
                    "f:items": {"k:{\"name\":\"a\"}": item},
                    "f:selector": {},
                    "f:settings": {"f:s1": {}},
                    "f:tags": {"v:\"x\"": {}},
                }})
            ),
            entry(
                "b",
                "Apply",
                "ssa.example.com/v1",
                json!({"f:spec": {
                    "f:items": {"k:{\"name\":\"c\"}": item},
                    "f:settings": {"f:s3": {}},
                    "f:tags": {"v:\"z\"": {}},
                }})
            ),
        ]
    );
    let b_takes = gadget(json!({
        "items": [{"name": "c", "size": 3}],
        "tags": ["z"],
        "settings": {"s3": "3"},
        "args": ["r"],
        "selector": {"k2": "v2"},
    }));
    let (code, status) = apply(&client, GADGETS, "g", "b", false, b_takes.clone()).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.args\n- .spec.selector"
    );
    let (code, out) = apply(&client, GADGETS, "g", "b", true, b_takes).await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(out["spec"]["args"], json!(["r"]));
    assert_eq!(out["spec"]["selector"], json!({"k2": "v2"}));
    assert_eq!(
        managed(&out)[0]["fieldsV1"],
        json!({"f:spec": {
            "f:items": {"k:{\"name\":\"a\"}": item},
            "f:settings": {"f:s1": {}},
            "f:tags": {"v:\"x\"": {}},
        }})
    );

    // Apply to the status subresource: its own entry, with `subresource: status`.
    let (code, out) = apply(
        &client,
        &format!("{GADGETS}/g"),
        "status",
        "s",
        false,
        json!({"apiVersion": "ssa.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "status": {"phase": "Ready"}}),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    let status_entry = managed(&out)
        .into_iter()
        .find(|e| e["manager"] == "s")
        .unwrap();
    assert_eq!(
        status_entry,
        json!({
            "manager": "s",
            "operation": "Apply",
            "apiVersion": "ssa.example.com/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:phase": {}}},
            "subresource": "status",
        })
    );
}

/// Without `fieldManager`, a write is recorded under the name its `User-Agent` starts with
/// (up to the first `/`), or `unknown` without one (kube-rs sends none). An empty map the
/// client sends is not stored, so not owned.
#[tokio::test]
async fn update_without_field_manager_is_named_after_the_user_agent() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    let cluster = TestCluster::start("ssa-agent").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    // `configmap` sends `labels: {}`.
    let created = cms
        .create(
            &PostParams::default(),
            &mcr_test_support::configmap("c", &[], "1"),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.labels, None);
    let data = json!({"f:data": {".": {}, "f:value": {}}});
    assert_eq!(
        managed(&serde_json::to_value(&created).unwrap()),
        vec![entry("unknown", "Update", "v1", data)]
    );
    let req = http::Request::builder()
        .method(http::Method::POST)
        .uri(CMS)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, "my-controller/1.2 (linux)")
        .body(serde_json::to_vec(&configmap("d", json!({"a": "1"}))).unwrap())
        .unwrap();
    let res = cluster.client().send(req.map(Into::into)).await.unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let out: Value =
        serde_json::from_slice(&res.into_body().collect_bytes().await.unwrap()).unwrap();
    assert_eq!(
        managed(&out),
        vec![entry(
            "my-controller",
            "Update",
            "v1",
            json!({"f:data": {".": {}, "f:a": {}}})
        )]
    );
}

/// kube-apiserver keeps the client-side apply annotation in step when the manager `kubectl`
/// applies; the emulator does not emulate that and says so instead of answering differently.
#[tokio::test]
async fn unemulated_client_side_apply_upgrade_is_refused() {
    let cluster = TestCluster::start("ssa-last-applied").await.unwrap();
    let client = cluster.client();
    let annotated = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "data": {"a": "1"},
    });
    let (code, out) = send(
        &client,
        http::Method::POST,
        CMS,
        "application/json",
        &annotated,
    )
    .await;
    assert_eq!(code, 201, "{out}");
    let (code, out) = apply(
        &client,
        CMS,
        "c",
        "kubectl",
        true,
        configmap("c", json!({"a": "2"})),
    )
    .await;
    if cluster.backend().is_real() {
        assert_eq!(code, 200, "{out}");
    } else {
        assert_eq!(code, 500, "{out}");
        let message = out["message"].as_str().unwrap();
        assert!(
            message.contains("mcr-envtest does not emulate"),
            "{message}"
        );
    }
}

/// An object whose `managedFields` were reset is not tracked by updates; the first apply
/// gives its existing fields to `before-first-apply`, which then conflicts like any manager.
#[tokio::test]
async fn untracked_object_is_owned_by_before_first_apply() {
    let cluster = TestCluster::start("ssa-untracked").await.unwrap();
    let client = cluster.client();
    let (code, out) = send(
        &client,
        http::Method::POST,
        &format!("{CMS}?fieldManager=u"),
        "application/json",
        &configmap("c", json!({"a": "1", "b": "1"})),
    )
    .await;
    assert_eq!(code, 201, "{out}");
    let mut reset = out.clone();
    reset["metadata"]["managedFields"] = json!([]);
    let (code, out) = send(
        &client,
        http::Method::PUT,
        &format!("{CMS}/c?fieldManager=u"),
        "application/json",
        &reset,
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(managed(&out), Vec::<Value>::new());
    let (code, out) = send(
        &client,
        http::Method::PATCH,
        &format!("{CMS}/c?fieldManager=u"),
        "application/merge-patch+json",
        &json!({"data": {"b": "2"}}),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(
        managed(&out),
        Vec::<Value>::new(),
        "updates do not start tracking"
    );
    let (code, status) = apply(
        &client,
        CMS,
        "c",
        "a",
        false,
        configmap("c", json!({"a": "2"})),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"
    );
    let (code, out) = apply(
        &client,
        CMS,
        "c",
        "a",
        true,
        configmap("c", json!({"a": "2"})),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(
        managed(&out),
        vec![
            entry("a", "Apply", "v1", json!({"f:data": {"f:a": {}}})),
            entry(
                "before-first-apply",
                "Update",
                "v1",
                json!({"f:data": {".": {}, "f:b": {}}})
            ),
        ]
    );
}

/// Creating an object whose name a deleting object still holds says so.
#[tokio::test]
async fn create_over_a_deleting_object_says_why() {
    let cluster = TestCluster::start("ssa-deleting").await.unwrap();
    let client = cluster.client();
    let mut held = configmap("c", json!({"a": "1"}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let (code, out) = send(&client, http::Method::POST, CMS, "application/json", &held).await;
    assert_eq!(code, 201, "{out}");
    let (code, out) = send(
        &client,
        http::Method::DELETE,
        &format!("{CMS}/c"),
        "application/json",
        &json!({}),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert!(out["metadata"]["deletionTimestamp"].is_string(), "{out}");
    let (code, status) = send(&client, http::Method::POST, CMS, "application/json", &held).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "object is being deleted: configmaps \"c\" already exists"
    );
    // A delete that removes at once answers with a Status.
    let (code, _) = send(
        &client,
        http::Method::PATCH,
        &format!("{CMS}/c"),
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert_eq!(code, 200);
    send(
        &client,
        http::Method::POST,
        CMS,
        "application/json",
        &configmap("d", json!({})),
    )
    .await;
    let (code, out) = send(
        &client,
        http::Method::DELETE,
        &format!("{CMS}/d"),
        "application/json",
        &json!({}),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(out["kind"], "Status", "{out}");
    assert_eq!(out["status"], "Success", "{out}");
    assert_eq!(out["details"]["name"], "d", "{out}");
    assert!(out["details"].get("group").is_none(), "{out}");
}

/// Emptying a custom resource's map by apply leaves `null` in its place, which the CRD's
/// schema refuses: kube-apiserver answers 422 (a built-in type drops the `null`).
#[tokio::test]
async fn emptying_a_custom_resource_map_by_apply_is_invalid() {
    let cluster = TestCluster::start("ssa-crd-null").await.unwrap();
    install_gadgets(&cluster).await;
    let client = cluster.client();
    apply_ok(
        &client,
        GADGETS,
        "g",
        "a",
        gadget(json!({"settings": {"s1": "1"}})),
    )
    .await;
    let (code, status) = apply(
        &client,
        GADGETS,
        "g",
        "a",
        false,
        gadget(json!({"settings": {}})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Gadget.ssa.example.com \"g\" is invalid: spec.settings: Invalid value: \"null\": spec.settings in body must be of type object: \"null\""
    );
    // The same on a ConfigMap removes the key and keeps no `data`.
    apply_ok(&client, CMS, "c", "a", configmap("c", json!({"k": "1"}))).await;
    let out = apply_ok(&client, CMS, "c", "a", configmap("c", json!({}))).await;
    assert!(out.get("data").is_none(), "{out}");
}

/// An applied configuration with a field its type does not declare is refused before any
/// merge, whatever `fieldValidation` says and dry run or not: kube-apiserver cannot make the
/// typed patch (a 500 naming the object as the body does, its kind and the field, as Kubernetes' own
/// node-problem-detector add-on with its misspelt `nodeSelectors` gets). A custom resource
/// is checked against its CRD's schema the same way.
#[tokio::test]
async fn apply_with_an_undeclared_field_is_refused_whatever_the_field_validation() {
    let cluster = TestCluster::start("ssa-undeclared").await.unwrap();
    install_gadgets(&cluster).await;
    let client = cluster.client();
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"nodeSelectors": {"a": "b"}, "containers": [{"name": "c", "image": "i"}]},
            },
        },
    });
    for query in [
        "",
        "&fieldValidation=Ignore",
        "&fieldValidation=Warn",
        "&dryRun=All",
    ] {
        let uri = format!("{DEPLOYS}/d?fieldManager=m{query}");
        let (code, out) = send(
            &client,
            http::Method::PATCH,
            &uri,
            "application/apply-patch+yaml",
            &deploy,
        )
        .await;
        assert_eq!(code, 500, "{query}: {out}");
        assert_eq!(
            out["message"],
            "failed to create typed patch object (/d; apps/v1, Kind=Deployment): \
             .spec.template.spec.nodeSelectors: field not declared in schema",
            "{query}: {out}"
        );
    }
    let (code, out) = send(
        &client,
        http::Method::GET,
        &format!("{DEPLOYS}/d"),
        "application/json",
        &json!({}),
    )
    .await;
    assert_eq!(code, 404, "nothing was created: {out}");

    // Inside lists, an item is named as field ownership keys it (a struct's first undeclared
    // field only: kube-apiserver stops walking it there, in Go's random map order, so a test
    // names one per struct).
    let mut typo = deploy.clone();
    let spec = &mut typo["spec"]["template"]["spec"];
    spec.as_object_mut().unwrap().remove("nodeSelectors");
    spec["containers"][0]["imagePullPolicyy"] = json!("Always");
    spec["tolerations"] = json!([{"key": "k", "effect": "NoSchedule", "tollerationSeconds": 5}]);
    let (code, out) = apply(&client, DEPLOYS, "d", "m", false, typo.clone()).await;
    assert_eq!(code, 500, "{out}");
    assert_eq!(
        out["message"],
        "failed to create typed patch object (/d; apps/v1, Kind=Deployment): errors:\n  \
         .spec.template.spec.containers[name=\"c\"].imagePullPolicyy: field not declared in schema\n  \
         .spec.template.spec.tolerations[0].tollerationSeconds: field not declared in schema",
        "{out}"
    );
    let spec = &mut typo["spec"]["template"]["spec"];
    spec.as_object_mut().unwrap().remove("tolerations");
    spec["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("imagePullPolicyy");
    spec["containers"][0]["ports"] = json!([{"containerPort": 80, "colour": "red"}]);
    let (code, out) = apply(&client, DEPLOYS, "d", "m", false, typo).await;
    assert_eq!(code, 500, "{out}");
    assert_eq!(
        out["message"],
        "failed to create typed patch object (/d; apps/v1, Kind=Deployment): \
         .spec.template.spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"].colour: \
         field not declared in schema",
        "{out}"
    );

    let (code, out) = apply(
        &client,
        GADGETS,
        "g",
        "m",
        false,
        gadget(json!({"args": ["a"], "colour": "red"})),
    )
    .await;
    assert_eq!(code, 500, "{out}");
    assert_eq!(
        out["message"],
        "failed to create typed patch object (/g; ssa.example.com/v1, Kind=Gadget): \
         .spec.colour: field not declared in schema",
        "{out}"
    );
}

/// A `null` value in a map of an applied configuration is decoded as kube-apiserver's Go
/// types decode it: the zero value of the map's element (`"0"` for a quantity, `""` for a
/// string), kept and owned by the applier, as kubectl's own null-propagation test data
/// (a ResourceQuota's `hard` of nulls) gets; a create's body is decoded the same way.
#[tokio::test]
async fn applied_null_map_values_become_zero_values() {
    let cluster = TestCluster::start("ssa-null-values").await.unwrap();
    let client = cluster.client();
    let quota = json!({
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
        "spec": {"hard": {"limits.cpu": null, "pods": "2"}},
    });
    let out = apply_ok(
        &client,
        "/api/v1/namespaces/default/resourcequotas",
        "q",
        "m",
        quota,
    )
    .await;
    assert_eq!(
        out["spec"]["hard"],
        json!({"limits.cpu": "0", "pods": "2"}),
        "{out}"
    );
    let owned = &managed(&out)[0]["fieldsV1"]["f:spec"]["f:hard"];
    assert!(owned["f:limits.cpu"].is_object(), "{out}");

    let out = apply_ok(
        &client,
        CMS,
        "nulls",
        "m",
        configmap("nulls", json!({"k": null, "l": "v"})),
    )
    .await;
    assert_eq!(out["data"], json!({"k": "", "l": "v"}), "{out}");

    // A create decodes its body the same way.
    let (code, out) = send(
        &client,
        http::Method::POST,
        CMS,
        "application/json",
        &configmap("created", json!({"k": null})),
    )
    .await;
    assert_eq!(code, 201, "{out}");
    assert_eq!(out["data"], json!({"k": ""}), "{out}");
}
