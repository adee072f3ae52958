//! Parsing Kubernetes API request paths into what the namespace rewriter needs to know.

/// The virtual namespace every namespace cluster shows.
pub(crate) const VIRTUAL_NAMESPACE: &str = "default";

/// What a request path addresses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    /// `{prefix}/namespaces/{namespace}/{tail}`: an object or collection in a namespace.
    InNamespace {
        prefix: &'a str,
        namespace: &'a str,
        tail: String,
    },
    /// `/api/v1/namespaces/{name}[/status|/finalize]`: a Namespace object itself.
    Namespace { name: &'a str },
    /// `/api/v1/namespaces`: the Namespace collection.
    Namespaces,
    /// `{prefix}/{plural}[/{tail}]`: a resource without a namespace segment (a cluster-scoped
    /// resource, or a cluster-wide list/watch of a namespaced one).
    Resource {
        prefix: &'a str,
        group_version: String,
        plural: &'a str,
        has_tail: bool,
    },
    /// `{prefix}/watch/...`: the deprecated watch paths.
    LegacyWatch,
    /// Anything else (discovery, `/version`, `/openapi`, …): passed through.
    Other,
}

/// Splits `path` into its API prefix (`/api/v1`, `/apis/{group}/{version}`), the group/version
/// (`v1`, `{group}/{version}`) and the remaining segments.
fn split_prefix(path: &str) -> Option<(&str, String, Vec<&str>)> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (prefix_len, group_version) = match segments.as_slice() {
        ["api", version, ..] if !version.is_empty() => (2, (*version).to_owned()),
        ["apis", group, version, ..] if !group.is_empty() && !version.is_empty() => {
            (3, format!("{group}/{version}"))
        }
        _ => return None,
    };
    // Byte length of "/seg1/seg2[/seg3]".
    let prefix_bytes: usize = segments[..prefix_len].iter().map(|s| s.len() + 1).sum();
    let prefix = &path[..prefix_bytes.min(path.len())];
    let rest: Vec<&str> = segments[prefix_len..]
        .iter()
        .copied()
        .filter(|s| !s.is_empty())
        .collect();
    Some((prefix, group_version, rest))
}

/// Classifies a request path (no query).
pub(crate) fn parse(path: &str) -> Target<'_> {
    let Some((prefix, group_version, rest)) = split_prefix(path) else {
        return Target::Other;
    };
    let core = !prefix.starts_with("/apis/");
    match rest.as_slice() {
        [] => Target::Other,
        ["watch", ..] => Target::LegacyWatch,
        ["namespaces"] if core => Target::Namespaces,
        ["namespaces", name] if core => Target::Namespace { name },
        ["namespaces", name, "status" | "finalize"] if core => Target::Namespace { name },
        ["namespaces", namespace, tail @ ..] if !tail.is_empty() => Target::InNamespace {
            prefix,
            namespace,
            tail: tail.join("/"),
        },
        [plural, tail @ ..] => Target::Resource {
            prefix,
            group_version,
            plural,
            has_tail: !tail.is_empty(),
        },
    }
}

/// `path?query` with the query of the original request.
pub(crate) fn with_query(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    }
}

/// Whether a query string asks for a watch (`watch=true` or `watch=1`).
pub(crate) fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&')
            .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_paths() {
        assert_eq!(
            parse("/api/v1/namespaces/default/configmaps/x"),
            Target::InNamespace {
                prefix: "/api/v1",
                namespace: "default",
                tail: "configmaps/x".into()
            }
        );
        assert_eq!(
            parse("/apis/apps/v1/namespaces/other/deployments/d/scale"),
            Target::InNamespace {
                prefix: "/apis/apps/v1",
                namespace: "other",
                tail: "deployments/d/scale".into()
            }
        );
    }

    #[test]
    fn namespace_objects_and_collections() {
        assert_eq!(parse("/api/v1/namespaces"), Target::Namespaces);
        assert_eq!(
            parse("/api/v1/namespaces/default"),
            Target::Namespace { name: "default" }
        );
        assert_eq!(
            parse("/api/v1/namespaces/x/status"),
            Target::Namespace { name: "x" }
        );
    }

    #[test]
    fn resources_without_namespace() {
        assert_eq!(
            parse("/api/v1/configmaps"),
            Target::Resource {
                prefix: "/api/v1",
                group_version: "v1".into(),
                plural: "configmaps",
                has_tail: false
            }
        );
        assert_eq!(
            parse("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/w.example.com"),
            Target::Resource {
                prefix: "/apis/apiextensions.k8s.io/v1",
                group_version: "apiextensions.k8s.io/v1".into(),
                plural: "customresourcedefinitions",
                has_tail: true
            }
        );
    }

    #[test]
    fn other_paths() {
        for p in [
            "/version",
            "/api",
            "/apis",
            "/api/v1",
            "/apis/apps/v1",
            "/openapi/v3",
        ] {
            assert_eq!(parse(p), Target::Other, "{p}");
        }
        assert_eq!(
            parse("/api/v1/watch/namespaces/a/configmaps"),
            Target::LegacyWatch
        );
    }

    #[test]
    fn watch_queries() {
        assert!(is_watch(Some("&watch=true&timeoutSeconds=290")));
        assert!(is_watch(Some("watch=1")));
        assert!(!is_watch(Some("limit=500")));
        assert!(!is_watch(None));
        assert_eq!(with_query("/a", Some("b=c")), "/a?b=c");
        assert_eq!(with_query("/a", None), "/a");
    }
}
