//! Label selectors (the full Kubernetes grammar) and field selectors (`metadata.name`,
//! `metadata.namespace`).

mod label;

use serde_json::Value;

use super::ApiError;
use super::meta::meta_str;
pub(crate) use label::LabelSelector;

/// A parsed field selector over `metadata.name` / `metadata.namespace`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FieldSelector {
    /// (field, value, negated)
    terms: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses `metadata.name=x,metadata.namespace!=y`; other fields give 400.
    pub(crate) fn parse(input: &str) -> Result<Self, ApiError> {
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
            if field != "metadata.name" && field != "metadata.namespace" {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_string(), value.trim().to_string(), negated));
        }
        Ok(Self { terms })
    }

    /// Whether the object satisfies every term.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(field, value, negated)| {
            let actual = meta_str(obj, field.trim_start_matches("metadata.")).unwrap_or("");
            (actual == value) != *negated
        })
    }
}

/// Both selectors of a request, parsed once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Selectors {
    label: Option<LabelSelector>,
    field: Option<FieldSelector>,
}

impl Selectors {
    /// Parses the raw query values.
    pub(crate) fn parse(label: Option<&str>, field: Option<&str>) -> Result<Self, ApiError> {
        let label = label
            .map(LabelSelector::parse)
            .transpose()?
            .filter(|l| !l.is_empty());
        let field = field
            .map(FieldSelector::parse)
            .transpose()?
            .filter(|f| !f.terms.is_empty());
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
    fn field_selectors() {
        let o = obj(json!({}));
        let f = |s: &str| FieldSelector::parse(s).unwrap();
        assert!(f("metadata.name=n1").matches(&o));
        assert!(f("metadata.name==n1,metadata.namespace=ns1").matches(&o));
        assert!(!f("metadata.name!=n1").matches(&o));
        assert!(f("metadata.namespace!=other").matches(&o));
        let err = FieldSelector::parse("spec.foo=x").unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "field label not supported: spec.foo")
        );
        assert_eq!(FieldSelector::parse("metadata.name").unwrap_err().code, 400);
    }
}
