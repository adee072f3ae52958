//! Metadata-only content negotiation (`Accept: ...;as=PartialObjectMetadata[List]`): kube's
//! `get_metadata`, `list_metadata`, `watch_metadata` and `patch_metadata`, raw requests, and
//! the 406 answers, as a real API server gives them.

use std::collections::BTreeSet;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::TypeMeta;
use mcr_envtest::TestCluster;
use mcr_test_support::{DEADLINE, api_code, configmap};
use serde_json::{Value, json};

const OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const PATH: &str = "/api/v1/namespaces/default/configmaps";

fn is_partial(types: Option<&TypeMeta>) -> bool {
    types.is_some_and(|t| t.kind == "PartialObjectMetadata" && t.api_version == "meta.k8s.io/v1")
}

/// Starts a cluster holding ConfigMaps `a` (app=web) and `b` (app=db) in `default`.
async fn cluster_with_two(name: &str) -> (TestCluster, Api<ConfigMap>) {
    let cluster = TestCluster::start(name).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    for (cm, app) in [("a", "web"), ("b", "db")] {
        cms.create(&PostParams::default(), &configmap(cm, &[("app", app)], "1"))
            .await
            .unwrap();
    }
    (cluster, cms)
}

/// A raw GET with an `Accept` header, parsed; the error's HTTP code when it fails.
async fn raw_get(client: &kube::Client, uri: &str, accept: &str) -> Result<Value, Option<u16>> {
    let req = http::Request::get(uri)
        .header(http::header::ACCEPT, accept)
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(req).await.map_err(|e| api_code(&e))?;
    Ok(serde_json::from_str(&text).unwrap())
}

