//! Small helpers over an object's `metadata`: accessors, name validation, timestamps, random names.

use serde_json::{Map, Value};

/// `metadata.<field>` as a string, if present.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.name` or `""`.
pub(crate) fn name_of(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

/// `metadata.namespace` or `""`.
pub(crate) fn namespace_of(obj: &Value) -> &str {
    meta_str(obj, "namespace").unwrap_or("")
}

/// `metadata.uid` or `""`.
pub(crate) fn uid_of(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or("")
}

/// `metadata.resourceVersion` or `""`.
pub(crate) fn rv_of(obj: &Value) -> &str {
    meta_str(obj, "resourceVersion").unwrap_or("")
}

/// The `metadata` map, created when missing (`obj` must be an object, or it is replaced by one).
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let root = obj.as_object_mut().expect("just made an object");
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("just made an object")
}

/// `metadata.finalizers` as strings.
pub(crate) fn finalizers_of(obj: &Value) -> Vec<&str> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn is_deleting(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
}

/// The uids named in `metadata.ownerReferences`.
pub(crate) fn owner_uids(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Now, as RFC 3339 in UTC with whole seconds (`2025-01-02T03:04:05Z`).
pub(crate) fn now() -> String {
    format!("{:.0}", jiff::Timestamp::now())
}

/// A new object uid (UUID v4).
pub(crate) fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Five random characters for `generateName`, from the alphabet the real server uses.
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4().as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

pub(crate) const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Whether `s` matches the RFC 1123 label pattern (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`), of any
/// length.
fn label_pattern(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && label_pattern(s)
}

/// Whether `s` is an RFC 1123 subdomain (most object names): at most 253 characters of
/// dot-separated labels, each of any length (`IsDNS1123Subdomain` limits only the whole).
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(label_pattern)
}

/// What `IsDNS1123Label` says of a name that is not a label, as Go prints the list (`[must
/// be no more than 63 characters]`); `None` for a label.
pub(crate) fn label_problems(s: &str) -> Option<String> {
    let mut problems = Vec::new();
    if s.len() > 63 {
        problems.push("must be no more than 63 characters");
    }
    if !label_pattern(s) {
        // A subdomain that is not a label has dots (its length was checked above).
        let subdomain = !s.is_empty() && s.split('.').all(label_pattern);
        problems.push(if subdomain {
            "must not contain dots"
        } else {
            LABEL_MSG
        });
    }
    (!problems.is_empty()).then(|| format!("[{}]", problems.join(" ")))
}

/// Which names a kind accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// An RFC 1123 subdomain (most kinds).
    Subdomain,
    /// An RFC 1123 label (Namespaces, Services, StatefulSets).
    Label,
    /// Any path segment: no `/` or `%`, not `.` or `..` (RBAC kinds, e.g. `system:discovery`).
    PathSegment,
}

impl NameRule {
    /// The rule of a built-in kind (custom resources use [`NameRule::Subdomain`]).
    pub(crate) fn of(kind: &str, custom: bool) -> NameRule {
        match kind {
            _ if custom => NameRule::Subdomain,
            "Namespace" | "Service" | "StatefulSet" => NameRule::Label,
            "Role"
            | "ClusterRole"
            | "RoleBinding"
            | "ClusterRoleBinding"
            | "APIService"
            | "PodDisruptionBudget"
            | "CertificateSigningRequest" => NameRule::PathSegment,
            _ => NameRule::Subdomain,
        }
    }
}

const PATH_SEGMENT_MSG: &str = "may not contain '/' or '%', and may not be '.' or '..'";

/// What is wrong with an object name by its kind's rule, as a 422 cause (`metadata.name: ...`).
pub(crate) fn name_problem(name: &str, rule: NameRule) -> Option<String> {
    let (ok, msg) = match rule {
        // kube-apiserver says why a valid subdomain is not a label.
        NameRule::Label if is_dns_subdomain(name) && name.contains('.') => {
            (false, "must not contain dots")
        }
        NameRule::Label => (is_dns_label(name), LABEL_MSG),
        NameRule::Subdomain if name.len() > 253 && is_dns_subdomain(&name[..253]) => {
            (false, "must be no more than 253 characters")
        }
        NameRule::Subdomain => (is_dns_subdomain(name), SUBDOMAIN_MSG),
        NameRule::PathSegment => (
            !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%']),
            PATH_SEGMENT_MSG,
        ),
    };
    (!ok).then(|| format!("metadata.name: Invalid value: {name:?}: {msg}"))
}

/// A shallow copy of `obj` without `metadata` and (when `skip_status`) `status`: what decides
/// whether `metadata.generation` moves.
pub(crate) fn spec_part(obj: &Value, skip_status: bool) -> Map<String, Value> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    k.as_str() != "metadata"
                        && k.as_str() != "apiVersion"
                        && k.as_str() != "kind"
                        && !(skip_status && k.as_str() == "status")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_dns_subdomain("a.b-c.d1"));
        assert!(!is_dns_subdomain("A"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain("-a"));
        assert!(name_problem("a.b", NameRule::Label).is_some());
        assert!(name_problem("1web", NameRule::of("Service", false)).is_none());
        assert!(name_problem("system:view", NameRule::PathSegment).is_none());
        assert!(name_problem("a/b", NameRule::PathSegment).is_some());
        assert_eq!(NameRule::of("ClusterRole", true), NameRule::Subdomain);
        assert!(
            name_problem("Bad_Name", NameRule::Subdomain)
                .is_some_and(|p| p.starts_with("metadata.name: Invalid value: \"Bad_Name\""))
        );
    }

    #[test]
    fn time_and_suffix() {
        let t = now();
        assert!(t.ends_with('Z') && t.len() == 20, "{t}");
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(
            s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
    }
}
