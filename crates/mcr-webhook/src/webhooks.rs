//! [`Webhooks`]: the routes the server answers, and [`WebhookBuilder`], controller-runtime's
//! `WebhookManagedBy(mgr).For(obj)` for mcr.

use std::{collections::BTreeMap, future::Future, marker::PhantomData, sync::Arc};

use kube::{Resource, core::admission::AdmissionResponse};
use mcr_core::Cluster;
use mcr_manager::{Fleet, Manager};
use parking_lot::RwLock;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{
    Denied, Error, Request, Review,
    admission::{AdmissionHandle, Handle, defaulter, validator},
    conversion::{ConversionHandle, Converter},
    route::{MEMBER_PREFIX, default_path},
};

/// The path of the conversion route, as in controller-runtime.
pub const CONVERT_PATH: &str = "/convert";

/// Whether a registered admission webhook mutates or validates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookKind {
    /// Answers with a JSON patch (a defaulter).
    Mutating,
    /// Answers allowed or denied (a validator).
    Validating,
}

/// An admission webhook the server answers, with what a webhook configuration needs to route
/// requests to it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Registration {
    /// The host path (members: under `/clusters/{name}`).
    pub path: String,
    /// Mutating or validating.
    pub kind: HookKind,
    /// The API group (empty for core).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource (plural), as in a webhook rule.
    pub resource: String,
    /// The operations a webhook configuration sends to it (`CREATE`, `UPDATE`, ...).
    pub operations: Vec<String>,
}

/// The webhooks of one server: admission routes by path and one conversion route, answering
/// for the host on their paths and for every engaged member on `/clusters/{name}/...`.
/// Cheap to clone (clones share the routes).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use mcr_webhook::{Denied, Webhooks};
///
/// # fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_webhook::Error> {
/// let webhooks = Webhooks::new(&mgr);
/// webhooks
///     .for_::<ConfigMap>()
///     .with_validator(|req| async move {
///         let cm = req.object.as_ref();
///         match cm.and_then(|cm| cm.data.as_ref()).and_then(|d| d.get("size")) {
///             Some(size) if size.parse::<u32>().is_err() => Err(Denied::new("size must be a number")),
///             _ => Ok(()),
///         }
///     })
///     .register()?; // serves /validate--v1-configmap and /clusters/{name}/validate--v1-configmap
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Webhooks {
    inner: Arc<Shared>,
}

struct Shared {
    fleet: Fleet,
    routes: RwLock<BTreeMap<String, Arc<dyn Handle>>>,
    registrations: RwLock<Vec<Registration>>,
    conversion: Arc<ConversionHandle>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("paths", &self.paths())
            .finish_non_exhaustive()
    }
}

impl Webhooks {
    /// Webhooks for the manager's host and members.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let webhooks = mcr_webhook::Webhooks::new(&mgr);
    /// # }
    /// ```
    pub fn new(mgr: &Manager) -> Self {
        Self::for_fleet(mgr.fleet().clone())
    }

    /// Webhooks for a [`Fleet`] (what [`new`](Self::new) takes from the manager).
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let webhooks = mcr_webhook::Webhooks::for_fleet(mgr.fleet().clone());
    /// # }
    /// ```
    pub fn for_fleet(fleet: Fleet) -> Self {
        Self {
            inner: Arc::new(Shared {
                fleet,
                routes: RwLock::new(BTreeMap::new()),
                registrations: RwLock::new(Vec::new()),
                conversion: Arc::new(ConversionHandle::default()),
            }),
        }
    }

