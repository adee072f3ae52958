//! The set of served resource types: the built-ins plus every served version of every CRD.

use std::sync::{Arc, LazyLock};

use serde_json::Value;

use super::{ApiError, ResourceType};

/// Behaviour that only some types have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    /// Nothing special.
    None,
    /// `Namespace`: terminating lifecycle, default status, metadata label.
    Namespace,
    /// `Secret`: `stringData` folded into `data`, `type` defaulted.
    Secret,
    /// `CustomResourceDefinition`: serves and stops serving types.
    Crd,
    /// `Pod`: defaults, an initial `Pending` status, and its subresources.
    Pod,
    /// `Service`: defaults and a cluster IP.
    Service,
    /// `Job`: selector and labels defaulted from the template.
    Job,
    /// Reviews and bindings: posted, answered, never stored.
    Answered,
    /// `ComponentStatus`: read-only, computed on each read.
    ComponentStatus,
}

/// How a kind keeps `metadata.generation`, as its registry strategy on kube-apiserver does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Generation {
    /// Not set.
    None,
    /// 1 on create, one more on every change outside `metadata` (and outside `status` where a
    /// status subresource splits it off).
    Spec,
    /// As [`Generation::Spec`], and one more on a change of `metadata.labels` too
    /// (EndpointSlice).
    SpecOrLabels,
    /// 1 on create and never moved by an update (PriorityClass).
    Fixed,
}

/// A served type plus what the engine needs to know about it.
#[derive(Clone, Debug)]
pub(crate) struct TypeInfo {
    /// The public description (discovery row).
    pub rt: ResourceType,
    /// Storage key shared by every version of a resource: `plural.group`.
    pub res: Arc<str>,
    /// How `metadata.generation` is kept.
    pub generation: Generation,
    /// Special behaviour.
    pub special: Special,
    /// The schema of its objects (a built-in's from the table, a custom type's from its
    /// CRD version's `openAPIV3Schema`).
    pub schema: Arc<super::schema::Schema>,
    /// A custom type's `selectableFields` (as field labels: `spec.color`).
    pub selectable: Vec<String>,
}

impl TypeInfo {
    /// What field selectors on this type may name.
    pub(crate) fn field_labels(&self) -> super::selector::Labels<'_> {
        super::selector::Labels {
            group: &self.rt.group,
            kind: &self.rt.kind,
            custom: self.rt.custom.then_some(self.selectable.as_slice()),
        }
    }

    /// Storage key for a group and plural.
    pub(crate) fn res_key(group: &str, plural: &str) -> Arc<str> {
        if group.is_empty() {
            Arc::from(plural)
        } else {
            Arc::from(format!("{plural}.{group}"))
        }
    }
}

/// All served types, in discovery order: the built-ins (one table shared by every cluster),
/// then this cluster's CRDs as they appear.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    custom: Vec<Arc<TypeInfo>>,
}

impl Registry {
    /// Adds a custom type (replacing one with the same group/version/plural).
    pub(crate) fn add(&mut self, info: TypeInfo) {
        let info = Arc::new(info);
        match self.custom.iter_mut().find(|t| same(&t.rt, &info.rt)) {
            Some(slot) => *slot = info,
            None => self.custom.push(info),
        }
    }

    /// Replaces every version served under `res` (a CRD's types) with `infos`.
    pub(crate) fn replace_resource(&mut self, res: &str, infos: Vec<TypeInfo>) {
        self.custom.retain(|t| &*t.res != res);
        for info in infos {
            self.add(info);
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Arc<TypeInfo>> {
        BUILTIN_TYPES.iter().chain(self.custom.iter())
    }

    /// Looks a type up by group, version and plural.
    pub(crate) fn resolve(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<TypeInfo>> {
        self.iter()
            .find(|t| t.rt.plural == plural && t.rt.group == group && t.rt.version == version)
            .cloned()
    }

    /// The type behind a `ResourceType` the transport handed back, or 404 if no longer served.
    pub(crate) fn lookup(&self, rt: &ResourceType) -> Result<Arc<TypeInfo>, ApiError> {
        self.resolve(&rt.group, &rt.version, &rt.plural)
            .ok_or_else(ApiError::path_not_found)
    }

    /// Any served version of a storage key (used for internal writes such as GC).
    pub(crate) fn any_version(&self, res: &str) -> Option<Arc<TypeInfo>> {
        self.iter().find(|t| &*t.res == res).cloned()
    }

    /// Every served type.
    pub(crate) fn all(&self) -> Vec<ResourceType> {
        self.iter().map(|t| t.rt.clone()).collect()
    }
}

fn same(a: &ResourceType, b: &ResourceType) -> bool {
    a.group == b.group && a.version == b.version && a.plural == b.plural
}

/// Verbs of a built-in's main resource.
pub(crate) const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Verbs of namespaces: kube-apiserver serves no `deletecollection` on them (405).
const NAMESPACE_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
/// Verbs of the kinds that are only posted and answered (reviews, bindings).
const CREATE_ONLY: &[&str] = &["create"];
/// Verbs of the kinds that are only read (component statuses).
const READ_ONLY: &[&str] = &["get", "list"];

/// One row of [`BUILTINS`]: a built-in resource as kube-apiserver serves it at its preferred
/// version.
struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    /// Served subresources, `status` included.
    subresources: &'static [&'static str],
    verbs: &'static [&'static str],
    generation: Generation,
    special: Special,
}

