//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{g}`, `/apis/{g}/{v}`.
//!
//! The legacy (non-aggregated) JSON forms are served with `Content-Type: application/json`;
//! kubectl asks for aggregated discovery first and falls back to these.

use std::cmp::Reverse;

use serde_json::{Value, json};

use crate::engine::ResourceType;

/// The Kubernetes version the emulated servers claim to be.
pub(crate) const GIT_VERSION: &str = "v1.36.0";

/// `/version`
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-04-22T00:00:00Z",
        "goVersion": "go1.26.2",
        "compiler": "gc",
        "platform": "linux/amd64",
        "emulator": "mcr-envtest",
    })
}

/// `/api`
pub(crate) fn legacy_root() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:443" }],
    })
}

/// Orders versions as Kubernetes does: GA before beta before alpha, higher numbers first,
/// anything else last (alphabetically).
fn version_priority(v: &str) -> (u8, Reverse<u64>, Reverse<u64>, String) {
    let parse = || -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((0, major, 0));
        }
        let (class, minor) = if let Some(n) = tail.strip_prefix("beta") {
            (1, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (2, n)
        } else {
            return None;
        };
        Some((class, major, minor.parse().ok()?))
    };
    match parse() {
        Some((class, major, minor)) => (class, Reverse(major), Reverse(minor), String::new()),
        None => (3, Reverse(0), Reverse(0), v.to_string()),
    }
}

