//! Conformance-style tests: kube-rs typed and dynamic clients against in-process clusters.

mod common;

use common::{api_code, configmap};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;
use serde_json::json;

#[tokio::test]
async fn configmap_crud() {
    let cluster = TestCluster::start("crud").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");

    let created = cms
        .create(&PostParams::default(), &configmap("a", &[], "1"))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(
        meta.uid.is_some() && meta.resource_version.is_some() && meta.creation_timestamp.is_some()
    );

    let got = cms.get("a").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["value"], "1");

    let mut changed = got.clone();
    changed.data = Some([("value".to_string(), "2".to_string())].into());
    let replaced = cms
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.data.as_ref().unwrap()["value"], "2");
    assert_ne!(
        replaced.metadata.resource_version,
        got.metadata.resource_version
    );

    let patch = Patch::Merge(json!({ "data": { "extra": "x" } }));
    let patched = cms
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched.data.as_ref().unwrap()["extra"], "x");

    let json_patch: json_patch::Patch =
        serde_json::from_value(json!([{ "op": "replace", "path": "/data/value", "value": "3" }]))
            .unwrap();
    let patched = cms
        .patch("a", &PatchParams::default(), &Patch::Json::<()>(json_patch))
        .await
        .unwrap();
    assert_eq!(patched.data.as_ref().unwrap()["value"], "3");

    let names: Vec<_> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .collect();
    assert_eq!(names, ["a"]);

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let err = cms.get("a").await.unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("expected an API error, got {err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert!(
        status.message.contains("\"a\" not found"),
        "{}",
        status.message
    );

    assert_eq!(cluster.request_count("create", "configmaps"), 1);
    assert_eq!(cluster.request_count("patch", "configmaps"), 2);
    assert_eq!(cluster.request_count("get", "configmaps"), 2);
}

#[tokio::test]
async fn already_exists_and_conflict() {
    let cluster = TestCluster::start("conflicts").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let first = cms
        .create(&PostParams::default(), &configmap("a", &[], "1"))
        .await
        .unwrap();

    let err = cms
        .create(&PostParams::default(), &configmap("a", &[], "1"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );

    let mut newer = first.clone();
    newer.data = Some([("value".to_string(), "2".to_string())].into());
    cms.replace("a", &PostParams::default(), &newer)
        .await
        .unwrap();
    // `first` still carries the old resourceVersion.
    let err = cms
        .replace("a", &PostParams::default(), &first)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));

    let err = Api::<ConfigMap>::namespaced(cluster.client(), "nope")
        .get("a")
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(404));
}

#[tokio::test]
async fn default_namespaces_and_dry_run() {
    let cluster = TestCluster::start("namespaces").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let mut names: Vec<_> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|ns| ns.metadata.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );

    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "kube-system");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = cms.create(&dry, &configmap("dry", &[], "1")).await.unwrap();
    assert_eq!(answered.metadata.name.as_deref(), Some("dry"));
    assert_eq!(api_code(&cms.get("dry").await.unwrap_err()), Some(404));
}

#[tokio::test]
async fn label_and_field_selectors() {
    let cluster = TestCluster::start("selectors").await.unwrap();
    for (ns, name, labels) in [
        ("default", "web-a", vec![("app", "web"), ("tier", "a")]),
        ("default", "web-b", vec![("app", "web"), ("tier", "b")]),
        ("default", "db", vec![("app", "db")]),
        ("kube-system", "web-c", vec![("app", "web"), ("tier", "c")]),
    ] {
        let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), ns);
        cms.create(&PostParams::default(), &configmap(name, &labels, "x"))
            .await
            .unwrap();
    }
    let names = |list: kube::core::ObjectList<ConfigMap>| {
        let mut names: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        names.sort();
        names
    };
    let all: Api<ConfigMap> = Api::all(cluster.client());
    let default: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");

    let web = all
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(names(web), ["web-a", "web-b", "web-c"]);
    let set = default
        .list(&ListParams::default().labels("app=web,tier in (b,c)"))
        .await
        .unwrap();
    assert_eq!(names(set), ["web-b"]);
    let no_tier = all
        .list(&ListParams::default().labels("!tier"))
        .await
        .unwrap();
    assert_eq!(names(no_tier), ["db"]);
    let by_name = all
        .list(&ListParams::default().fields("metadata.name=web-c"))
        .await
        .unwrap();
    assert_eq!(names(by_name), ["web-c"]);
    let by_ns = all
        .list(
            &ListParams::default()
                .fields("metadata.namespace=default")
                .labels("app=web"),
        )
        .await
        .unwrap();
    assert_eq!(names(by_ns), ["web-a", "web-b"]);
    let err = all
        .list(&ListParams::default().labels("app in ("))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(400));
}

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let cluster = TestCluster::start("pages").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    for i in 0..7 {
        cms.create(
            &PostParams::default(),
            &configmap(&format!("cm-{i}"), &[], "x"),
        )
        .await
        .unwrap();
    }
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut params = ListParams::default().limit(3);
    loop {
        let page = cms.list(&params).await.unwrap();
        sizes.push(page.items.len());
        seen.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => {
                params = ListParams::default().limit(3).continue_token(&token)
            }
            _ => break,
        }
    }
    assert_eq!(sizes, [3, 3, 1]);
    seen.sort();
    let expected: Vec<String> = (0..7).map(|i| format!("cm-{i}")).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn finalizers_hold_deletion() {
    let cluster = TestCluster::start("finalizers").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let mut cm = configmap("held", &[], "x");
    cm.metadata.finalizers = Some(vec!["example.com/hold".to_string()]);
    cms.create(&PostParams::default(), &cm).await.unwrap();

    cms.delete("held", &DeleteParams::default()).await.unwrap();
    let still = cms.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());

    let release = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
    cms.patch("held", &PatchParams::default(), &release)
        .await
        .unwrap();
    assert_eq!(api_code(&cms.get("held").await.unwrap_err()), Some(404));
}