/// Scope markers for the table's rows.
const NS: bool = true;
const CLUSTER: bool = false;
/// Generation markers for the table's rows.
const GEN: Generation = Generation::Spec;
const NO_GEN: Generation = Generation::None;
const GEN_LABELS: Generation = Generation::SpecOrLabels;
const GEN_FIXED: Generation = Generation::Fixed;

/// A row with all verbs and no special behaviour.
#[allow(clippy::too_many_arguments)]
const fn row(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    subresources: &'static [&'static str],
    generation: Generation,
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        namespaced,
        short,
        categories,
        subresources,
        verbs: ALL_VERBS,
        generation,
        special: Special::None,
    }
}

/// A row of a kind that is only posted and answered, never stored.
const fn answered(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Builtin {
    Builtin {
        group,
        version: "v1",
        kind,
        plural,
        namespaced,
        short: &[],
        categories: &[],
        subresources: &[],
        verbs: CREATE_ONLY,
        generation: Generation::None,
        special: Special::Answered,
    }
}

/// A row whose main resource serves other verbs than [`ALL_VERBS`].
const fn with_verbs(mut row: Builtin, verbs: &'static [&'static str]) -> Builtin {
    row.verbs = verbs;
    row
}

/// A row with a special behaviour.
const fn special(mut row: Builtin, special: Special) -> Builtin {
    row.special = special;
    row
}

const API_EXT: &[&str] = &["api-extensions"];
const ALL: &[&str] = &["all"];
const STATUS: &[&str] = &["status"];
const STATUS_SCALE: &[&str] = &["status", "scale"];
const ADM: &str = "admissionregistration.k8s.io";
const RBAC: &str = "rbac.authorization.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";
const AUTHN: &str = "authentication.k8s.io";