/// The groups (without the core group) and their versions, preferred version first.
fn groups(types: &[ResourceType]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for rt in types.iter().filter(|rt| !rt.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == rt.group) {
            Some((_, versions)) => {
                if !versions.contains(&rt.version) {
                    versions.push(rt.version.clone());
                }
            }
            None => groups.push((rt.group.clone(), vec![rt.version.clone()])),
        }
    }
    for (_, versions) in &mut groups {
        versions.sort_by_key(|v| version_priority(v));
    }
    groups
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let entries: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
        .collect();
    json!({
        "name": group,
        "versions": entries,
        "preferredVersion": entries.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`
pub(crate) fn group_list(types: &[ResourceType]) -> Value {
    let groups: Vec<Value> = groups(types)
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/apis/{group}`; `None` if the group is not served.
pub(crate) fn group(types: &[ResourceType], group: &str) -> Option<Value> {
    let groups = groups(types);
    let (name, versions) = groups.iter().find(|(g, _)| g == group)?;
    let mut doc = group_json(name, versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// The verbs a subresource takes.
pub(crate) fn subresource_verbs(sub: &str) -> &'static [&'static str] {
    match sub {
        "token" | "eviction" | "binding" => &["create"],
        "finalize" => &["update"],
        _ => &["get", "patch", "update"],
    }
}

/// The kind a subresource reads and writes: `(group, version)` when it is not the parent's
/// own group-version, and the kind.
pub(crate) fn subresource_kind(
    rt: &ResourceType,
    sub: &str,
) -> (Option<&'static str>, &'static str, String) {
    match sub {
        "scale" => (Some("autoscaling"), "v1", "Scale".into()),
        "token" => (Some("authentication.k8s.io"), "v1", "TokenRequest".into()),
        "eviction" => (Some("policy"), "v1", "Eviction".into()),
        "binding" => (None, "", "Binding".into()),
        _ => (None, "", rt.kind.clone()),
    }
}

/// `/api/{version}` (group `""`) or `/apis/{group}/{version}`; `None` if nothing is served there.
pub(crate) fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for rt in types
        .iter()
        .filter(|rt| rt.group == group && rt.version == version)
    {
        resources.push(json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs,
            "shortNames": rt.short_names,
            "categories": rt.categories,
        }));
        for sub in rt.subresources {
            let (group, version, kind) = subresource_kind(rt, sub);
            let mut doc = json!({
                "name": format!("{}/{sub}", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": kind,
                "verbs": subresource_verbs(sub),
            });
            if let Some(group) = group {
                doc["group"] = json!(group);
                doc["version"] = json!(version);
            }
            resources.push(doc);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// The media type of aggregated discovery (`apidiscovery.k8s.io/v2`).
pub(crate) const AGGREGATED_MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header asks for aggregated discovery (`apidiscovery.k8s.io/v2`) before
/// any plain JSON it also accepts.
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    for offer in accept.split(',') {
        let params: Vec<String> = offer
            .split(';')
            .map(|p| p.trim().to_ascii_lowercase().replace(' ', ""))
            .collect();
        let has = |p: &str| params.iter().any(|q| q == p);
        if has("as=apigroupdiscoverylist") && has("g=apidiscovery.k8s.io") && has("v=v2") {
            return true;
        }
        if params
            .first()
            .is_some_and(|m| m == "application/json" || m == "*/*")
            && params.len() == 1
        {
            return false;
        }
    }
    false
}

/// `/api` (`core` true: the core group) or `/apis` (every other group) as an aggregated
/// `APIGroupDiscoveryList`.
pub(crate) fn aggregated(types: &[ResourceType], core: bool) -> Value {
    let mut names: Vec<String> = Vec::new();
    for rt in types.iter().filter(|rt| rt.group.is_empty() == core) {
        if !names.contains(&rt.group) {
            names.push(rt.group.clone());
        }
    }
    let by_group = groups(types);
    let items: Vec<Value> = names
        .iter()
        .map(|group| {
            let versions: Vec<String> = if group.is_empty() {
                vec!["v1".to_string()]
            } else {
                by_group
                    .iter()
                    .find(|(g, _)| g == group)
                    .map(|(_, vs)| vs.clone())
                    .unwrap_or_default()
            };
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = types
                        .iter()
                        .filter(|rt| &rt.group == group && &rt.version == v)
                        .map(aggregated_resource)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

fn aggregated_resource(rt: &ResourceType) -> Value {
    let subresources: Vec<Value> = rt
        .subresources
        .iter()
        .map(|sub| {
            // Like kube-apiserver, a built-in's subresource answering its parent's group and
            // version leaves both empty (`{"group": "", "version": "", "kind": "Pod"}`); a
            // custom resource's names them.
            let (group, version, kind) = subresource_kind(rt, sub);
            let (group, version) = match group {
                Some(group) => (group, version),
                None if rt.custom => (rt.group.as_str(), rt.version.as_str()),
                None => ("", ""),
            };
            json!({
                "subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": subresource_verbs(sub),
            })
        })
        .collect();
    let mut doc = json!({
        "resource": rt.plural,
        "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": rt.singular,
        "verbs": rt.verbs,
    });
    if !rt.short_names.is_empty() {
        doc["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        doc["categories"] = json!(rt.categories);
    }
    if !subresources.is_empty() {
        doc["subresources"] = json!(subresources);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(group: &str, version: &str, plural: &str, status: bool) -> ResourceType {
        ResourceType {
            group: group.into(),
            version: version.into(),
            kind: "Thing".into(),
            plural: plural.into(),
            singular: "thing".into(),
            namespaced: true,
            short_names: vec!["th".into()],
            categories: vec![],
            status_subresource: status,
            subresources: if status { &["status"] } else { &[] },
            verbs: &["create", "get"],
            custom: false,
        }
    }

    #[test]
    fn aggregated_documents() {
        let types = vec![
            rt("", "v1", "configmaps", false),
            rt("example.com", "v1", "things", true),
        ];
        let core = aggregated(&types, true);
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        assert_eq!(
            core["items"][0]["versions"][0]["resources"][0]["resource"],
            "configmaps"
        );
        let apis = aggregated(&types, false);
        let things = &apis["items"][0]["versions"][0]["resources"][0];
        assert_eq!(things["scope"], "Namespaced");
        assert_eq!(things["subresources"][0]["subresource"], "status");
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated("application/json"));
        assert!(!wants_aggregated(
            "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        ));
    }

    #[test]
    fn versions_sort_like_kubernetes() {
        let mut v = vec!["v1alpha1", "foo", "v1beta2", "v2", "v1", "v1beta1", "v10"];
        v.sort_by_key(|v| version_priority(v));
        assert_eq!(
            v,
            ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn documents() {
        let types = vec![
            rt("", "v1", "configmaps", false),
            rt("example.com", "v1beta1", "things", true),
            rt("example.com", "v1", "things", true),
        ];
        let groups = group_list(&types);
        assert_eq!(groups["groups"].as_array().unwrap().len(), 1);
        assert_eq!(groups["groups"][0]["preferredVersion"]["version"], "v1");
        assert_eq!(group(&types, "example.com").unwrap()["kind"], "APIGroup");
        assert!(group(&types, "nope").is_none());
        let list = resource_list(&types, "example.com", "v1").unwrap();
        assert_eq!(list["groupVersion"], "example.com/v1");
        assert_eq!(list["resources"][1]["name"], "things/status");
        assert_eq!(
            resource_list(&types, "", "v1").unwrap()["groupVersion"],
            "v1"
        );
        assert!(resource_list(&types, "", "v2").is_none());
    }
}