#[tokio::test]
async fn delete_collection_by_label() {
    let cluster = TestCluster::start("deletecollection").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        cms.create(
            &PostParams::default(),
            &configmap(name, &[("app", app)], "v"),
        )
        .await
        .unwrap();
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left: Vec<_> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(left, ["c"]);
    assert_eq!(cluster.request_count("deletecollection", "configmaps"), 1);
}

#[tokio::test]
async fn server_side_apply() {
    let cluster = TestCluster::start("ssa").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let apply = |value: &str| {
        Patch::Apply(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "applied" },
            "data": { "value": value },
        }))
    };
    let created = cms
        .patch("applied", &PatchParams::apply("mgr"), &apply("1"))
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["value"], "1");
    let managers: Vec<_> = created
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&"mgr".to_string()), "{managers:?}");

    let updated = cms
        .patch("applied", &PatchParams::apply("mgr").force(), &apply("2"))
        .await
        .unwrap();
    assert_eq!(updated.data.as_ref().unwrap()["value"], "2");
    assert_eq!(
        cms.get("applied").await.unwrap().data.unwrap()["value"],
        "2"
    );
    assert_eq!(cluster.request_count("patch", "configmaps"), 2);
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [
                    { "name": "main", "image": "main:1" },
                    { "name": "sidecar", "image": "sidecar:1" },
                ] },
            },
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn strategic_merge_on_deployment_and_status() {
    let cluster = TestCluster::start("strategic").await.unwrap();
    let deploys: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();

    // Containers merge by name: one image changes, the other container stays.
    let patch = Patch::Strategic(json!({
        "spec": { "template": { "spec": { "containers": [ { "name": "main", "image": "main:2" } ] } } }
    }));
    let patched = deploys
        .patch("web", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let containers = patched.spec.template.spec.unwrap().containers;
    let images: Vec<_> = containers
        .iter()
        .map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(images, [("main", "main:2"), ("sidecar", "sidecar:1")]);

    let status = Patch::Merge(json!({ "status": { "replicas": 1, "readyReplicas": 1 } }));
    deploys
        .patch_status("web", &PatchParams::default(), &status)
        .await
        .unwrap();
    let got = deploys.get_status("web").await.unwrap();
    assert_eq!(got.status.unwrap().ready_replicas, Some(1));
    assert_eq!(cluster.request_count("patch", "deployments/status"), 1);
    assert_eq!(cluster.request_count("get", "deployments/status"), 1);
}

#[tokio::test]
async fn raw_http_errors() {
    let cluster = TestCluster::start("raw").await.unwrap();
    let client = cluster.client();
    let send = |method: &str, uri: &str, content_type: Option<&str>, body: &str| {
        let mut builder = http::Request::builder().method(method).uri(uri);
        if let Some(ct) = content_type {
            builder = builder.header(http::header::CONTENT_TYPE, ct);
        }
        let request = builder.body(body.as_bytes().to_vec()).unwrap();
        let client = client.clone();
        async move {
            client
                .send(request.map(Into::into))
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        send("GET", "/api/v1/namespaces/default/widgets", None, "").await,
        404
    );
    assert_eq!(send("GET", "/nothing/here", None, "").await, 404);
    assert_eq!(
        send("PUT", "/api/v1/namespaces/default/configmaps", None, "{}").await,
        405
    );
    let proto = Some("application/vnd.kubernetes.protobuf");
    assert_eq!(
        send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            proto,
            "k8s"
        )
        .await,
        415
    );
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: b\n";
    assert_eq!(
        send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some("application/yaml"),
            yaml
        )
        .await,
        201
    );
    assert_eq!(
        send(
            "GET",
            "/api/v1/namespaces/default/configmaps/from-yaml",
            None,
            ""
        )
        .await,
        200
    );
    assert_eq!(send("GET", "/healthz", None, "").await, 200);
    assert_eq!(send("GET", "/openapi/v2", None, "").await, 404);
}
