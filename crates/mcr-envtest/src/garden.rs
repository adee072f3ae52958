//! A Gardener garden for tests: the `Shoot` CRD and the `shoots/{name}/adminkubeconfig`
//! subresource (GEP-16), minting client certificates signed by each shoot's cluster CA.
//!
//! Every shoot is backed by an HTTPS [`TestCluster`] with x509 client-certificate
//! authentication, so a provider that reads Shoots and asks for short-lived kubeconfigs talks
//! to real (emulated) member clusters whose certificates really expire.
//!
//! ```no_run
//! use std::time::Duration;
//! # async fn doc() -> Result<(), mcr_envtest::Error> {
//! let garden = mcr_envtest::garden::Garden::start(Duration::from_secs(600)).await?;
//! let member = mcr_envtest::TestCluster::start_https("shoot-a").await?;
//! garden.add_shoot("garden-dev", "a", &member).await?;
//! // POST /apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots/a/adminkubeconfig
//! // now answers with a kubeconfig whose client certificate expires.
//! assert_eq!(garden.kubeconfig_requests(), 0);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};

use crate::engine::ApiError;
use crate::server::route::ResourcePath;
use crate::{Error, TestCluster};

/// The Shoot group.
pub const GROUP: &str = "core.gardener.cloud";
/// The Shoot version.
pub const VERSION: &str = "v1beta1";

type Handler = Arc<dyn Fn(&str, &str, &Value) -> Result<Value, ApiError> + Send + Sync>;

/// Extra `POST` handlers for named subresources (group, plural, subresource).
#[derive(Default)]
pub(crate) struct Subresources(RwLock<Vec<(String, String, String, Handler)>>);

impl Subresources {
    fn register(&self, group: &str, plural: &str, sub: &str, handler: Handler) {
        self.0
            .write()
            .push((group.into(), plural.into(), sub.into(), handler));
    }

    /// Answers `req` when a handler is registered for its path.
    pub(crate) fn serve(
        &self,
        path: &ResourcePath,
        req: &Request<Bytes>,
    ) -> Option<Result<Value, ApiError>> {
        let (Some(ns), Some(name), Some(sub)) = (&path.namespace, &path.name, &path.subresource)
        else {
            return None;
        };
        let handler = {
            let handlers = self.0.read();
            handlers
                .iter()
                .find(|(g, p, s, _)| g == &path.group && p == &path.plural && s == sub)
                .map(|(_, _, _, h)| h.clone())?
        };
        if req.method() != Method::POST {
            return Some(Err(ApiError::method_not_allowed(format!(
                "only POST (create) is allowed on {}/{sub}",
                path.plural
            ))));
        }
        let body = match serde_json::from_slice::<Value>(req.body()) {
            Ok(body) => body,
            Err(e) => return Some(Err(ApiError::bad_request(format!("invalid body: {e}")))),
        };
        Some(handler(ns, name, &body))
    }
}

/// A garden cluster serving Shoots and their `adminkubeconfig` / `viewerkubeconfig`
/// subresources. Cheap to clone.
#[derive(Clone)]
pub struct Garden {
    inner: Arc<Inner>,
}

struct Inner {
    cluster: TestCluster,
    shoots: Mutex<HashMap<(String, String), TestCluster>>,
    max_expiration: Duration,
    failing: AtomicBool,
    requests: AtomicU64,
}

/// The `apiextensions.k8s.io/v1` CustomResourceDefinition of `Shoot` (schemaless).
pub fn shoot_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("shoots.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "shoots", "singular": "shoot", "kind": "Shoot", "listKind": "ShootList"},
            "versions": [{
                "name": VERSION, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

fn shoot_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, "Shoot"), "shoots")
}

fn client_err(e: kube::Error) -> Error {
    Error::Client(e)
}

impl Garden {
    /// Starts an in-process garden cluster named `garden` with the Shoot CRD; kubeconfig
    /// requests get certificates valid for at most `max_expiration` (as
    /// `--shoot-admin-kubeconfig-max-expiration`).
    pub async fn start(max_expiration: Duration) -> Result<Garden, Error> {
        let cluster = TestCluster::start("garden").await?;
        let crds: Api<DynamicObject> = Api::all_with(
            cluster.client(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
                "customresourcedefinitions",
            ),
        );
        let crd: DynamicObject = serde_json::from_value(shoot_crd())
            .map_err(|e| Error::Kubeconfig(format!("shoot CRD: {e}")))?;
        crds.create(&PostParams::default(), &crd)
            .await
            .map_err(client_err)?;
        let inner = Arc::new(Inner {
            cluster: cluster.clone(),
            shoots: Mutex::new(HashMap::new()),
            max_expiration,
            failing: AtomicBool::new(false),
            requests: AtomicU64::new(0),
        });
        for (sub, groups) in [
            ("adminkubeconfig", &["system:masters"][..]),
            ("viewerkubeconfig", &["gardener.cloud:system:viewers"][..]),
        ] {
            let weak = Arc::downgrade(&inner);
            let handler: Handler =
                Arc::new(move |ns, name, body| mint(&weak, ns, name, body, groups));
            cluster
                .subresources()?
                .register(GROUP, "shoots", sub, handler);
        }
        Ok(Garden { inner })
    }

