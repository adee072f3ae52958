//! Connection and bytes hashes.

use super::*;
use crate::kubeconfig::*;

fn hash(yaml: &str, context: &str) -> String {
    connection_hash(&parse(yaml.as_bytes()).unwrap(), Some(context)).unwrap()
}

#[test]
fn connection_hash_is_stable_across_unrelated_changes() {
    let base = kubeconfig_with(&token_user());
    let h = hash(&base, "ctx-a");
    assert_eq!(h.len(), 64);
    assert!(
        h.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(h, hash(&base, "ctx-a"));
    assert_eq!(
        connection_hash(&parse(base.as_bytes()).unwrap(), None).unwrap(),
        hash(&base, "ctx-b")
    );

    // reordered entries and keys, other contexts / clusters / users added, current-context changed
    let reordered = format!(
        r#"current-context: other
contexts:
- context: {{namespace: team-a, user: plain, cluster: c2}}
  name: ctx-a
- name: other
  context: {{cluster: c3, user: u3}}
users:
- name: u3
  user: {{token: another}}
- user: {{token: {TOKEN}}}
  name: plain
clusters:
- name: c3
  cluster: {{server: "https://10.1.1.1"}}
- cluster: {{server: "https://127.0.0.2:6443"}}
  name: c2
kind: Config
apiVersion: v1
preferences: {{colors: true}}
"#
    );
    assert_eq!(h, hash(&reordered, "ctx-a"));
}

#[test]
fn connection_hash_changes_with_the_connection() {
    let base = kubeconfig_with(&token_user());
    let h = hash(&base, "ctx-a");
    let server = base.replace("https://127.0.0.2:6443", "https://127.0.0.3:6443");
    assert_ne!(h, hash(&server, "ctx-a"));
    let token = base.replace(&format!("token: {TOKEN}"), "token: rotated");
    assert_ne!(h, hash(&token, "ctx-a"));
    let namespace = base.replace("namespace: team-a", "namespace: team-b");
    assert_ne!(h, hash(&namespace, "ctx-a"));
    // the other context's user changing does not touch ctx-a
    let other_user = base.replace(KEY_DATA, "b3RoZXI=");
    assert_eq!(h, hash(&other_user, "ctx-a"));
    assert_ne!(hash(&base, "ctx-b"), hash(&other_user, "ctx-b"));
    // different contexts differ
    assert_ne!(h, hash(&base, "ctx-b"));
    assert!(connection_hash(&parse(base.as_bytes()).unwrap(), Some("nope")).is_err());
}

#[test]
fn bytes_hash_is_sha256_hex() {
    assert_eq!(
        bytes_hash(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}