#[rustfmt::skip]
/// Every resource kube-apiserver 1.36 serves with its default API set, at the preferred
/// version of its group (GA versions only: beta and alpha APIs are off by default there).
/// Checked against k8s-openapi's resource metadata by this module's tests.
const BUILTINS: &[Builtin] = &[
    // core
    answered("", "Binding", "bindings", NS),
    special(
        with_verbs(row("", "v1", "ComponentStatus", "componentstatuses", CLUSTER, &["cs"], &[], &[], NO_GEN), READ_ONLY),
        Special::ComponentStatus,
    ),
    row("", "v1", "ConfigMap", "configmaps", NS, &["cm"], &[], &[], NO_GEN),
    row("", "v1", "Endpoints", "endpoints", NS, &["ep"], &[], &[], NO_GEN),
    row("", "v1", "Event", "events", NS, &["ev"], &[], &[], NO_GEN),
    row("", "v1", "LimitRange", "limitranges", NS, &["limits"], &[], &[], NO_GEN),
    special(
        with_verbs(
            row("", "v1", "Namespace", "namespaces", CLUSTER, &["ns"], &[], &["status", "finalize"], NO_GEN),
            NAMESPACE_VERBS,
        ),
        Special::Namespace,
    ),
    row("", "v1", "Node", "nodes", CLUSTER, &["no"], &[], STATUS, NO_GEN),
    row("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", NS, &["pvc"], &[], STATUS, NO_GEN),
    row("", "v1", "PersistentVolume", "persistentvolumes", CLUSTER, &["pv"], &[], STATUS, NO_GEN),
    special(
        row("", "v1", "Pod", "pods", NS, &["po"], ALL, &["status", "binding", "eviction", "ephemeralcontainers", "resize"], GEN),
        Special::Pod,
    ),
    row("", "v1", "PodTemplate", "podtemplates", NS, &[], &[], &[], GEN),
    row("", "v1", "ReplicationController", "replicationcontrollers", NS, &["rc"], ALL, STATUS_SCALE, GEN),
    row("", "v1", "ResourceQuota", "resourcequotas", NS, &["quota"], &[], STATUS, NO_GEN),
    special(row("", "v1", "Secret", "secrets", NS, &[], &[], &[], NO_GEN), Special::Secret),
    row("", "v1", "ServiceAccount", "serviceaccounts", NS, &["sa"], &[], &["token"], NO_GEN),
    special(row("", "v1", "Service", "services", NS, &["svc"], ALL, STATUS, NO_GEN), Special::Service),
    // admissionregistration.k8s.io
    row(ADM, "v1", "MutatingAdmissionPolicy", "mutatingadmissionpolicies", CLUSTER, &[], API_EXT, &[], GEN),
    row(ADM, "v1", "MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", CLUSTER, &[], API_EXT, &[], GEN),
    row(ADM, "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", CLUSTER, &[], API_EXT, &[], GEN),
    row(ADM, "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", CLUSTER, &[], API_EXT, STATUS, GEN),
    row(ADM, "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", CLUSTER, &[], API_EXT, &[], GEN),
    row(ADM, "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", CLUSTER, &[], API_EXT, &[], GEN),
    // apiextensions.k8s.io
    special(
        row("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", CLUSTER, &["crd", "crds"], API_EXT, STATUS, GEN),
        Special::Crd,
    ),
    // apiregistration.k8s.io
    row("apiregistration.k8s.io", "v1", "APIService", "apiservices", CLUSTER, &[], API_EXT, STATUS, NO_GEN),
    // apps
    row("apps", "v1", "ControllerRevision", "controllerrevisions", NS, &[], &[], &[], NO_GEN),
    row("apps", "v1", "DaemonSet", "daemonsets", NS, &["ds"], ALL, STATUS, GEN),
    row("apps", "v1", "Deployment", "deployments", NS, &["deploy"], ALL, STATUS_SCALE, GEN),
    row("apps", "v1", "ReplicaSet", "replicasets", NS, &["rs"], ALL, STATUS_SCALE, GEN),
    row("apps", "v1", "StatefulSet", "statefulsets", NS, &["sts"], ALL, STATUS_SCALE, GEN),
    // authentication.k8s.io, authorization.k8s.io
    answered(AUTHN, "SelfSubjectReview", "selfsubjectreviews", CLUSTER),
    answered(AUTHN, "TokenReview", "tokenreviews", CLUSTER),
    answered(AUTHZ, "LocalSubjectAccessReview", "localsubjectaccessreviews", NS),
    answered(AUTHZ, "SelfSubjectAccessReview", "selfsubjectaccessreviews", CLUSTER),
    answered(AUTHZ, "SelfSubjectRulesReview", "selfsubjectrulesreviews", CLUSTER),
    answered(AUTHZ, "SubjectAccessReview", "subjectaccessreviews", CLUSTER),
    // autoscaling, batch
    row("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", NS, &["hpa"], ALL, STATUS, NO_GEN),
    row("batch", "v1", "CronJob", "cronjobs", NS, &["cj"], ALL, STATUS, GEN),
    special(row("batch", "v1", "Job", "jobs", NS, &[], ALL, STATUS, GEN), Special::Job),
    // certificates.k8s.io
    row("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests", CLUSTER, &["csr"], &[], &["status", "approval"], NO_GEN),
    // coordination.k8s.io, discovery.k8s.io, events.k8s.io
    row("coordination.k8s.io", "v1", "Lease", "leases", NS, &[], &[], &[], NO_GEN),
    row("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", NS, &[], &[], &[], GEN_LABELS),
    row("events.k8s.io", "v1", "Event", "events", NS, &["ev"], &[], &[], NO_GEN),
    // flowcontrol.apiserver.k8s.io
    row("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema", "flowschemas", CLUSTER, &[], &[], STATUS, GEN),
    row("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration", "prioritylevelconfigurations", CLUSTER, &[], &[], STATUS, GEN),
    // networking.k8s.io
    row("networking.k8s.io", "v1", "IngressClass", "ingressclasses", CLUSTER, &[], &[], &[], GEN),
    row("networking.k8s.io", "v1", "Ingress", "ingresses", NS, &["ing"], &[], STATUS, GEN),
    row("networking.k8s.io", "v1", "IPAddress", "ipaddresses", CLUSTER, &["ip"], &[], &[], NO_GEN),
    row("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", NS, &["netpol"], &[], &[], GEN),
    row("networking.k8s.io", "v1", "ServiceCIDR", "servicecidrs", CLUSTER, &[], &[], STATUS, NO_GEN),
    // node.k8s.io, policy
    row("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", CLUSTER, &[], &[], &[], NO_GEN),
    row("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", NS, &["pdb"], &[], STATUS, GEN),
    // rbac.authorization.k8s.io
    row(RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", CLUSTER, &[], &[], &[], NO_GEN),
    row(RBAC, "v1", "ClusterRole", "clusterroles", CLUSTER, &[], &[], &[], NO_GEN),
    row(RBAC, "v1", "RoleBinding", "rolebindings", NS, &[], &[], &[], NO_GEN),
    row(RBAC, "v1", "Role", "roles", NS, &[], &[], &[], NO_GEN),
    // resource.k8s.io
    row("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", CLUSTER, &[], &[], &[], GEN),
    row("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", NS, &[], &[], STATUS, NO_GEN),
    row("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", NS, &[], &[], &[], NO_GEN),
    row("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", CLUSTER, &[], &[], &[], NO_GEN),
    // scheduling.k8s.io
    row("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", CLUSTER, &["pc"], &[], &[], GEN_FIXED),
    // storage.k8s.io
    row("storage.k8s.io", "v1", "CSIDriver", "csidrivers", CLUSTER, &[], &[], &[], NO_GEN),
    row("storage.k8s.io", "v1", "CSINode", "csinodes", CLUSTER, &[], &[], &[], NO_GEN),
    row("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", NS, &[], &[], &[], NO_GEN),
    row("storage.k8s.io", "v1", "StorageClass", "storageclasses", CLUSTER, &["sc"], &[], &[], NO_GEN),
    row("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", CLUSTER, &[], &[], STATUS, NO_GEN),
    row("storage.k8s.io", "v1", "VolumeAttributesClass", "volumeattributesclasses", CLUSTER, &["vac"], &[], &[], NO_GEN),
];

/// The built-in types, built once per process and shared by every cluster.
static BUILTIN_TYPES: LazyLock<Vec<Arc<TypeInfo>>> = LazyLock::new(|| {
    BUILTINS
        .iter()
        .map(|b| {
            Arc::new(TypeInfo {
                rt: ResourceType {
                    group: b.group.to_string(),
                    version: b.version.to_string(),
                    kind: b.kind.to_string(),
                    plural: b.plural.to_string(),
                    singular: b.kind.to_lowercase(),
                    namespaced: b.namespaced,
                    short_names: b.short.iter().map(|s| s.to_string()).collect(),
                    categories: b.categories.iter().map(|s| s.to_string()).collect(),
                    status_subresource: b.subresources.contains(&"status"),
                    subresources: b.subresources,
                    verbs: b.verbs,
                    custom: false,
                },
                res: TypeInfo::res_key(b.group, b.plural),
                generation: b.generation,
                special: b.special,
                schema: super::schema::builtin(b.group, b.version, b.kind),
                selectable: Vec::new(),
            })
        })
        .collect()
});

/// The shared built-in types, in table order.
pub(crate) fn builtin_types() -> &'static [Arc<TypeInfo>] {
    &BUILTIN_TYPES
}

