//! Conformance-style tests, object lifecycle: kube-rs typed and dynamic clients create, read,
//! update and delete against an in-process cluster (conflicts, dry runs, finalizers, raw HTTP
//! errors).

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;
use mcr_test_support::{api_code, configmap};
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

    if let Some(counts) = mcr_test_support::request_counts(&cluster) {
        assert_eq!(counts.get("create", "configmaps"), 1);
        assert_eq!(counts.get("patch", "configmaps"), 2);
        assert_eq!(counts.get("get", "configmaps"), 2);
    }
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
    // Protobuf bodies: a malformed envelope is a 400; an unknown content type is a 415.
    let proto = Some("application/vnd.kubernetes.protobuf");
    assert_eq!(
        send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            proto,
            "k8s"
        )
        .await,
        400
    );
    assert_eq!(
        send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some("application/x-something"),
            "{}"
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
    assert_eq!(send("GET", "/openapi/v2", None, "").await, 200);
}
