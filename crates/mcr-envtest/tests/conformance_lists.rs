//! Conformance-style tests, collections: label and field selectors, pagination and
//! deletecollection.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use mcr_envtest::TestCluster;
use mcr_test_support::{api_code, configmap};

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
    // In `default`: a real kube-system holds the API server's own ConfigMaps.
    let no_tier = default
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
    if let Some(counts) = mcr_test_support::request_counts(&cluster) {
        assert_eq!(counts.get("deletecollection", "configmaps"), 1);
    }
}

/// Each kind accepts the field labels kube-apiserver gives it (Nodes' `spec.unschedulable`,
/// Pods' `spec.nodeName` and `status.phase`, Secrets' `type`, ...), with the values its
/// registry selects on, and refuses others with the kind's own message.
#[tokio::test]
async fn field_labels_per_kind() {
    use k8s_openapi::api::core::v1::{Node, Pod, Secret};
    let cluster = TestCluster::start("field-labels").await.unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    for (name, unschedulable) in [("cordoned", true), ("open", false)] {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "spec": {"unschedulable": unschedulable}}))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let listed = |list: kube::core::ObjectList<Node>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .filter(|n| n == "cordoned" || n == "open")
            .collect()
    };
    let cordoned = nodes
        .list(&ListParams::default().fields("spec.unschedulable=true"))
        .await
        .unwrap();
    assert_eq!(listed(cordoned), ["cordoned"]);
    let open = nodes
        .list(&ListParams::default().fields("spec.unschedulable!=true"))
        .await
        .unwrap();
    assert_eq!(listed(open), ["open"]);
    let err = nodes
        .list(&ListParams::default().fields("metadata.namespace=x"))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(400));
    assert!(
        err.to_string()
            .contains("field label not supported: metadata.namespace"),
        "{err}"
    );

    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    for (name, node) in [("on-n1", Some("n1")), ("unbound", None)] {
        let mut spec = serde_json::json!({"containers": [{"name": "c", "image": "busybox"}]});
        if let Some(node) = node {
            spec["nodeName"] = serde_json::json!(node);
        }
        let pod: Pod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
                .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let on_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName=n1,status.phase=Pending"))
        .await
        .unwrap();
    let names: Vec<String> = on_n1
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(names, ["on-n1"]);
    let unbound = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(unbound.items.len(), 1);

    let secrets: Api<Secret> = Api::namespaced(cluster.client(), "default");
    let tls = secrets
        .list(&ListParams::default().fields("type=kubernetes.io/tls"))
        .await
        .unwrap();
    assert!(tls.items.is_empty());

    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let err = cms
        .list(&ListParams::default().fields("data.x=1"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "\"data.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        ),
        "{err}"
    );
}