/// A registry serving the built-in types (shared) and no CRDs yet.
pub(crate) fn builtins() -> Registry {
    Registry::default()
}

/// The namespace a request addresses: `ns` for namespaced types, `""` for cluster-scoped ones.
pub(crate) fn scope(info: &TypeInfo, namespace: Option<&str>) -> Result<String, ApiError> {
    match (info.rt.namespaced, namespace) {
        (true, Some(ns)) if !ns.is_empty() => Ok(ns.to_string()),
        (false, None) => Ok(String::new()),
        _ => Err(ApiError::path_not_found()),
    }
}

/// The object as served at `rt`'s version (CRD versions share storage; no conversion).
pub(crate) fn present(obj: &Value, rt: &ResourceType) -> Value {
    let mut out = super::packed::unpacked(obj).into_owned();
    let api_version = rt.api_version();
    if out.get("apiVersion").and_then(Value::as_str) != Some(api_version.as_str())
        && let Some(map) = out.as_object_mut()
    {
        map.insert("apiVersion".into(), Value::String(api_version));
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};

    use super::*;

    trait Namespaced {
        const NAMESPACED: bool;
    }
    impl Namespaced for ClusterResourceScope {
        const NAMESPACED: bool = false;
    }
    impl Namespaced for NamespaceResourceScope {
        const NAMESPACED: bool = true;
    }

    /// (group, version, kind, plural, namespaced) as k8s-openapi declares them.
    fn meta<K: Resource>() -> (&'static str, &'static str, &'static str, &'static str, bool)
    where
        K::Scope: Namespaced,
    {
        (
            K::GROUP,
            K::VERSION,
            K::KIND,
            K::URL_PATH_SEGMENT,
            <K::Scope as Namespaced>::NAMESPACED,
        )
    }

    macro_rules! kinds {
        ($($path:path),* $(,)?) => { vec![$(meta::<$path>()),*] };
    }

    /// Every row of the table matches k8s-openapi's metadata of the same kind, and every
    /// GA kind k8s-openapi knows (bar the ones listed as not served) has a row.
    #[test]
    fn table_matches_k8s_openapi() {
        use k8s_openapi::api::*;
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
        use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
        let upstream = kinds![
            core::v1::Binding,
            core::v1::ComponentStatus,
            core::v1::ConfigMap,
            core::v1::Endpoints,
            core::v1::Event,
            core::v1::LimitRange,
            core::v1::Namespace,
            core::v1::Node,
            core::v1::PersistentVolumeClaim,
            core::v1::PersistentVolume,
            core::v1::Pod,
            core::v1::PodTemplate,
            core::v1::ReplicationController,
            core::v1::ResourceQuota,
            core::v1::Secret,
            core::v1::ServiceAccount,
            core::v1::Service,
            admissionregistration::v1::MutatingAdmissionPolicy,
            admissionregistration::v1::MutatingAdmissionPolicyBinding,
            admissionregistration::v1::MutatingWebhookConfiguration,
            admissionregistration::v1::ValidatingAdmissionPolicy,
            admissionregistration::v1::ValidatingAdmissionPolicyBinding,
            admissionregistration::v1::ValidatingWebhookConfiguration,
            apiext::CustomResourceDefinition,
            apireg::APIService,
            apps::v1::ControllerRevision,
            apps::v1::DaemonSet,
            apps::v1::Deployment,
            apps::v1::ReplicaSet,
            apps::v1::StatefulSet,
            authentication::v1::SelfSubjectReview,
            authentication::v1::TokenReview,
            authorization::v1::LocalSubjectAccessReview,
            authorization::v1::SelfSubjectAccessReview,
            authorization::v1::SelfSubjectRulesReview,
            authorization::v1::SubjectAccessReview,
            autoscaling::v2::HorizontalPodAutoscaler,
            batch::v1::CronJob,
            batch::v1::Job,
            certificates::v1::CertificateSigningRequest,
            coordination::v1::Lease,
            discovery::v1::EndpointSlice,
            events::v1::Event,
            flowcontrol::v1::FlowSchema,
            flowcontrol::v1::PriorityLevelConfiguration,
            networking::v1::IngressClass,
            networking::v1::Ingress,
            networking::v1::IPAddress,
            networking::v1::NetworkPolicy,
            networking::v1::ServiceCIDR,
            node::v1::RuntimeClass,
            policy::v1::PodDisruptionBudget,
            rbac::v1::ClusterRoleBinding,
            rbac::v1::ClusterRole,
            rbac::v1::RoleBinding,
            rbac::v1::Role,
            resource::v1::DeviceClass,
            resource::v1::ResourceClaim,
            resource::v1::ResourceClaimTemplate,
            resource::v1::ResourceSlice,
            scheduling::v1::PriorityClass,
            storage::v1::CSIDriver,
            storage::v1::CSINode,
            storage::v1::CSIStorageCapacity,
            storage::v1::StorageClass,
            storage::v1::VolumeAttachment,
            storage::v1::VolumeAttributesClass,
        ];
        let ours: Vec<_> = BUILTINS
            .iter()
            .map(|b| (b.group, b.version, b.kind, b.plural, b.namespaced))
            .collect();
        assert_eq!(ours, upstream);
    }

    #[test]
    fn builtins_are_shared_and_customs_are_not() {
        let a = builtins();
        let b = builtins();
        let pa = a.resolve("", "v1", "pods").unwrap();
        let pb = b.resolve("", "v1", "pods").unwrap();
        assert!(Arc::ptr_eq(&pa, &pb), "one table for every cluster");
        assert_eq!(a.all().len(), BUILTINS.len());
        assert_eq!(
            a.resolve("batch", "v1", "jobs").unwrap().generation,
            Generation::Spec
        );
        let sts = a.resolve("apps", "v1", "statefulsets").unwrap();
        assert_eq!(sts.rt.subresources, ["status", "scale"]);
        assert!(sts.rt.status_subresource);
    }
}