    /// Starts the webhooks of `K`, controller-runtime's `WebhookManagedBy(mgr).For(&K{})`.
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// webhooks.for_::<ConfigMap>().with_defaulter(|cm, _req| async move { Ok(cm) }).register()?;
    /// # Ok(()) }
    /// ```
    pub fn for_<K>(&self) -> WebhookBuilder<K>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        WebhookBuilder {
            webhooks: self.clone(),
            defaulter: None,
            validator: None,
            converter: None,
            mutate_path: None,
            validate_path: None,
            operations: vec!["CREATE".into(), "UPDATE".into()],
            _k: PhantomData,
        }
    }

    /// Serves a raw admission handler for `K` at `path` (and under every member's prefix): it
    /// gets the typed [`Request`] and returns kube's [`AdmissionResponse`] (build it with
    /// `AdmissionResponse::from(&*req)`, then `deny` or `with_patch`). Not listed in
    /// [`registrations`](Self::registrations): write its webhook configuration yourself.
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error> {
    /// use k8s_openapi::api::core::v1::Secret;
    /// use kube::core::admission::AdmissionResponse;
    /// webhooks.admission::<Secret, _, _>("/audit-secrets", |req| async move {
    ///     AdmissionResponse::from(&*req)
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn admission<K, F, Fut>(&self, path: &str, handler: F) -> Result<(), Error>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        F: Fn(Request<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = AdmissionResponse> + Send + 'static,
    {
        self.insert(
            path,
            Arc::new(AdmissionHandle::<K, Request<K>, F>::new(handler)),
        )
    }

    /// The served paths (host form), sorted.
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) {
    /// for path in webhooks.paths() { println!("{path}"); }
    /// # }
    /// ```
    pub fn paths(&self) -> Vec<String> {
        self.inner.routes.read().keys().cloned().collect()
    }

    /// The admission webhooks registered through [`for_`](Self::for_), in order.
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) {
    /// for r in webhooks.registrations() { println!("{} {:?}", r.path, r.kind); }
    /// # }
    /// ```
    pub fn registrations(&self) -> Vec<Registration> {
        self.inner.registrations.read().clone()
    }

    pub(crate) fn fleet(&self) -> &Fleet {
        &self.inner.fleet
    }

    /// Whether some route hands its handler the member's `Cluster` (and so needs the member
    /// engaged on the replica that answers).
    pub(crate) fn needs_members(&self) -> bool {
        self.inner.routes.read().values().any(|h| h.needs_cluster())
            || self.inner.conversion.hands_out_clusters()
    }

    pub(crate) fn route(&self, path: &str) -> Option<Arc<dyn Handle>> {
        self.inner.routes.read().get(path).cloned()
    }

    fn insert(&self, path: &str, handle: Arc<dyn Handle>) -> Result<(), Error> {
        let invalid = |reason| Error::InvalidPath {
            path: path.to_owned(),
            reason,
        };
        if !path.starts_with('/') || path.len() < 2 {
            return Err(invalid("it must start with `/` and name something"));
        }
        if path.starts_with(MEMBER_PREFIX) {
            return Err(invalid("`/clusters/` is where the members' routes live"));
        }
        let mut routes = self.inner.routes.write();
        if routes.contains_key(path) {
            return Err(Error::DuplicatePath {
                path: path.to_owned(),
            });
        }
        routes.insert(path.to_owned(), handle);
        Ok(())
    }
}

/// The webhooks of one kind `K`, from [`Webhooks::for_`]: a defaulter (mutating), a validator
/// and a converter, each optional, on controller-runtime's default paths unless told otherwise.
#[must_use = "nothing is served until `register` is called"]
pub struct WebhookBuilder<K: Resource> {
    webhooks: Webhooks,
    defaulter: Option<Arc<dyn Handle>>,
    validator: Option<Arc<dyn Handle>>,
    converter: Option<Converter>,
    mutate_path: Option<String>,
    validate_path: Option<String>,
    operations: Vec<String>,
    _k: PhantomData<fn() -> K>,
}

impl<K> WebhookBuilder<K>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// A defaulter (controller-runtime's `CustomDefaulter`): gets the object and the request,
    /// returns the object with its defaults set. The difference becomes the JSON patch; an
    /// `Err` refuses the request. Requests without an object (DELETE) pass unchanged.
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// webhooks.for_::<ConfigMap>().with_defaulter(|mut cm: ConfigMap, req| async move {
    ///     cm.data.get_or_insert_default().entry("cluster".into())
    ///         .or_insert_with(|| req.cluster().name().to_string());
    ///     Ok(cm)
    /// }).register()?;
    /// # Ok(()) }
    /// ```
    pub fn with_defaulter<D, Fut>(mut self, d: D) -> Self
    where
        D: Fn(K, Request<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<K, Denied>> + Send + 'static,
    {
        self.defaulter = Some(Arc::new(AdmissionHandle::<K, Request<K>, _>::new(
            defaulter::<K, Request<K>, _, _>(d),
        )));
        self
    }

    /// A defaulter that decides from the review alone (the object, the request, the cluster's
    /// name; not the cluster's client or cache). Any replica answers it for any member, engaged
    /// here or not: in a sharded fleet behind one address, its reviews never fail for want of
    /// the owner. Otherwise as [`with_defaulter`](Self::with_defaulter).
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// webhooks.for_::<ConfigMap>().with_review_defaulter(|mut cm: ConfigMap, req| async move {
    ///     cm.data.get_or_insert_default().entry("cluster".into())
    ///         .or_insert_with(|| req.cluster_name().to_string());
    ///     Ok(cm)
    /// }).register()?;
    /// # Ok(()) }
    /// ```
    pub fn with_review_defaulter<D, Fut>(mut self, d: D) -> Self
    where
        D: Fn(K, Review<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<K, Denied>> + Send + 'static,
    {
        self.defaulter = Some(Arc::new(AdmissionHandle::<K, Review<K>, _>::new(
            defaulter::<K, Review<K>, _, _>(d),
        )));
        self
    }

    /// A validator (controller-runtime's `CustomValidator`, one function for every
    /// operation: look at `req.operation`, `req.object`, `req.old_object`).
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// webhooks.for_::<ConfigMap>().with_validator(|req| async move {
    ///     if req.name.starts_with("forbidden-") { Err("that name is taken".into()) } else { Ok(()) }
    /// }).register()?;
    /// # Ok(()) }
    /// ```
    pub fn with_validator<V, Fut>(mut self, v: V) -> Self
    where
        V: Fn(Request<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Denied>> + Send + 'static,
    {
        self.validator = Some(Arc::new(AdmissionHandle::<K, Request<K>, _>::new(
            validator::<K, Request<K>, _, _>(v),
        )));
        self
    }

    /// A validator that decides from the review alone (the object, the old object, the
    /// request, the cluster's name; not the cluster's client or cache). Any replica answers it
    /// for any member, engaged here or not: in a sharded fleet behind one address, its reviews
    /// never fail for want of the owner. Otherwise as [`with_validator`](Self::with_validator).
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// webhooks.for_::<ConfigMap>().with_review_validator(|req| async move {
    ///     if req.name.starts_with("forbidden-") {
    ///         Err(format!("that name is taken in {}", req.cluster_name()).into())
    ///     } else {
    ///         Ok(())
    ///     }
    /// }).register()?;
    /// # Ok(()) }
    /// ```
    pub fn with_review_validator<V, Fut>(mut self, v: V) -> Self
    where
        V: Fn(Review<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Denied>> + Send + 'static,
    {
        self.validator = Some(Arc::new(AdmissionHandle::<K, Review<K>, _>::new(
            validator::<K, Review<K>, _, _>(v),
        )));
        self
    }

    /// A converter for `K`'s group and kind, served on [`CONVERT_PATH`] (one route for every
    /// kind, as in controller-runtime): gets an object as stored and the `apiVersion` asked
    /// for, returns the object in that version. An error fails the whole review. It runs on
    /// the server's pool of converter threads
    /// ([`converter_threads`](crate::ServerOptions::converter_threads)), so it may take time
    /// without stalling the server, and the server's `handler_timeout` answers 504 when it
    /// takes too long. kube-apiserver calls conversion webhooks without a client
    /// certificate, so with [`ClientAuth`](crate::ClientAuth) on, a converter handed the
    /// cluster is refused to it (403): use
    /// [`with_review_converter`](Self::with_review_converter) there.
    ///
    /// ```no_run
    /// # fn demo<K>(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error>
    /// # where K: kube::Resource<DynamicType = ()> + serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static {
    /// webhooks.for_::<K>().with_converter(|mut obj, to, _cluster| {
    ///     obj["apiVersion"] = to.into();
    ///     Ok(obj)
    /// }).register()?;
    /// # Ok(()) }
    /// ```
    pub fn with_converter<C>(mut self, c: C) -> Self
    where
        C: Fn(Value, &str, &Cluster) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.converter = Some(Converter::WithCluster(Arc::new(c)));
        self
    }

    /// A converter that needs only the object (most do): gets an object as stored and the
    /// `apiVersion` asked for. Any replica converts for any member, engaged there or not: in a
    /// sharded fleet behind one address, conversions (which kube-apiserver needs to serve
    /// every read of another version, with no failure policy) never fail for want of the
    /// owner. Otherwise as [`with_converter`](Self::with_converter).
    ///
    /// ```no_run
    /// # fn demo<K>(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error>
    /// # where K: kube::Resource<DynamicType = ()> + serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static {
    /// webhooks.for_::<K>().with_review_converter(|mut obj, to| {
    ///     obj["apiVersion"] = to.into();
    ///     Ok(obj)
    /// }).register()?;
    /// # Ok(()) }
    /// ```
    pub fn with_review_converter<C>(mut self, c: C) -> Self
    where
        C: Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.converter = Some(Converter::ReviewOnly(Arc::new(c)));
        self
    }

    /// Serves the defaulter on `path` instead of `/mutate-<group>-<version>-<kind>`.
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) {
    /// let b = webhooks.for_::<k8s_openapi::api::core::v1::ConfigMap>().mutate_path("/default-cm");
    /// # }
    /// ```
    pub fn mutate_path(mut self, path: impl Into<String>) -> Self {
        self.mutate_path = Some(path.into());
        self
    }

    /// Serves the validator on `path` instead of `/validate-<group>-<version>-<kind>`.
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) {
    /// let b = webhooks.for_::<k8s_openapi::api::core::v1::ConfigMap>().validate_path("/check-cm");
    /// # }
    /// ```
    pub fn validate_path(mut self, path: impl Into<String>) -> Self {
        self.validate_path = Some(path.into());
        self
    }

    /// The operations a generated webhook configuration sends (default `CREATE`, `UPDATE`,
    /// as kubebuilder's markers).
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) {
    /// let b = webhooks.for_::<k8s_openapi::api::core::v1::ConfigMap>()
    ///     .operations(["CREATE", "UPDATE", "DELETE"]);
    /// # }
    /// ```
    pub fn operations<S: Into<String>>(mut self, ops: impl IntoIterator<Item = S>) -> Self {
        self.operations = ops.into_iter().map(Into::into).collect();
        self
    }

    /// Serves what was configured. Fails if a path is taken or invalid, or a converter for
    /// this group and kind exists already (what this builder registered before the failing
    /// one stays served).
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error> {
    /// webhooks.for_::<k8s_openapi::api::core::v1::ConfigMap>()
    ///     .with_validator(|_req| async { Ok(()) })
    ///     .register()?;
    /// # Ok(()) }
    /// ```
    pub fn register(self) -> Result<(), Error> {
        let (group, version, kind) = (K::group(&()), K::version(&()), K::kind(&()));
        let resource = K::plural(&()).into_owned();
        let hooks = [
            (
                HookKind::Mutating,
                "mutate",
                self.mutate_path,
                self.defaulter,
            ),
            (
                HookKind::Validating,
                "validate",
                self.validate_path,
                self.validator,
            ),
        ];
        for (hook_kind, verb, path, handler) in hooks {
            let Some(handler) = handler else { continue };
            let path = path.unwrap_or_else(|| default_path(verb, &group, &version, &kind));
            self.webhooks.insert(&path, handler)?;
            self.webhooks
                .inner
                .registrations
                .write()
                .push(Registration {
                    path,
                    kind: hook_kind,
                    group: group.to_string(),
                    version: version.to_string(),
                    resource: resource.clone(),
                    operations: self.operations.clone(),
                });
        }
        if let Some(converter) = self.converter {
            let conversion = self.webhooks.inner.conversion.clone();
            if !conversion.insert(group.to_string(), kind.to_string(), converter) {
                return Err(Error::DuplicatePath {
                    path: format!("{CONVERT_PATH} (for {kind} of group {group:?})"),
                });
            }
            if self.webhooks.route(CONVERT_PATH).is_none() {
                self.webhooks.insert(CONVERT_PATH, conversion)?;
            }
        }
        Ok(())
    }
}
