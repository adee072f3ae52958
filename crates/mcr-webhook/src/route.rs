//! Paths: controller-runtime's conventional ones (`/mutate-<group>-<version>-<kind>`,
//! `/validate-...`, `/convert`) and the member prefix `/clusters/{name}`.

use mcr_core::ClusterName;

/// The prefix of a member's routes: `/clusters/{name}/validate-...`.
pub const MEMBER_PREFIX: &str = "/clusters/";

/// controller-runtime's default path: `/{verb}-{group with dots as dashes}-{version}-{kind}`,
/// lower-case kind (the core group is empty, hence `/validate--v1-configmap`).
///
/// ```
/// use mcr_webhook::default_path;
/// assert_eq!(default_path("validate", "", "v1", "ConfigMap"), "/validate--v1-configmap");
/// assert_eq!(default_path("mutate", "apps.example.com", "v1", "Widget"), "/mutate-apps-example-com-v1-widget");
/// ```
pub fn default_path(verb: &str, group: &str, version: &str, kind: &str) -> String {
    format!(
        "/{verb}-{}-{version}-{}",
        group.replace('.', "-"),
        kind.to_lowercase()
    )
}

/// The path a member's apiserver calls for `path`: `/clusters/{name}{path}`, the name
/// percent-encoded.
///
/// ```
/// use mcr_webhook::member_path;
/// assert_eq!(member_path(&"east".into(), "/convert"), "/clusters/east/convert");
/// assert_eq!(member_path(&"kind#a b".into(), "/convert"), "/clusters/kind%23a%20b/convert");
/// ```
pub fn member_path(name: &ClusterName, path: &str) -> String {
    let mut out = String::from(MEMBER_PREFIX);
    for b in name.as_str().bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(path);
    out
}

/// Splits a request path into the cluster it names and the webhook path. `Err` for a member
/// path whose name is not a member name (empty, not UTF-8, the host's name).
pub(crate) fn split(path: &str) -> Result<(ClusterName, &str), String> {
    let Some(rest) = path.strip_prefix(MEMBER_PREFIX) else {
        return Ok((ClusterName::host(), path));
    };
    let (raw, sub) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => return Err(format!("{path}: no webhook path after the cluster name")),
    };
    let name = decode(raw)
        .ok_or_else(|| format!("{path}: the cluster name is not valid percent-encoded UTF-8"))?;
    let name = ClusterName::new(name);
    if let Some(why) = name.member_name_error() {
        return Err(format!("{path}: no member can be named so ({why})"));
    }
    Ok((name, sub))
}

fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_paths_round_trip() {
        for name in ["east", "kind#a b", "ü/x", "%41"] {
            let path = member_path(&name.into(), "/validate--v1-configmap");
            let (got, sub) = split(&path).unwrap();
            assert_eq!(got, name);
            assert_eq!(sub, "/validate--v1-configmap");
        }
    }

    #[test]
    fn host_and_bad_member_paths() {
        let (host, sub) = split("/convert").unwrap();
        assert!(host.is_host());
        assert_eq!(sub, "/convert");
        assert!(split("/clusters/%3Chost%3E/convert").is_err());
        assert!(split("/clusters//convert").is_err());
        assert!(split("/clusters/east").is_err());
        assert!(split("/clusters/%zz/convert").is_err());
    }
}
