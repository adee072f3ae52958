//! CustomResourceDefinitions and discovery, through kube-rs.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{CustomResource, Discovery};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use mcr_test_support::{DEADLINE, api_code};
use serde::{Deserialize, Serialize};
use serde_json::json;

mod raw;

/// A typed custom resource (no schema: the emulator does not validate schemas).
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    schema = "disabled"
)]
pub struct WidgetSpec {
    size: u32,
}

/// Status of a [`Widget`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WidgetStatus {
    ready: bool,
}

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"] },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } },
                "subresources": { "status": {} },
            }],
        },
    }))
    .unwrap()
}

async fn install_widgets(cluster: &TestCluster) {
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let widgets: Api<Widget> = Api::namespaced(cluster.client(), "default");
    eventually_async("widgets to be served", DEADLINE, || {
        let widgets = widgets.clone();
        async move { widgets.list(&ListParams::default()).await.is_ok() }
    })
    .await;
}

/// kube-apiserver answers a CRD's create (a dry run's too) before its naming and
/// establishing controllers run: no names accepted, no conditions. They come after (never
/// for a dry run), written by `kube-apiserver` as a status `Update` that owns the fields it
/// set, not the conditions list itself, which the create made (null).
#[tokio::test]
async fn crd_create_answers_before_its_names_are_accepted() {
    let cluster = TestCluster::start("crd-first-answer").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let unaccepted = |crd: &CustomResourceDefinition| {
        let status = serde_json::to_value(&crd.status).unwrap();
        assert_eq!(status["acceptedNames"], json!({"kind": "", "plural": ""}));
        assert_eq!(status["conditions"], serde_json::Value::Null);
        assert_eq!(status["storedVersions"], json!(["v1"]));
        let managers: Vec<_> = crd
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|e| e.manager.clone().unwrap_or_default())
            .collect();
        assert!(
            !managers.contains(&"kube-apiserver".to_string()),
            "{managers:?}"
        );
    };
    let dry = crds
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &widget_crd(),
        )
        .await
        .unwrap();
    unaccepted(&dry);
    let created = crds
        .create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    unaccepted(&created);

    let established = |crd: &CustomResourceDefinition| {
        crd.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            })
    };
    eventually_async("the CRD to be established", DEADLINE, || {
        let crds = crds.clone();
        async move {
            crds.get("widgets.example.com")
                .await
                .is_ok_and(|c| established(&c))
        }
    })
    .await;
    let crd = crds.get("widgets.example.com").await.unwrap();
    let status = serde_json::to_value(&crd.status).unwrap();
    assert_eq!(status["acceptedNames"]["kind"], "Widget");
    assert_eq!(status["acceptedNames"]["listKind"], "WidgetList");
    let entry = crd
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some("kube-apiserver"))
        .map(|e| serde_json::to_value(e).unwrap())
        .unwrap();
    assert_eq!(entry["subresource"], "status", "{entry}");
    let owned = &entry["fieldsV1"]["f:status"];
    assert!(
        owned["f:conditions"]["k:{\"type\":\"Established\"}"]["."].is_object(),
        "{entry}"
    );
    assert!(owned["f:conditions"].get(".").is_none(), "{entry}");
    assert!(owned["f:acceptedNames"].get(".").is_none(), "{entry}");
    assert!(owned["f:acceptedNames"]["f:kind"].is_object(), "{entry}");
}

