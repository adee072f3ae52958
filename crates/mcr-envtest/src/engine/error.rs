//! Errors the emulated API server answers with, as `v1 Status` objects.

use serde_json::{Value, json};

/// An API error: becomes a `v1 Status` body with the same code as the HTTP status.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code, e.g. 404.
    pub code: u16,
    /// Machine-readable reason, e.g. `NotFound`.
    pub reason: String,
    /// Human-readable message, as the real API server words it.
    pub message: String,
    /// `details.kind`, `details.group`, `details.name` where they apply.
    pub details: Option<Value>,
}

impl ApiError {
    /// Builds an error from its parts.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// Adds `details` (`name`, `group`, `kind`; no `group` for the core group, as
    /// kube-apiserver omits it).
    pub fn with_details(mut self, group: &str, plural: &str, name: &str) -> Self {
        let mut details = json!({ "name": name, "kind": plural });
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        self.details = Some(details);
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 404 NotFound for an object: `configmaps "x" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(group, plural, name)
    }

    /// 404 NotFound for a path that serves nothing.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict (stale resourceVersion, failed precondition, apply conflict).
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(group, plural, name)
    }

    /// 410 Expired: the requested resourceVersion was compacted.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf; got {content_type:?}"
            ),
        )
    }

    /// 422 Invalid: the object failed validation (`message` is one `field: Type: detail`).
    pub fn invalid(kind: &str, name: &str, message: impl Into<String>) -> Self {
        Self::invalid_all(kind, name, vec![message.into()])
    }

    /// 422 Invalid listing every invalid field, each `field: Type: detail`, in the message
    /// (bracketed when more than one) and as `details.causes`, as kube-apiserver lists them.
    pub fn invalid_all(kind: &str, name: &str, errors: Vec<String>) -> Self {
        // The message says each error once (as Go's error aggregate does); the causes list
        // them all.
        let mut once: Vec<&str> = Vec::new();
        for e in &errors {
            if !once.contains(&e.as_str()) {
                once.push(e);
            }
        }
        let list = match once.as_slice() {
            [one] => (*one).to_string(),
            _ => format!("[{}]", once.join(", ")),
        };
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {list}"),
        )
        .with_details("", kind, name);
        let causes: Vec<Value> = errors.iter().filter_map(|e| cause(e)).collect();
        if let (Some(details), false) = (err.details.as_mut(), causes.is_empty()) {
            details["causes"] = Value::Array(causes);
        }
        err
    }

    /// Names the group in `details` (kube-apiserver's 422s do, for every group but the core
    /// one).
    pub fn in_group(mut self, group: &str) -> Self {
        if let Some(details) = self.details.as_mut().filter(|_| !group.is_empty()) {
            details["group"] = json!(group);
            if let Some(kind) = details["kind"].as_str() {
                let short = format!("{kind} \"");
                if let Some(rest) = self.message.strip_prefix(&short) {
                    self.message = format!("{kind}.{group} \"{rest}");
                }
            }
        }
        self
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `v1 Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        // `reason` is `omitempty` in Go's `metav1.Status`: an error that is no API status
        // (reason `Unknown`, the empty string) answers without one.
        if self.reason.is_empty()
            && let Some(map) = status.as_object_mut()
        {
            map.remove("reason");
        }
        status
    }
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// The `details.causes` entry of one `field: Type: detail` validation error (none when the
/// error names no field).
fn cause(error: &str) -> Option<Value> {
    let (field, message) = error.split_once(": ")?;
    let path = field.split('[').next().unwrap_or(field);
    if path.is_empty() || path.contains(' ') {
        return None;
    }
    let kind = message.split(':').next().unwrap_or(message);
    let reason = match kind {
        "Invalid value" => "FieldValueInvalid",
        "Required value" => "FieldValueRequired",
        "Unsupported value" => "FieldValueNotSupported",
        "Duplicate value" => "FieldValueDuplicate",
        "Forbidden" => "FieldValueForbidden",
        "Too long" => "FieldValueTooLong",
        "Too many" => "FieldValueTooMany",
        "Not found" => "FieldValueNotFound",
        _ => return None,
    };
    Some(json!({"reason": reason, "message": message, "field": field}))
}
