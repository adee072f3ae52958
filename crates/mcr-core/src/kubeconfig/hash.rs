//! Content hashes that tell whether a cluster's connection changed.

use kube::config::Kubeconfig;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Error, parse::resolve};

/// Domain separation for the connection hash, bumped if the canonical form ever changes.
const CONNECTION_HASH_DOMAIN: &[u8] = b"mcr.kubeconfig.connection.v1\n";

/// SHA-256 (lowercase hex) of what defines the connection of a context: the resolved context
/// entry (cluster and user names, namespace, extensions), the cluster entry (server, CA, TLS
/// and proxy settings) and the user entry (credentials, exec, impersonation), each serialized
/// canonically (object keys sorted). The context's own name, other contexts, clusters and users,
/// `current-context` (when `context` is given), preferences and key order in the file do not
/// change it. Files referenced by path are not read: a rotated CA *file* keeps the hash.
///
/// `context` `None` means the current context. Errors when the context cannot be resolved.
/// Providers store it with [`Cluster::with_connection_hash`](crate::Cluster::with_connection_hash)
/// so an unchanged kubeconfig does not restart the cluster.
///
/// ```
/// use mcr_core::kubeconfig::{connection_hash, parse};
/// let a = parse(br#"
/// clusters: [{name: c, cluster: {server: "https://10.0.0.1"}}]
/// contexts: [{name: ctx, context: {cluster: c}}]
/// "#).unwrap();
/// let b = parse(br#"
/// contexts: [{name: other, context: {cluster: c}}, {name: ctx, context: {cluster: c}}]
/// clusters: [{name: c, cluster: {server: "https://10.0.0.1"}}]
/// "#).unwrap();
/// assert_eq!(connection_hash(&a, Some("ctx")).unwrap(), connection_hash(&b, Some("ctx")).unwrap());
/// assert_eq!(connection_hash(&a, Some("ctx")).unwrap().len(), 64);
/// ```
pub fn connection_hash(kc: &Kubeconfig, context: Option<&str>) -> Result<String, Error> {
    let resolved = resolve(kc, context)?;
    let serialization_failed = |what: &str| Error::InvalidConfig {
        context: resolved.name.to_string(),
        reason: format!("the {what} entry cannot be serialized"),
    };
    let parts = [
        serde_json::to_value(resolved.context).map_err(|_| serialization_failed("context"))?,
        serde_json::to_value(resolved.cluster).map_err(|_| serialization_failed("cluster"))?,
        match resolved.user {
            Some(user) => serde_json::to_value(user).map_err(|_| serialization_failed("user"))?,
            None => Value::Null,
        },
    ];
    let mut hasher = Sha256::new();
    hasher.update(CONNECTION_HASH_DOMAIN);
    let mut buf = String::new();
    for part in &parts {
        buf.clear();
        write_canonical(part, &mut buf);
        // Length-prefix each part so that parts cannot run into each other.
        hasher.update((buf.len() as u64).to_be_bytes());
        hasher.update(buf.as_bytes());
    }
    Ok(hex::encode(hasher.finalize()))
}

/// SHA-256 (lowercase hex) of raw bytes, e.g. the kubeconfig data key of a Secret.
///
/// ```
/// assert_eq!(
///     mcr_core::kubeconfig::bytes_hash(b""),
///     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
/// );
/// ```
pub fn bytes_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// JSON with object keys sorted at every level, independent of serde_json's map ordering.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}