#[tokio::test]
async fn crd_lifecycle_typed() {
    let cluster = TestCluster::start("crd-typed").await.unwrap();
    let widgets: Api<Widget> = Api::namespaced(cluster.client(), "default");
    assert_eq!(
        api_code(&widgets.list(&ListParams::default()).await.unwrap_err()),
        Some(404)
    );
    install_widgets(&cluster).await;

    let w = Widget::new("w1", WidgetSpec { size: 3 });
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.spec.size, 3);
    let status = Patch::Merge(json!({ "status": { "ready": true } }));
    widgets
        .patch_status("w1", &PatchParams::default(), &status)
        .await
        .unwrap();
    let got = widgets.get("w1").await.unwrap();
    assert_eq!(got.status, Some(WidgetStatus { ready: true }));
    if let Some(counts) = mcr_test_support::request_counts(&cluster) {
        assert_eq!(counts.get("patch", "widgets/status"), 1);
    }

    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually_async("widgets to stop being served", DEADLINE, || {
        let widgets = widgets.clone();
        async move { matches!(widgets.list(&ListParams::default()).await, Err(e) if api_code(&e) == Some(404)) }
    })
    .await;
}

#[tokio::test]
async fn crd_lifecycle_dynamic() {
    let cluster = TestCluster::start("crd-dynamic").await.unwrap();
    install_widgets(&cluster).await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(cluster.client(), "default", &resource);
    let mut obj = DynamicObject::new("dyn", &resource);
    obj.data = json!({ "spec": { "size": 7 } });
    api.create(&PostParams::default(), &obj).await.unwrap();
    let got = api.get("dyn").await.unwrap();
    assert_eq!(got.data["spec"]["size"], 7);
    api.patch(
        "dyn",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "size": 8 } })),
    )
    .await
    .unwrap();
    let names: Vec<_> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(names, ["dyn"]);
    assert_eq!(api.get("dyn").await.unwrap().data["spec"]["size"], 8);
}

#[tokio::test]
async fn kube_discovery_sees_builtins_and_crds() {
    let cluster = TestCluster::start("discovery").await.unwrap();
    install_widgets(&cluster).await;
    let discovery = Discovery::new(cluster.client()).run().await.unwrap();
    for group in [
        "",
        "apps",
        "coordination.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
        "example.com",
    ] {
        assert!(discovery.has_group(group), "group {group:?} missing");
    }
    let (cm, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .unwrap();
    assert_eq!(cm.plural, "configmaps");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let (deploy, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
        .unwrap();
    assert_eq!(deploy.plural, "deployments");
    assert!(
        caps.subresources
            .iter()
            .any(|(sub, _)| sub.plural == "deployments/status" || sub.plural == "status"),
        "{:?}",
        caps.subresources
    );
    let (ns, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Namespace"))
        .unwrap();
    assert_eq!(
        (ns.plural.as_str(), caps.scope.clone()),
        ("namespaces", kube::discovery::Scope::Cluster)
    );
    let (widget, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
        .unwrap();
    assert_eq!(widget.plural, "widgets");
    if let Some(counts) = mcr_test_support::request_counts(&cluster) {
        assert!(counts.get("get", "discovery") >= 5);
    }
}

/// A custom resource takes no unconditional update and no strategic merge patch, with
/// kube-apiserver's answers (found by `cargo xtask fidelity`).
#[tokio::test]
async fn custom_resource_refuses_unconditional_update_and_strategic_patch() {
    let cluster = TestCluster::start("crd-refusals").await.unwrap();
    install_widgets(&cluster).await;
    let widgets: Api<Widget> = Api::namespaced(cluster.client(), "default");
    let mut w = widgets
        .create(
            &PostParams::default(),
            &Widget::new("w", WidgetSpec { size: 1 }),
        )
        .await
        .unwrap();
    w.metadata.resource_version = None;
    w.spec.size = 2;
    let err = widgets
        .replace("w", &PostParams::default(), &w)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "widgets.example.com \"w\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );
    let err = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 3}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert_eq!(status.code, 415);
    assert_eq!(
        status.message,
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
}

fn gadgets_crd(extra_property: Option<(&str, serde_json::Value)>) -> serde_json::Value {
    let mut spec = json!({"type": "object", "properties": {
        "size": {"type": "integer", "default": 3},
        "color": {"type": "string", "nullable": true},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "parts": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "count": {"type": "integer", "default": 1}}}}}});
    if let Some((name, schema)) = extra_property {
        spec["properties"][name] = schema;
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}})
}

