//! Field selectors: the field labels each kind accepts (its field label conversion in
//! `pkg/apis/<group>/<version>/conversion.go` of Kubernetes 1.36, or only `metadata.name`
//! and `metadata.namespace` when it has none; a CRD version's `selectableFields`), the
//! message kube-apiserver refuses any other with, and the value each label selects on (the
//! `ToSelectableFields` of the kind's registry strategy: a bool as `true`/`false`, a count as
//! a number, an unset string as empty).

use serde_json::Value;

use crate::engine::ApiError;

/// What a type's field selectors may name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Labels<'a> {
    /// The type's group.
    pub group: &'a str,
    /// The type's kind.
    pub kind: &'a str,
    /// A custom type's selectable fields (`spec.color`), empty for built-ins.
    pub custom: Option<&'a [String]>,
}

/// What a label reads from an object.
#[derive(Clone, Debug, PartialEq)]
enum Source {
    /// A string field (a JSON pointer), empty when unset.
    Text(&'static str),
    /// A bool field, `false` when unset.
    Flag(&'static str),
    /// An integer field, `0` when unset.
    Count(&'static str),
    /// The first of a Pod's `status.podIPs`.
    FirstPodIp,
    /// A label the conversion accepts and the kind does not select on: always empty.
    Nothing,
    /// A CRD's selectable field: whatever scalar is there, as text.
    Custom(String),
}

/// One term of a field selector.
#[derive(Clone, Debug, PartialEq)]
struct Term {
    source: Source,
    value: String,
    negated: bool,
}

/// A parsed field selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FieldSelector {
    terms: Vec<Term>,
}

/// What a kind's conversion says of a label it does not accept.
fn unsupported(labels: &Labels<'_>, label: &str) -> ApiError {
    let message = match (labels.group, labels.kind) {
        ("batch", "Job") => format!("field label {label:?} not supported for Job"),
        ("resource.k8s.io", "ResourceSlice") => {
            format!("field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {label}")
        }
        (
            "",
            "Pod" | "Node" | "ReplicationController" | "Event" | "Namespace" | "Secret" | "Service",
        )
        | ("events.k8s.io", "Event")
        | ("certificates.k8s.io", "CertificateSigningRequest") => {
            format!("field label not supported: {label}")
        }
        _ if labels.custom.is_some() => format!("field label not supported: {label}"),
        _ => format!(
            "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        ),
    };
    ApiError::bad_request(message)
}

/// The source of a label the kind accepts, `None` when it does not.
fn source(labels: &Labels<'_>, label: &str) -> Option<Source> {
    use Source::*;
    let name = Text("/metadata/name");
    let namespace = Text("/metadata/namespace");
    if let Some(fields) = labels.custom {
        return match label {
            "metadata.name" => Some(name),
            "metadata.namespace" => Some(namespace),
            _ => fields
                .iter()
                .any(|f| f == label)
                .then(|| Custom(format!("/{}", label.replace('.', "/")))),
        };
    }
    Some(match (labels.group, labels.kind, label) {
        ("", "Node", "metadata.name") => name,
        ("", "Node", "spec.unschedulable") => Flag("/spec/unschedulable"),
        ("", "Node", _) => return None,
        ("", "Namespace", "metadata.name") => name,
        ("", "Namespace", "status.phase") => Text("/status/phase"),
        ("", "Namespace", _) => return None,
        ("certificates.k8s.io", "CertificateSigningRequest", "metadata.name") => name,
        ("certificates.k8s.io", "CertificateSigningRequest", "spec.signerName") => {
            Text("/spec/signerName")
        }
        ("certificates.k8s.io", "CertificateSigningRequest", _) => return None,
        ("resource.k8s.io", "ResourceSlice", "metadata.name") => name,
        ("resource.k8s.io", "ResourceSlice", "spec.nodeName") => Text("/spec/nodeName"),
        ("resource.k8s.io", "ResourceSlice", "spec.driver") => Text("/spec/driver"),
        ("resource.k8s.io", "ResourceSlice", _) => return None,
        (_, _, "metadata.name") => name,
        (_, _, "metadata.namespace") => namespace,
        ("", "Pod", "spec.nodeName" | "spec.host") => Text("/spec/nodeName"),
        ("", "Pod", "spec.restartPolicy") => Text("/spec/restartPolicy"),
        ("", "Pod", "spec.schedulerName") => Text("/spec/schedulerName"),
        ("", "Pod", "spec.serviceAccountName") => Text("/spec/serviceAccountName"),
        ("", "Pod", "spec.hostNetwork") => Flag("/spec/hostNetwork"),
        ("", "Pod", "status.phase") => Text("/status/phase"),
        ("", "Pod", "status.podIP") => FirstPodIp,
        ("", "Pod", "status.podIPs") => Nothing,
        ("", "Pod", "status.nominatedNodeName") => Text("/status/nominatedNodeName"),
        ("", "ReplicationController", "status.replicas") => Count("/status/replicas"),
        ("", "Secret", "type") => Text("/type"),
        ("", "Service", "spec.clusterIP") => Text("/spec/clusterIP"),
        ("", "Service", "spec.type") => Text("/spec/type"),
        ("batch", "Job", "status.successful") => Count("/status/succeeded"),
        ("", "Event", label) => match label {
            "involvedObject.kind" => Text("/involvedObject/kind"),
            "involvedObject.namespace" => Text("/involvedObject/namespace"),
            "involvedObject.name" => Text("/involvedObject/name"),
            "involvedObject.uid" => Text("/involvedObject/uid"),
            "involvedObject.apiVersion" => Text("/involvedObject/apiVersion"),
            "involvedObject.resourceVersion" => Text("/involvedObject/resourceVersion"),
            "involvedObject.fieldPath" => Text("/involvedObject/fieldPath"),
            "reason" => Text("/reason"),
            "reportingComponent" => Text("/reportingComponent"),
            "source" => Text("/source/component"),
            "type" => Text("/type"),
            _ => return None,
        },
        ("events.k8s.io", "Event", label) => match label {
            "regarding.kind" => Text("/regarding/kind"),
            "regarding.namespace" => Text("/regarding/namespace"),
            "regarding.name" => Text("/regarding/name"),
            "regarding.uid" => Text("/regarding/uid"),
            "regarding.apiVersion" => Text("/regarding/apiVersion"),
            "regarding.resourceVersion" => Text("/regarding/resourceVersion"),
            "regarding.fieldPath" => Text("/regarding/fieldPath"),
            "reportingController" => Text("/reportingController"),
            "reason" => Text("/reason"),
            "type" => Text("/type"),
            _ => return None,
        },
        _ => return None,
    })
}

impl FieldSelector {
    /// Parses `a=x,b!=y` for a type; a label the type does not accept is a 400 as
    /// kube-apiserver words it.
    pub(crate) fn parse(input: &str, labels: &Labels<'_>) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in input.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, negated) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {term:?}: expected an operator ('=', '==' or '!=')"
                )));
            };
            let field = field.trim();
            let Some(source) = source(labels, field) else {
                return Err(unsupported(labels, field));
            };
            terms.push(Term {
                source,
                value: value.trim().to_string(),
                negated,
            });
        }
        Ok(Self { terms })
    }

    /// Whether there is no term.
    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether the object satisfies every term.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let actual = match &t.source {
                Source::Text(p) => obj
                    .pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                Source::Flag(p) => obj
                    .pointer(p)
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                    .to_string(),
                Source::Count(p) => obj
                    .pointer(p)
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    .to_string(),
                Source::FirstPodIp => obj
                    .pointer("/status/podIPs/0/ip")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                Source::Nothing => String::new(),
                Source::Custom(p) => match obj.pointer(p) {
                    Some(Value::String(s)) => s.clone(),
                    Some(v @ (Value::Bool(_) | Value::Number(_))) => v.to_string(),
                    _ => String::new(),
                },
            };
            (actual == t.value) != t.negated
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels<'a>(group: &'a str, kind: &'a str) -> Labels<'a> {
        Labels {
            group,
            kind,
            custom: None,
        }
    }

    #[test]
    fn each_kind_accepts_its_labels() {
        let node = labels("", "Node");
        let cordoned = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        let open = json!({"metadata": {"name": "m"}, "spec": {}});
        let f = FieldSelector::parse("spec.unschedulable=false", &node).unwrap();
        assert!(!f.matches(&cordoned) && f.matches(&open));
        let err = FieldSelector::parse("metadata.namespace=x", &node).unwrap_err();
        assert_eq!(err.message, "field label not supported: metadata.namespace");
        let pod = labels("", "Pod");
        let p = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}});
        assert!(
            FieldSelector::parse("spec.nodeName=n1,status.phase!=Running", &pod)
                .unwrap()
                .matches(&p)
        );
        assert!(
            FieldSelector::parse("spec.hostNetwork=false", &pod)
                .unwrap()
                .matches(&p)
        );
        let rs = labels("apps", "ReplicaSet");
        assert_eq!(
            FieldSelector::parse("status.replicas=1", &rs)
                .unwrap_err()
                .message,
            "\"status.replicas\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let job = labels("batch", "Job");
        assert_eq!(
            FieldSelector::parse("spec.x=1", &job).unwrap_err().message,
            "field label \"spec.x\" not supported for Job"
        );
        assert!(FieldSelector::parse("metadata.name", &job).is_err());
        let fields = vec!["spec.color".to_string()];
        let custom = Labels {
            group: "example.com",
            kind: "Widget",
            custom: Some(&fields),
        };
        let w = json!({"metadata": {"name": "w"}, "spec": {"color": "red"}});
        assert!(
            FieldSelector::parse("spec.color=red", &custom)
                .unwrap()
                .matches(&w)
        );
        assert_eq!(
            FieldSelector::parse("spec.size=1", &custom)
                .unwrap_err()
                .message,
            "field label not supported: spec.size"
        );
    }
}
