//! The set of served resource types: the built-ins plus every served version of every CRD.

use std::sync::Arc;

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
}

/// A served type plus what the engine needs to know about it.
#[derive(Clone, Debug)]
pub(crate) struct TypeInfo {
    /// The public description (discovery row).
    pub rt: ResourceType,
    /// Storage key shared by every version of a resource: `plural.group`.
    pub res: Arc<str>,
    /// Whether `metadata.generation` is tracked.
    pub generation: bool,
    /// Special behaviour.
    pub special: Special,
}

impl TypeInfo {
    /// Storage key for a group and plural.
    pub(crate) fn res_key(group: &str, plural: &str) -> Arc<str> {
        if group.is_empty() {
            Arc::from(plural)
        } else {
            Arc::from(format!("{plural}.{group}"))
        }
    }
}

/// All served types, in discovery order (built-ins first, then CRDs as they appear).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    types: Vec<Arc<TypeInfo>>,
}

impl Registry {
    /// Adds a type (replacing one with the same group/version/plural).
    pub(crate) fn add(&mut self, info: TypeInfo) {
        let info = Arc::new(info);
        match self.types.iter_mut().find(|t| same(&t.rt, &info.rt)) {
            Some(slot) => *slot = info,
            None => self.types.push(info),
        }
    }

    /// Replaces every version served under `res` (a CRD's types) with `infos`.
    pub(crate) fn replace_resource(&mut self, res: &str, infos: Vec<TypeInfo>) {
        self.types.retain(|t| &*t.res != res);
        for info in infos {
            self.add(info);
        }
    }

    /// Looks a type up by group, version and plural.
    pub(crate) fn resolve(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<TypeInfo>> {
        self.types
            .iter()
            .find(|t| t.rt.group == group && t.rt.version == version && t.rt.plural == plural)
            .cloned()
    }

    /// The type behind a `ResourceType` the transport handed back, or 404 if no longer served.
    pub(crate) fn lookup(&self, rt: &ResourceType) -> Result<Arc<TypeInfo>, ApiError> {
        self.resolve(&rt.group, &rt.version, &rt.plural)
            .ok_or_else(ApiError::path_not_found)
    }

    /// Any served version of a storage key (used for internal writes such as GC).
    pub(crate) fn any_version(&self, res: &str) -> Option<Arc<TypeInfo>> {
        self.types.iter().find(|t| &*t.res == res).cloned()
    }

    /// Every served type.
    pub(crate) fn all(&self) -> Vec<ResourceType> {
        self.types.iter().map(|t| t.rt.clone()).collect()
    }
}

fn same(a: &ResourceType, b: &ResourceType) -> bool {
    a.group == b.group && a.version == b.version && a.plural == b.plural
}

struct Builtin {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    generation: bool,
    special: Special,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        kind: "Namespace",
        plural: "namespaces",
        namespaced: false,
        short: &["ns"],
        categories: &[],
        status: true,
        generation: false,
        special: Special::Namespace,
    },
    Builtin {
        group: "",
        kind: "ConfigMap",
        plural: "configmaps",
        namespaced: true,
        short: &["cm"],
        categories: &[],
        status: false,
        generation: false,
        special: Special::None,
    },
    Builtin {
        group: "",
        kind: "Secret",
        plural: "secrets",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
        generation: false,
        special: Special::Secret,
    },
    Builtin {
        group: "",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        namespaced: true,
        short: &["sa"],
        categories: &[],
        status: false,
        generation: false,
        special: Special::None,
    },
    Builtin {
        group: "",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        status: false,
        generation: false,
        special: Special::None,
    },
    Builtin {
        group: "events.k8s.io",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        status: false,
        generation: false,
        special: Special::None,
    },
    Builtin {
        group: "coordination.k8s.io",
        kind: "Lease",
        plural: "leases",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
        generation: false,
        special: Special::None,
    },
    Builtin {
        group: "apps",
        kind: "Deployment",
        plural: "deployments",
        namespaced: true,
        short: &["deploy"],
        categories: &["all"],
        status: true,
        generation: true,
        special: Special::None,
    },
    Builtin {
        group: "apps",
        kind: "ReplicaSet",
        plural: "replicasets",
        namespaced: true,
        short: &["rs"],
        categories: &["all"],
        status: true,
        generation: true,
        special: Special::None,
    },
    Builtin {
        group: "apiextensions.k8s.io",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        namespaced: false,
        short: &["crd", "crds"],
        categories: &["api-extensions"],
        status: true,
        generation: true,
        special: Special::Crd,
    },
];

/// A registry holding the built-in types.
pub(crate) fn builtins() -> Registry {
    let mut registry = Registry::default();
    for b in BUILTINS {
        registry.add(TypeInfo {
            rt: ResourceType {
                group: b.group.to_string(),
                version: "v1".to_string(),
                kind: b.kind.to_string(),
                plural: b.plural.to_string(),
                singular: b.kind.to_lowercase(),
                namespaced: b.namespaced,
                short_names: b.short.iter().map(|s| s.to_string()).collect(),
                categories: b.categories.iter().map(|s| s.to_string()).collect(),
                status_subresource: b.status,
                custom: false,
            },
            res: TypeInfo::res_key(b.group, b.plural),
            generation: b.generation,
            special: b.special,
        });
    }
    registry
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
    let mut out = obj.clone();
    let api_version = rt.api_version();
    if out.get("apiVersion").and_then(Value::as_str) != Some(api_version.as_str())
        && let Some(map) = out.as_object_mut()
    {
        map.insert("apiVersion".into(), Value::String(api_version));
    }
    out
}
