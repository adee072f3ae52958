//! Query strings: percent-decoding and the parameters the engine understands.

use std::time::Duration;

use serde_json::Value;

use crate::engine::{
    ApiError, DeleteOptions, FieldValidation, ListParams, WatchParams, WriteOptions,
};

/// A decoded query string.
#[derive(Clone, Debug, Default)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes `a=b&c=d` (percent escapes and `+` as space).
    pub(crate) fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (decode(k), decode(v))
            })
            .collect();
        Self { pairs }
    }

    /// The last value of `key`, if present and not empty.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter (`true`, `1`, `t`, ...).
    pub(crate) fn flag(&self, key: &str) -> Result<bool, ApiError> {
        match self.get(key) {
            None => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(ApiError::bad_request(format!(
                "invalid boolean for {key}: {other:?}"
            ))),
        }
    }

    /// A non-negative integer parameter. Kubernetes reads these as int64: a value beyond
    /// `i64::MAX` is a 400, as on a real API server.
    fn number(&self, key: &str) -> Result<Option<u64>, ApiError> {
        self.get(key)
            .map(|v| match v.parse::<i64>() {
                Ok(n) if n >= 0 => Ok(n.unsigned_abs()),
                Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
                    Err(ApiError::bad_request(format!(
                        "invalid number for {key}: {v:?}: value out of range"
                    )))
                }
                _ => Err(ApiError::bad_request(format!(
                    "invalid number for {key}: {v:?}"
                ))),
            })
            .transpose()
    }

    /// Whether the request asks for a watch (`watch=true`).
    pub(crate) fn is_watch(&self) -> Result<bool, ApiError> {
        self.flag("watch")
    }

    /// List parameters.
    pub(crate) fn list_params(&self) -> Result<ListParams, ApiError> {
        Ok(ListParams {
            label_selector: self.get("labelSelector").map(str::to_string),
            field_selector: self.get("fieldSelector").map(str::to_string),
            limit: self.number("limit")?,
            continue_token: self.get("continue").map(str::to_string),
            resource_version: self.get("resourceVersion").map(str::to_string),
            resource_version_match: self.get("resourceVersionMatch").map(str::to_string),
        })
    }

    /// Watch parameters.
    pub(crate) fn watch_params(&self) -> Result<WatchParams, ApiError> {
        Ok(WatchParams {
            list: self.list_params()?,
            allow_bookmarks: self.flag("allowWatchBookmarks")?,
            send_initial_events: self.flag("sendInitialEvents")?,
            timeout: self
                .number("timeoutSeconds")?
                .filter(|s| *s > 0)
                .map(Duration::from_secs),
        })
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "unsupported dryRun value {other:?}"
            ))),
        }
    }

    /// Write options; `kind` names them in errors (`CreateOptions`, `UpdateOptions`,
    /// `PatchOptions`).
    pub(crate) fn write_options(&self, kind: &str) -> Result<WriteOptions, ApiError> {
        let field_validation = match self.get("fieldValidation").unwrap_or_default() {
            "" | "Warn" => FieldValidation::Warn,
            "Ignore" => FieldValidation::Ignore,
            "Strict" => FieldValidation::Strict,
            other => {
                let mut err = ApiError::invalid(
                    kind,
                    "",
                    format!(
                        "fieldValidation: Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                    ),
                )
                .in_group("meta.k8s.io");
                if let Some(details) = err.details.as_mut().and_then(Value::as_object_mut) {
                    details.remove("name");
                }
                return Err(err);
            }
        };
        Ok(WriteOptions {
            dry_run: self.dry_run()?,
            field_manager: self.get("fieldManager").map(str::to_string),
            force: self.flag("force")?,
            field_validation,
            warnings: Default::default(),
        })
    }

    /// Delete options from the query, overlaid by a `DeleteOptions` body (if any).
    pub(crate) fn delete_options(&self, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        let mut opts = DeleteOptions {
            propagation_policy: self.get("propagationPolicy").map(str::to_string),
            dry_run: self.dry_run()?,
            ..DeleteOptions::default()
        };
        if self.flag("orphanDependents")? {
            opts.propagation_policy
                .get_or_insert_with(|| "Orphan".to_string());
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(opts);
        }
        let body: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        let text = |v: &Value| v.as_str().map(str::to_string);
        if let Some(p) = body.get("propagationPolicy").and_then(text) {
            opts.propagation_policy = Some(p);
        } else if body.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            opts.propagation_policy = Some("Orphan".to_string());
        }
        if let Some(pre) = body.get("preconditions") {
            opts.precondition_uid = pre.get("uid").and_then(text);
            opts.precondition_resource_version = pre.get("resourceVersion").and_then(text);
        }
        if let Some(modes) = body.get("dryRun").and_then(Value::as_array) {
            opts.dry_run |= modes.iter().any(|m| m.as_str() == Some("All"));
        }
        Ok(opts)
    }
}

/// Percent-decodes a query component (`+` is a space).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        assert_eq!(decode("a%3Db%2Cc+d"), "a=b,c d");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
        assert_eq!(decode("x%2"), "x%2");
    }

    #[test]
    fn list_and_watch_params() {
        let q = Query::parse(Some(
            "&labelSelector=app%3Dweb%2Ctier+in+(a%2Cb)&fieldSelector=metadata.name%3Dx&limit=5&continue=abc&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=12",
        ));
        assert!(q.is_watch().unwrap());
        let w = q.watch_params().unwrap();
        assert_eq!(
            w.list.label_selector.as_deref(),
            Some("app=web,tier in (a,b)")
        );
        assert_eq!(w.list.field_selector.as_deref(), Some("metadata.name=x"));
        assert_eq!(w.list.limit, Some(5));
        assert_eq!(w.list.continue_token.as_deref(), Some("abc"));
        assert_eq!(w.list.resource_version.as_deref(), Some("12"));
        assert_eq!(w.timeout, Some(Duration::from_secs(290)));
        assert!(w.allow_bookmarks && !w.send_initial_events);
        assert!(Query::parse(Some("watch=1")).is_watch().unwrap());
        assert!(!Query::parse(None).is_watch().unwrap());
        assert_eq!(
            Query::parse(Some("limit=x"))
                .list_params()
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn write_and_delete_options() {
        let q = Query::parse(Some("dryRun=All&fieldManager=mgr&force=true"));
        let w = q.write_options("PatchOptions").unwrap();
        assert!(w.dry_run && w.force);
        assert_eq!(w.field_manager.as_deref(), Some("mgr"));
        let d = Query::parse(Some("propagationPolicy=Orphan"))
            .delete_options(b"")
            .unwrap();
        assert_eq!(d.propagation_policy.as_deref(), Some("Orphan"));
        let body = br#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground","dryRun":["All"],"preconditions":{"uid":"u1","resourceVersion":"7"}}"#;
        let d = Query::parse(None).delete_options(body).unwrap();
        assert_eq!(d.propagation_policy.as_deref(), Some("Foreground"));
        assert_eq!(d.precondition_uid.as_deref(), Some("u1"));
        assert_eq!(d.precondition_resource_version.as_deref(), Some("7"));
        assert!(d.dry_run);
        assert_eq!(
            Query::parse(None)
                .delete_options(b"{nope")
                .unwrap_err()
                .code,
            400
        );
    }
}
