//! A namespace cluster's client: requests land in the host namespace, answers come back as
//! `default`, other namespaces are refused.

mod support;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use mcr_envtest::TestCluster;
use mcr_provider_namespace::namespace_client;
use serde_json::json;
use support::{cm, create_cm, create_namespace, init_tracing};

fn status_code(err: kube::Error) -> u16 {
    match err {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API status, got {other:?}"),
    }
}

#[tokio::test]
async fn reads_see_only_the_namespace_as_default() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    create_namespace(&host, "team-a", &[]).await;
    create_namespace(&host, "team-b", &[]).await;
    create_cm(&host, "team-a", "a1", "x").await;
    create_cm(&host, "team-b", "b1", "y").await;
    create_cm(&host, "default", "d1", "z").await;

    let client = namespace_client(host.clone(), "team-a");
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let a1 = cms.get("a1").await.unwrap();
    assert_eq!(a1.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(a1.data.unwrap()["v"], "x");
    // The host's own `default` is not this cluster's `default`.
    assert_eq!(status_code(cms.get("d1").await.unwrap_err()), 404);

    let listed = cms.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = listed
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a1"]);
    // A cluster-wide list is a list of the namespace.
    let all: Api<ConfigMap> = Api::all(client.clone());
    let listed = all.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        listed.items[0].metadata.namespace.as_deref(),
        Some("default")
    );

    // Other namespaces do not exist here.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "team-b");
    assert_eq!(status_code(other.get("b1").await.unwrap_err()), 404);
    assert_eq!(
        status_code(other.list(&ListParams::default()).await.unwrap_err()),
        404
    );
    let err = other
        .create(&PostParams::default(), &cm("new", "team-b", "v"))
        .await
        .unwrap_err();
    assert_eq!(status_code(err), 404);

    // The namespace `default` is the real one, renamed; listing namespaces is refused.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let default = namespaces.get("default").await.unwrap();
    assert_eq!(default.metadata.name.as_deref(), Some("default"));
    assert_eq!(
        status_code(namespaces.get("team-b").await.unwrap_err()),
        404
    );
    assert_eq!(
        status_code(namespaces.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    assert_eq!(
        status_code(
            namespaces
                .delete("default", &DeleteParams::default())
                .await
                .unwrap_err()
        ),
        403
    );
    // Nothing was deleted on the host.
    Api::<Namespace>::all(host.clone())
        .get("team-a")
        .await
        .unwrap();
}

#[tokio::test]
async fn writes_patches_apply_and_deletes_land_in_the_host_namespace() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    create_namespace(&host, "team-a", &[]).await;
    let client = namespace_client(host.clone(), "team-a");
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let on_host: Api<ConfigMap> = Api::namespaced(host.clone(), "team-a");
    let host_default: Api<ConfigMap> = Api::namespaced(host.clone(), "default");

    // Create.
    let created = cms
        .create(&PostParams::default(), &cm("c", "default", "1"))
        .await
        .unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(on_host.get("c").await.unwrap().data.unwrap()["v"], "1");
    assert!(host_default.get_opt("c").await.unwrap().is_none());

    // Replace.
    let mut updated = created.clone();
    updated.data = Some([("v".to_string(), "2".to_string())].into());
    let replaced = cms
        .replace("c", &PostParams::default(), &updated)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(on_host.get("c").await.unwrap().data.unwrap()["v"], "2");

    // Merge, JSON and strategic patches.
    let merge = json!({"metadata": {"namespace": "default"}, "data": {"v": "3"}});
    let patched = cms
        .patch("c", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    assert_eq!(patched.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(on_host.get("c").await.unwrap().data.unwrap()["v"], "3");
    // JSON patch, sent raw (kube's `Patch::Json` needs a feature mcr does not enable).
    let ops = json!([{"op": "replace", "path": "/data/v", "value": "4"}]);
    let request = http::Request::patch("/api/v1/namespaces/default/configmaps/c")
        .header("content-type", "application/json-patch+json")
        .body(serde_json::to_vec(&ops).unwrap())
        .unwrap();
    let out: ConfigMap = client.request(request).await.unwrap();
    assert_eq!(out.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(on_host.get("c").await.unwrap().data.unwrap()["v"], "4");
    let strategic = json!({"data": {"w": "5"}});
    cms.patch("c", &PatchParams::default(), &Patch::Strategic(&strategic))
        .await
        .unwrap();
    assert_eq!(on_host.get("c").await.unwrap().data.unwrap()["w"], "5");

    // Server-side apply (the object names namespace `default`).
    let applied = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "applied", "namespace": "default"},
        "data": {"v": "ssa"}
    });
    let out = cms
        .patch(
            "applied",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap();
    assert_eq!(out.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(
        on_host.get("applied").await.unwrap().data.unwrap()["v"],
        "ssa"
    );
    assert!(host_default.get_opt("applied").await.unwrap().is_none());

    // Delete.
    cms.delete("c", &DeleteParams::default()).await.unwrap();
    assert!(on_host.get_opt("c").await.unwrap().is_none());
    assert!(on_host.get_opt("applied").await.unwrap().is_some());
}

#[tokio::test]
async fn watches_see_the_namespace_as_default() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let host = env.client();
    create_namespace(&host, "team-a", &[]).await;
    create_namespace(&host, "team-b", &[]).await;
    let client = namespace_client(host.clone(), "team-a");
    // A cluster-wide watch from the namespace cluster.
    let all: Api<ConfigMap> = Api::all(client);
    let rv = all
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = all
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    create_cm(&host, "team-b", "other", "x").await;
    create_cm(&host, "team-a", "mine", "y").await;
    Api::<ConfigMap>::namespaced(host.clone(), "team-a")
        .delete("mine", &DeleteParams::default())
        .await
        .unwrap();

    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(support::DEADLINE, events.try_next())
            .await
            .expect("watch event in time")
            .unwrap()
            .expect("stream open");
        match event {
            WatchEvent::Added(cm) | WatchEvent::Deleted(cm) | WatchEvent::Modified(cm) => {
                assert_eq!(cm.metadata.namespace.as_deref(), Some("default"));
                seen.push(cm.metadata.name.unwrap());
            }
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        }
    }
    assert_eq!(seen, ["mine", "mine"]);
}