/// A CRD gets kube-apiserver's defaults (singular, list kind, conversion `None`) and the status
/// its controllers write, owned by `kube-apiserver`; its objects are pruned and defaulted by
/// its structural schema on write, and defaulted again on read when the CRD gains a default.
#[tokio::test]
async fn crd_defaults_and_structural_pruning_and_defaulting() {
    let cluster = TestCluster::start("crd-structural").await.unwrap();
    let client = cluster.client();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd = raw::post(&client, crds, gadgets_crd(None)).await.body;
    assert!(crd["metadata"]["uid"].is_string(), "{crd}");
    assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
    assert_eq!(
        crd["spec"]["names"],
        json!({"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"})
    );
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually_async(
        "the CRD's status entry of kube-apiserver",
        DEADLINE,
        || async {
            api.get("gadgets.example.com").await.is_ok_and(|crd| {
                crd.metadata
                    .managed_fields
                    .unwrap_or_default()
                    .iter()
                    .any(|e| {
                        e.manager.as_deref() == Some("kube-apiserver")
                            && e.subresource.as_deref() == Some("status")
                            && e.fields_v1.as_ref().is_some_and(|f| {
                                f.0.pointer("/f:status/f:conditions/k:{\"type\":\"Established\"}")
                                    .is_some()
                            })
                    })
            })
        },
    )
    .await;
    let gadgets = "/apis/example.com/v1/namespaces/default/gadgets";
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
        "top": 1, "spec": {"foo": 1, "color": null, "extra": {"x": {"y": 1}},
            "parts": [{"name": "a", "bar": 2}]}});
    // kube-apiserver serves the new resource once it has established the CRD.
    eventually_async("gadgets to be served", DEADLINE, || async {
        raw::get(&client, gadgets).await.code == 200
    })
    .await;
    let created = raw::post(
        &client,
        &format!("{gadgets}?fieldValidation=Strict"),
        gadget.clone(),
    )
    .await;
    assert_eq!(created.code, 400, "{}", created.body);
    assert_eq!(
        created.body["message"],
        "Gadget in version \"v1\" cannot be handled as a Gadget: strict decoding error: unknown field \"spec.foo\", unknown field \"spec.parts[0].bar\", unknown field \"top\""
    );
    let created = raw::post(&client, gadgets, gadget).await;
    assert_eq!(created.code, 201, "{}", created.body);
    let mut warnings = created.warnings;
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "299 - \"unknown field \\\"spec.foo\\\"\"",
            "299 - \"unknown field \\\"spec.parts[0].bar\\\"\"",
            "299 - \"unknown field \\\"top\\\"\"",
        ]
    );
    assert_eq!(created.body.get("top"), None);
    assert_eq!(
        created.body["spec"],
        json!({"size": 3, "color": null, "extra": {"x": {"y": 1}}, "parts": [{"name": "a", "count": 1}]})
    );

    // A default added later shows on the stored object when it is read.
    let current = raw::get(&client, &format!("{crds}/gadgets.example.com")).await;
    assert_eq!(current.code, 200);
    let mut updated = gadgets_crd(Some(("mode", json!({"type": "string", "default": "auto"}))));
    updated["metadata"]["resourceVersion"] = current.body["metadata"]["resourceVersion"].clone();
    let replaced = raw::send(
        &client,
        "PUT",
        &format!("{crds}/gadgets.example.com"),
        "application/json",
        updated,
    )
    .await;
    assert_eq!(replaced.code, 200, "{}", replaced.body);
    eventually_async("the new default on read", DEADLINE, || async {
        let g = raw::get(&client, &format!("{gadgets}/g")).await.body;
        g["spec"]["mode"] == "auto"
    })
    .await;
}