    /// The garden cluster (a kube client: [`TestCluster::client`]).
    pub fn cluster(&self) -> &TestCluster {
        &self.inner.cluster
    }

    /// Creates the project namespace if needed and a Shoot `namespace/name` backed by
    /// `member` (an HTTPS cluster): `status.advertisedAddresses` `external` and `internal`
    /// point at it, `status.lastOperation` is a succeeded `Create`.
    pub async fn add_shoot(
        &self,
        namespace: &str,
        name: &str,
        member: &TestCluster,
    ) -> Result<(), Error> {
        let url = member
            .url()
            .ok_or_else(|| Error::NotHttps(member.name().into()))?;
        let client = self.inner.cluster.client();
        let namespaces: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Namespace")),
        );
        let ns: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(client_err(e)),
        }
        self.inner
            .shoots
            .lock()
            .insert((namespace.into(), name.into()), member.clone());
        let shoots = self.shoots(namespace);
        let shoot: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Shoot",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"hibernation": {"enabled": false}},
        }))
        .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        shoots
            .create(&PostParams::default(), &shoot)
            .await
            .map_err(client_err)?;
        let status = json!({
            "advertisedAddresses": [
                {"name": "external", "url": url},
                {"name": "internal", "url": url},
            ],
            "lastOperation": {"type": "Create", "state": "Succeeded", "progress": 100},
            "hibernated": false,
        });
        self.set_status(namespace, name, status).await
    }

    /// Merges `status` into the Shoot's status (e.g. `{"hibernated": true}`).
    pub async fn set_status(
        &self,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> Result<(), Error> {
        self.shoots(namespace)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .map(|_| ())
            .map_err(client_err)
    }

    /// Deletes the Shoot (its member cluster keeps running).
    pub async fn delete_shoot(&self, namespace: &str, name: &str) -> Result<(), Error> {
        self.shoots(namespace)
            .delete(name, &Default::default())
            .await
            .map(|_| ())
            .map_err(client_err)
    }

    /// Makes kubeconfig requests fail with 503 (`true`) or succeed again (`false`).
    pub fn set_failing(&self, failing: bool) {
        self.inner.failing.store(failing, Ordering::SeqCst);
    }

    /// How many kubeconfig requests were answered (successfully or not).
    pub fn kubeconfig_requests(&self) -> u64 {
        self.inner.requests.load(Ordering::SeqCst)
    }

    fn shoots(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.inner.cluster.client(), namespace, &shoot_resource())
    }
}

fn mint(
    inner: &Weak<Inner>,
    namespace: &str,
    name: &str,
    body: &Value,
    groups: &[&str],
) -> Result<Value, ApiError> {
    let inner = inner
        .upgrade()
        .ok_or_else(|| ApiError::internal("the garden is gone"))?;
    inner.requests.fetch_add(1, Ordering::SeqCst);
    if inner.failing.load(Ordering::SeqCst) {
        return Err(ApiError::new(
            503,
            "ServiceUnavailable",
            "kubeconfig requests fail (test)",
        ));
    }
    let kind = body.get("kind").and_then(Value::as_str);
    if kind.is_some_and(|k| k != "AdminKubeconfigRequest" && k != "ViewerKubeconfigRequest") {
        return Err(ApiError::bad_request(format!("unexpected kind {kind:?}")));
    }
    let requested = body
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(3600);
    let seconds = requested.min(inner.max_expiration.as_secs()).max(1);
    let member = inner
        .shoots
        .lock()
        .get(&(namespace.to_string(), name.to_string()))
        .cloned()
        .ok_or_else(|| ApiError::not_found(GROUP, "shoots", name))?;
    let (yaml, not_after) = member
        .client_certificate_kubeconfig("garden-user", groups, Duration::from_secs(seconds))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let expires =
        jiff::Timestamp::try_from(not_after).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(json!({
        "apiVersion": "authentication.gardener.cloud/v1alpha1",
        "kind": kind.unwrap_or("AdminKubeconfigRequest"),
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"expirationSeconds": seconds},
        "status": {
            "kubeconfig": base64::engine::general_purpose::STANDARD.encode(yaml),
            "expirationTimestamp": expires.to_string(),
        }
    }))
}
