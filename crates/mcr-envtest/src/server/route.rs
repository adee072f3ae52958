//! Request paths: which discovery document or which resource a path addresses.

/// A discovery endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DiscoveryPath {
    /// `/version`
    Version,
    /// `/api`
    LegacyRoot,
    /// `/api/{version}`
    LegacyVersion(String),
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/apis/{group}/{version}`
    GroupVersion(String, String),
    /// `/openapi/v3`: the index of per-group-version documents.
    OpenApiV3Root,
    /// `/openapi/v3/api/{version}` (group `""`) or `/openapi/v3/apis/{group}/{version}`.
    OpenApiV3(String, String),
    /// `/openapi/v2`: every definition, as Swagger 2.0.
    OpenApiV2,
    /// `/swagger.json` and other schema documents (not served).
    OpenApiOther,
    /// `/healthz`, `/livez`, `/readyz`
    Health,
}

/// A resource endpoint: `/api/v1/namespaces/{ns}/{plural}/{name}/{subresource}` and the like.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResourcePath {
    /// API group, `""` for the core group.
    pub(crate) group: String,
    /// API version.
    pub(crate) version: String,
    /// Plural resource name.
    pub(crate) plural: String,
    /// Namespace from the path.
    pub(crate) namespace: Option<String>,
    /// Object name.
    pub(crate) name: Option<String>,
    /// Subresource, e.g. `status`.
    pub(crate) subresource: Option<String>,
    /// The legacy `/watch/` prefix was used.
    pub(crate) legacy_watch: bool,
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// A discovery document.
    Discovery(DiscoveryPath),
    /// A resource or collection.
    Resource(ResourcePath),
}

/// Parses a URL path; `None` for paths that serve nothing.
pub(crate) fn parse_path(path: &str) -> Option<Route> {
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed[1..].split('/').collect()
    };
    if segments.iter().any(|s| s.is_empty()) {
        return None;
    }
    match segments.as_slice() {
        ["version"] => Some(Route::Discovery(DiscoveryPath::Version)),
        ["healthz" | "livez" | "readyz", ..] => Some(Route::Discovery(DiscoveryPath::Health)),
        ["openapi", "v2"] => Some(Route::Discovery(DiscoveryPath::OpenApiV2)),
        ["openapi", "v3"] => Some(Route::Discovery(DiscoveryPath::OpenApiV3Root)),
        ["openapi", "v3", "api", version] => Some(Route::Discovery(DiscoveryPath::OpenApiV3(
            String::new(),
            version.to_string(),
        ))),
        ["openapi", "v3", "apis", group, version] => Some(Route::Discovery(
            DiscoveryPath::OpenApiV3(group.to_string(), version.to_string()),
        )),
        ["openapi", ..] | ["swagger.json"] | ["swaggerapi", ..] => {
            Some(Route::Discovery(DiscoveryPath::OpenApiOther))
        }
        ["api"] => Some(Route::Discovery(DiscoveryPath::LegacyRoot)),
        ["api", version] => Some(Route::Discovery(DiscoveryPath::LegacyVersion(
            version.to_string(),
        ))),
        ["api", version, rest @ ..] => resource("", version, rest).map(Route::Resource),
        ["apis"] => Some(Route::Discovery(DiscoveryPath::Groups)),
        ["apis", group] => Some(Route::Discovery(DiscoveryPath::Group(group.to_string()))),
        ["apis", group, version] => Some(Route::Discovery(DiscoveryPath::GroupVersion(
            group.to_string(),
            version.to_string(),
        ))),
        ["apis", group, version, rest @ ..] => resource(group, version, rest).map(Route::Resource),
        _ => None,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Option<ResourcePath> {
    let mut rest = rest;
    let mut legacy_watch = false;
    if rest.first() == Some(&"watch") {
        legacy_watch = true;
        rest = &rest[1..];
    }
    let mut namespace = None;
    if let ["namespaces", ns, tail @ ..] = rest {
        // `namespaces/{name}/status` and `/finalize` address the Namespace object itself.
        let namespace_subresource = matches!(tail, ["status" | "finalize"]);
        if !tail.is_empty() && !namespace_subresource {
            namespace = Some(ns.to_string());
            rest = tail;
        }
    }
    let (plural, name, subresource) = match rest {
        [plural] => (plural, None, None),
        [plural, name] => (plural, Some(name), None),
        [plural, name, sub] => (plural, Some(name), Some(sub)),
        _ => return None,
    };
    Some(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        plural: plural.to_string(),
        namespace,
        name: name.map(|n| n.to_string()),
        subresource: subresource.map(|s| s.to_string()),
        legacy_watch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse_path(path) {
            Some(Route::Resource(r)) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(
            parse_path("/version"),
            Some(Route::Discovery(DiscoveryPath::Version))
        );
        assert_eq!(
            parse_path("/api"),
            Some(Route::Discovery(DiscoveryPath::LegacyRoot))
        );
        assert_eq!(
            parse_path("/api/"),
            Some(Route::Discovery(DiscoveryPath::LegacyRoot))
        );
        assert_eq!(
            parse_path("/api/v1"),
            Some(Route::Discovery(DiscoveryPath::LegacyVersion("v1".into())))
        );
        assert_eq!(
            parse_path("/apis"),
            Some(Route::Discovery(DiscoveryPath::Groups))
        );
        assert_eq!(
            parse_path("/apis/apps"),
            Some(Route::Discovery(DiscoveryPath::Group("apps".into())))
        );
        assert_eq!(
            parse_path("/apis/apps/v1"),
            Some(Route::Discovery(DiscoveryPath::GroupVersion(
                "apps".into(),
                "v1".into()
            )))
        );
        assert_eq!(
            parse_path("/openapi/v3"),
            Some(Route::Discovery(DiscoveryPath::OpenApiV3Root))
        );
        assert_eq!(
            parse_path("/openapi/v3/apis/apps/v1"),
            Some(Route::Discovery(DiscoveryPath::OpenApiV3(
                "apps".into(),
                "v1".into()
            )))
        );
        assert_eq!(
            parse_path("/openapi/v3/api/v1"),
            Some(Route::Discovery(DiscoveryPath::OpenApiV3(
                "".into(),
                "v1".into()
            )))
        );
        assert_eq!(
            parse_path("/openapi/v2"),
            Some(Route::Discovery(DiscoveryPath::OpenApiV2))
        );
        assert_eq!(parse_path("/"), None);
        assert_eq!(parse_path("/nope"), None);
        assert_eq!(parse_path("/api//v1"), None);
    }

    #[test]
    fn resource_paths() {
        let r = res("/api/v1/namespaces/default/configmaps/x");
        assert_eq!(
            r,
            ResourcePath {
                group: "".into(),
                version: "v1".into(),
                plural: "configmaps".into(),
                namespace: Some("default".into()),
                name: Some("x".into()),
                subresource: None,
                legacy_watch: false,
            }
        );
        let r = res("/apis/apps/v1/namespaces/ns/deployments/d/status");
        assert_eq!(
            (r.group.as_str(), r.subresource.as_deref()),
            ("apps", Some("status"))
        );
        let r = res("/api/v1/configmaps");
        assert_eq!((r.namespace, r.name), (None, None));
        let r = res("/api/v1/namespaces");
        assert_eq!((r.plural.as_str(), r.name), ("namespaces", None));
        let r = res("/api/v1/namespaces/kube-system");
        assert_eq!(
            (r.plural.as_str(), r.name.as_deref(), r.namespace),
            ("namespaces", Some("kube-system"), None)
        );
        let r = res("/api/v1/namespaces/foo/status");
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref()),
            (Some("foo"), Some("status"))
        );
        let r = res("/api/v1/namespaces/foo/secrets");
        assert_eq!(
            (r.namespace.as_deref(), r.plural.as_str()),
            (Some("foo"), "secrets")
        );
        let r = res("/api/v1/watch/namespaces/foo/configmaps");
        assert!(r.legacy_watch);
        assert_eq!(r.namespace.as_deref(), Some("foo"));
        assert_eq!(
            parse_path("/api/v1/namespaces/a/configmaps/b/status/extra"),
            None
        );
    }
}