/// A CRD in a group of the Kubernetes community (`k8s.io`, `kubernetes.io` and their
/// subdomains) needs the `api-approved.kubernetes.io` annotation: a create without it, or with
/// a value that is neither a URL nor `unapproved...`, is refused (422) naming the annotation;
/// with it, kube-apiserver's API-approval controller adds a `KubernetesAPIApprovalPolicyConformant`
/// condition (as the volume snapshot CRDs of Kubernetes' add-ons get), kept up to date when the
/// annotation changes.
#[tokio::test]
async fn crd_in_a_protected_group_needs_approval_and_gets_its_condition() {
    let cluster = TestCluster::start("crd-api-approval").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let crd = |annotation: Option<&str>| -> CustomResourceDefinition {
        let mut value = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": "snaps.storage.example.k8s.io" },
            "spec": {
                "group": "storage.example.k8s.io",
                "scope": "Cluster",
                "names": { "plural": "snaps", "kind": "Snap" },
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": { "openAPIV3Schema": { "type": "object" } },
                }],
            },
        });
        if let Some(a) = annotation {
            value["metadata"]["annotations"] = json!({ "api-approved.kubernetes.io": a });
        }
        serde_json::from_value(value).unwrap()
    };
    for (annotation, expected) in [
        (
            None,
            "metadata.annotations[api-approved.kubernetes.io]: Required value",
        ),
        (
            Some("yes"),
            "metadata.annotations[api-approved.kubernetes.io]: Invalid value: \"yes\"",
        ),
    ] {
        let err = crds
            .create(&PostParams::default(), &crd(annotation))
            .await
            .unwrap_err();
        assert_eq!(api_code(&err), Some(422), "{err}");
        assert!(err.to_string().contains(expected), "{err}");
    }

    let url = "https://github.com/kubernetes/enhancements/pull/1111";
    crds.create(&PostParams::default(), &crd(Some(url)))
        .await
        .unwrap();
    let condition = |crd: &CustomResourceDefinition| {
        crd.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == "KubernetesAPIApprovalPolicyConformant")
                    .cloned()
            })
    };
    eventually_async("the approval condition", DEADLINE, || {
        let crds = crds.clone();
        async move {
            crds.get("snaps.storage.example.k8s.io")
                .await
                .is_ok_and(|c| condition(&c).is_some())
        }
    })
    .await;
    let approved = condition(&crds.get("snaps.storage.example.k8s.io").await.unwrap()).unwrap();
    assert_eq!(approved.status, "True");
    assert_eq!(approved.reason.as_deref(), Some("ApprovedAnnotation"));
    assert_eq!(
        approved.message.as_deref(),
        Some(&*format!("approved in {url}"))
    );

    let patch = json!({"metadata": {"annotations": {"api-approved.kubernetes.io": "unapproved, experimental"}}});
    crds.patch(
        "snaps.storage.example.k8s.io",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .unwrap();
    eventually_async("the condition to follow the annotation", DEADLINE, || {
        let crds = crds.clone();
        async move {
            crds.get("snaps.storage.example.k8s.io")
                .await
                .is_ok_and(|c| condition(&c).is_some_and(|c| c.status == "False"))
        }
    })
    .await;
    let bypassed = condition(&crds.get("snaps.storage.example.k8s.io").await.unwrap()).unwrap();
    assert_eq!(bypassed.reason.as_deref(), Some("UnapprovedAnnotation"));
    // The status is the controller's: the patch's manager owns none of it.
    let crd = crds.get("snaps.storage.example.k8s.io").await.unwrap();
    for entry in crd.metadata.managed_fields.iter().flatten() {
        let owned = serde_json::to_value(&entry.fields_v1).unwrap();
        let is_controller = entry.manager.as_deref() == Some("kube-apiserver");
        assert_eq!(owned.get("f:status").is_some(), is_controller, "{entry:?}");
    }
    assert_eq!(
        bypassed.message.as_deref(),
        Some("not approved: \"unapproved, experimental\"")
    );
}
