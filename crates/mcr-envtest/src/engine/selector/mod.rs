//! Label selectors (the full Kubernetes grammar) and field selectors (the field labels of
//! each kind).

mod field;
mod label;

use serde_json::Value;

use super::ApiError;
pub(crate) use field::{FieldSelector, Labels};
pub(crate) use label::LabelSelector;

/// Both selectors of a request, parsed once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Selectors {
    label: Option<LabelSelector>,
    field: Option<FieldSelector>,
}

impl Selectors {
    /// Parses the raw query values for a type whose field labels are `labels`.
    pub(crate) fn parse(
        label: Option<&str>,
        field: Option<&str>,
        labels: &Labels<'_>,
    ) -> Result<Self, ApiError> {
        let label = label
            .map(LabelSelector::parse)
            .transpose()?
            .filter(|l| !l.is_empty());
        let field = field
            .map(|f| FieldSelector::parse(f, labels))
            .transpose()?
            .filter(|f| !f.is_empty());
        Ok(Self { label, field })
    }

    /// Whether no selector was given (everything matches).
    pub(crate) fn is_empty(&self) -> bool {
        self.label.is_none() && self.field.is_none()
    }

    /// Whether the object matches both selectors.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.label.as_ref().is_none_or(|l| l.matches(obj))
            && self.field.as_ref().is_none_or(|f| f.matches(obj))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n1", "namespace": "ns1", "labels": labels}})
    }

    #[test]
    fn both_selectors_must_match() {
        let labels = Labels {
            group: "",
            kind: "ConfigMap",
            custom: None,
        };
        let s = Selectors::parse(Some("app=web"), Some("metadata.namespace=ns1"), &labels).unwrap();
        assert!(s.matches(&obj(json!({"app": "web"}))));
        assert!(!s.matches(&obj(json!({"app": "db"}))));
    }
}