/// The top-level fields of a JSON object.
fn fields(value: &Value) -> BTreeSet<&str> {
    value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

/// The next event that is not a BOOKMARK (whose types are checked on the way).
async fn next_change<S>(events: &mut S) -> WatchEvent<PartialObjectMeta<ConfigMap>>
where
    S: Stream<Item = kube::Result<WatchEvent<PartialObjectMeta<ConfigMap>>>> + Unpin,
{
    loop {
        let event = tokio::time::timeout(DEADLINE, events.next())
            .await
            .expect("a watch event within the deadline")
            .expect("the watch stays open")
            .unwrap();
        match event {
            WatchEvent::Bookmark(b) => assert_eq!(b.types.kind, "PartialObjectMetadata"),
            other => return other,
        }
    }
}

#[tokio::test]
async fn get_and_list_return_metadata_only() {
    let (cluster, cms) = cluster_with_two("meta-get-list").await;
    let full = cms.get("a").await.unwrap();

    let meta = cms.get_metadata("a").await.unwrap();
    assert!(is_partial(meta.types.as_ref()), "{:?}", meta.types);
    assert_eq!(meta.metadata.name.as_deref(), Some("a"));
    assert_eq!(meta.metadata.labels, full.metadata.labels);
    assert_eq!(
        meta.metadata.resource_version,
        full.metadata.resource_version
    );
    assert_eq!(meta.metadata.uid, full.metadata.uid);

    let list = cms.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert_eq!(list.types.api_version, "meta.k8s.io/v1");
    assert!(list.metadata.resource_version.is_some());
    let names: Vec<_> = list.items.iter().map(|m| m.metadata.name.clone()).collect();
    assert_eq!(names, [Some("a".into()), Some("b".into())]);
    assert!(list.items.iter().all(|m| is_partial(m.types.as_ref())));
    assert_eq!(
        list.items[1].metadata.labels,
        Some([("app".to_string(), "db".to_string())].into())
    );

    // Selectors and pages work as for full lists.
    let web = cms
        .list_metadata(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    assert_eq!(web.items[0].metadata.name.as_deref(), Some("a"));
    let page = cms
        .list_metadata(&ListParams::default().limit(1))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(page.metadata.continue_.is_some());

    // On the wire: nothing but kind, apiVersion and metadata.
    let client = cluster.client();
    let object = raw_get(&client, &format!("{PATH}/a"), OBJECT)
        .await
        .unwrap();
    assert_eq!(object["kind"], "PartialObjectMetadata");
    assert_eq!(fields(&object), ["apiVersion", "kind", "metadata"].into());
    let list = raw_get(&client, PATH, LIST).await.unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(
        fields(&list),
        ["apiVersion", "items", "kind", "metadata"].into()
    );
    for item in list["items"].as_array().unwrap() {
        assert_eq!(item["kind"], "PartialObjectMetadata");
        assert_eq!(item["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(fields(item), ["apiVersion", "kind", "metadata"].into());
    }
}

#[tokio::test]
async fn watch_returns_metadata_only() {
    let (_cluster, cms) = cluster_with_two("meta-watch").await;
    let rv = cms
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let events = cms
        .watch_metadata(&WatchParams::default(), &rv)
        .await
        .unwrap();
    let mut events = Box::pin(events);

    let labels = json!({"metadata": {"labels": {"tier": "front"}}});
    let patched = cms
        .patch("a", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    let WatchEvent::Modified(meta) = next_change(&mut events).await else {
        panic!("expected MODIFIED");
    };
    assert!(is_partial(meta.types.as_ref()), "{:?}", meta.types);
    assert_eq!(meta.metadata.name.as_deref(), Some("a"));
    assert_eq!(meta.metadata.labels, patched.metadata.labels);
    assert_eq!(
        meta.metadata.resource_version,
        patched.metadata.resource_version
    );

    cms.create(&PostParams::default(), &configmap("c", &[], "1"))
        .await
        .unwrap();
    let WatchEvent::Added(meta) = next_change(&mut events).await else {
        panic!("expected ADDED");
    };
    assert!(is_partial(meta.types.as_ref()));
    assert_eq!(meta.metadata.name.as_deref(), Some("c"));

    cms.delete("b", &DeleteParams::default()).await.unwrap();
    let WatchEvent::Deleted(meta) = next_change(&mut events).await else {
        panic!("expected DELETED");
    };
    assert!(is_partial(meta.types.as_ref()));
    assert_eq!(meta.metadata.name.as_deref(), Some("b"));
}

#[tokio::test]
async fn raw_watch_events_and_bookmark_are_metadata_only() {
    let (cluster, _cms) = cluster_with_two("meta-raw-watch").await;
    // A streaming list: the initial ADDED events, then the initial-events-end BOOKMARK; the
    // server ends the watch after a second and request_text returns the whole body.
    let uri = format!(
        "{PATH}?watch=true&timeoutSeconds=1&sendInitialEvents=true&allowWatchBookmarks=true\
         &resourceVersionMatch=NotOlderThan"
    );
    let req = http::Request::get(uri)
        .header(http::header::ACCEPT, OBJECT)
        .body(Vec::new())
        .unwrap();
    let body = cluster.client().request_text(req).await.unwrap();
    let events: Vec<Value> = body
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let added: Vec<&Value> = events.iter().filter(|e| e["type"] == "ADDED").collect();
    assert_eq!(added.len(), 2, "{body}");
    for event in &added {
        assert_eq!(event["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            fields(&event["object"]),
            ["apiVersion", "kind", "metadata"].into()
        );
    }
    let end = events
        .iter()
        .find(|e| e["type"] == "BOOKMARK")
        .expect("the initial-events-end bookmark");
    assert_eq!(end["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn full_objects_without_the_header() {
    let (cluster, cms) = cluster_with_two("meta-full").await;
    let cm = cms.get("a").await.unwrap();
    assert_eq!(cm.data, Some([("value".into(), "1".into())].into()));
    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    assert!(list.items.iter().all(|cm| cm.data.is_some()));

    let rv = list.metadata.resource_version.unwrap();
    let mut events = Box::pin(cms.watch(&WatchParams::default(), &rv).await.unwrap());
    cms.create(&PostParams::default(), &configmap("c", &[], "2"))
        .await
        .unwrap();
    let added = loop {
        let event = tokio::time::timeout(DEADLINE, events.next())
            .await
            .expect("a watch event within the deadline")
            .expect("the watch stays open")
            .unwrap();
        if let WatchEvent::Added(cm) = event {
            break cm;
        }
    };
    assert_eq!(added.metadata.name.as_deref(), Some("c"));
    assert_eq!(added.data, Some([("value".into(), "2".into())].into()));

    let client = cluster.client();
    let raw = raw_get(&client, &format!("{PATH}/a"), "application/json")
        .await
        .unwrap();
    assert_eq!(raw["kind"], "ConfigMap");
    assert_eq!(raw["data"]["value"], "1");
    // An unknown conversion is skipped for the next clause.
    let accept = "application/json;as=Foo;g=meta.k8s.io;v=v1,application/json";
    let raw = raw_get(&client, &format!("{PATH}/a"), accept)
        .await
        .unwrap();
    assert_eq!(raw["data"]["value"], "1");
}

#[tokio::test]
async fn writes_honour_the_header() {
    let (cluster, cms) = cluster_with_two("meta-writes").await;
    let labels = json!({"metadata": {"labels": {"tier": "back"}}});
    let meta = cms
        .patch_metadata("b", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    assert!(is_partial(meta.types.as_ref()), "{:?}", meta.types);
    assert_eq!(
        meta.metadata
            .labels
            .unwrap()
            .get("tier")
            .map(String::as_str),
        Some("back")
    );
    // The data was kept; it is just not in the answer.
    assert!(cms.get("b").await.unwrap().data.is_some());

    let req = http::Request::post(PATH)
        .header(http::header::ACCEPT, OBJECT)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(br#"{"metadata":{"name":"c"},"data":{"k":"v"}}"#.to_vec())
        .unwrap();
    let created: Value =
        serde_json::from_str(&cluster.client().request_text(req).await.unwrap()).unwrap();
    assert_eq!(created["kind"], "PartialObjectMetadata");
    assert_eq!(created["metadata"]["name"], "c");
    assert!(created.get("data").is_none());
}

#[tokio::test]
async fn wrong_or_unknown_conversions_are_not_acceptable() {
    let (cluster, _cms) = cluster_with_two("meta-406").await;
    let client = cluster.client();
    let object = format!("{PATH}/a");
    let cases = [
        // An object asked for as a list, a list as an object: 406 even with a fallback
        // clause, as on a real server (negotiation does not know what the verb returns).
        (object.as_str(), LIST.to_string()),
        (object.as_str(), format!("{LIST},application/json")),
        (PATH, OBJECT.to_string()),
        (PATH, format!("{OBJECT},application/json")),
        // Unknown conversions, or PartialObjectMetadata without its group and version.
        (
            object.as_str(),
            "application/json;as=Foo;g=meta.k8s.io;v=v1".to_string(),
        ),
        (
            object.as_str(),
            "application/json;as=PartialObjectMetadata".to_string(),
        ),
    ];
    for (uri, accept) in cases {
        let code = raw_get(&client, uri, &accept).await.unwrap_err();
        assert_eq!(code, Some(406), "GET {uri} with Accept {accept}");
    }
}
