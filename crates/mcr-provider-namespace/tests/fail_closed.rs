//! A namespace cluster never forwards a request whose scope it cannot tell: a resource the
//! host's discovery did not list gets a 404 from the namespace client itself, even when the
//! host starts serving it (a new CRD) between that discovery and the request.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::client::Body;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use mcr_provider_namespace::namespace_client;
use serde_json::json;
use support::{DEADLINE, create_namespace, init_tracing};

fn crd(plural: &str, kind: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.example.com") },
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": { "plural": plural, "singular": kind.to_lowercase(), "kind": kind },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } },
            }],
        },
    }))
    .unwrap()
}

fn resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", kind))
}

/// Installs a CRD on the real host and waits until it is served.
async fn install(host: &kube::Client, plural: &str, kind: &str) {
    Api::<CustomResourceDefinition>::all(host.clone())
        .create(&PostParams::default(), &crd(plural, kind))
        .await
        .unwrap();
    let api = Api::<DynamicObject>::all_with(host.clone(), &resource(kind));
    eventually_async(&format!("{plural} served"), DEADLINE, || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.is_ok() }
    })
    .await;
}

#[tokio::test]
async fn a_crd_served_after_discovery_is_not_listed_across_namespaces() {
    init_tracing();
    let env = TestCluster::start("host").await.unwrap();
    let real = env.client();
    create_namespace(&real, "team-a", &[]).await;
    create_namespace(&real, "team-b", &[]).await;
    // The group is served (so its discovery succeeds) but has no widgets yet.
    install(&real, "gadgets", "Gadget").await;

    // The host as the namespace cluster sees it: the real client, except that right after the
    // first discovery of example.com/v1 (which lists no widgets) the Widget CRD is installed
    // and a widget created in another tenant's namespace, before discovery answers: the race
    // between discovery and the request, made to happen every time.
    let raced = Arc::new(AtomicBool::new(false));
    let host = {
        let (real, raced) = (real.clone(), raced.clone());
        let service = tower::service_fn(move |req: Request<Body>| {
            let (real, raced) = (real.clone(), raced.clone());
            async move {
                let discovery = req.uri().path() == "/apis/example.com/v1";
                let response = real.send(req).await?;
                if !discovery || raced.swap(true, Ordering::SeqCst) {
                    return Ok::<_, kube::Error>(response);
                }
                let (parts, body) = response.into_parts();
                let stale = body.collect().await.expect("discovery body").to_bytes();
                install(&real, "widgets", "Widget").await;
                let secret: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": { "name": "team-b-secret", "namespace": "team-b" },
                }))
                .unwrap();
                Api::<DynamicObject>::namespaced_with(real.clone(), "team-b", &resource("Widget"))
                    .create(&PostParams::default(), &secret)
                    .await
                    .unwrap();
                Ok(Response::from_parts(parts, Body::from(stale.to_vec())))
            }
        });
        kube::Client::new(service, "default")
    };

    let team_a = namespace_client(host, "team-a");
    let widgets = Api::<DynamicObject>::all_with(team_a.clone(), &resource("Widget"));
    let first = widgets.list(&ListParams::default()).await;
    assert!(raced.load(Ordering::SeqCst), "the race was staged");
    match first {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 404, "{status:?}");
            assert!(
                status.message.contains("widgets"),
                "names the resource: {status:?}"
            );
        }
        other => panic!(
            "a resource of unknown scope must not be forwarded, got {:?}",
            other.map(|l| l
                .items
                .into_iter()
                .map(|w| w.metadata.namespace)
                .collect::<Vec<_>>())
        ),
    }
    // The next request discovers widgets as namespaced and lists team-a only.
    let listed = widgets.list(&ListParams::default()).await.unwrap();
    assert!(listed.items.is_empty(), "{:?}", listed.items);
}
