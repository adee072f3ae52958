//! Unit tests for parsing, policy, hashing and redaction (no cluster needed).

mod client;
mod exec_rules;
mod hash;
mod parse_policy;

use crate::kubeconfig::{Error, ExecPolicy, Kubeconfig};

/// The exec part of `check_policy`.
pub(super) fn check_exec_policy(
    kc: &Kubeconfig,
    context: Option<&str>,
    policy: &ExecPolicy,
) -> Result<(), Error> {
    super::exec_policy::exec_plan(kc, context, policy).map(|_| ())
}

pub(super) const TOKEN: &str = "sEcReT-t0ken-VALUE-4711";
pub(super) const KEY_DATA: &str = "UFJJVkFURS1LRVktREFUQS0xMjM0NQ==";

pub(super) fn kubeconfig_with(user: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443
- name: c2
  cluster:
    server: https://127.0.0.2:6443
users:
- name: u1
  user:
{user}
- name: plain
  user:
    token: {TOKEN}
contexts:
- name: ctx-b
  context:
    cluster: c1
    user: u1
- name: ctx-a
  context:
    cluster: c2
    user: plain
    namespace: team-a
current-context: ctx-b
"#
    )
}

pub(super) fn exec_user(command: &str) -> String {
    format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {command}\n      args: [\"--token\", \"{TOKEN}\"]\n      env: [{{name: SECRET, value: \"{TOKEN}\"}}]\n      interactiveMode: Never"
    )
}

pub(super) fn token_user() -> String {
    format!("    token: {TOKEN}\n    client-key-data: {KEY_DATA}")
}

pub(super) fn assert_no_secret(msg: &str) {
    assert!(!msg.contains(TOKEN), "message leaks the token: {msg}");
    assert!(!msg.contains(KEY_DATA), "message leaks key data: {msg}");
    assert!(
        !msg.contains("sEcReT"),
        "message leaks part of the token: {msg}"
    );
}
