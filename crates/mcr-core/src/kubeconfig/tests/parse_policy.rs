//! Parsing, context resolution and the exec policy.

use super::*;
use crate::kubeconfig::*;

#[test]
fn parse_empty_inputs() {
    for input in ["", "   \n\t\n", "# just a comment\n", "---\n"] {
        let err = parse(input.as_bytes()).unwrap_err();
        assert!(matches!(err, Error::Empty), "{input:?}: {err:?}");
    }
}

#[test]
fn parse_garbage_is_a_parse_error_without_content() {
    let inputs = [
        format!("users: [{{name: u, user: {{token: {TOKEN}}}"),
        format!("{TOKEN}: [\n"),
        format!("clusters: \"{TOKEN}\"\n"),
        format!("users:\n- name: u\n  user:\n    token: [{TOKEN}]\n"),
        format!("contexts:\n- context: {{cluster: x}}\n  token: {TOKEN}\n  name: [\n"),
    ];
    for input in &inputs {
        let err = parse(input.as_bytes()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Parse { .. }), "{input:?}: {err:?}");
        assert!(msg.starts_with("invalid kubeconfig: "), "{msg}");
        assert_no_secret(&msg);
        assert_no_secret(&format!("{err:?}"));
    }
    let err = parse(b"\xff\xfe\x00garbage").unwrap_err();
    assert!(matches!(err, Error::Parse { .. }), "{err:?}");
}

#[test]
fn parse_error_names_the_reason() {
    let err = parse(b"clusters: 5\n").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("expected"), "{msg}");
    assert!(msg.contains("line 1"), "{msg}");
}

#[test]
fn parse_valid_and_list_contexts() {
    let kc = parse(kubeconfig_with(&token_user()).as_bytes()).unwrap();
    assert_eq!(contexts(&kc), vec!["ctx-b", "ctx-a"]);
    assert_eq!(current_context(&kc), Some("ctx-b"));
    // a UTF-8 BOM is ignored
    let mut with_bom = b"\xEF\xBB\xBF".to_vec();
    with_bom.extend_from_slice(kubeconfig_with(&token_user()).as_bytes());
    assert_eq!(contexts(&parse(&with_bom).unwrap()), vec!["ctx-b", "ctx-a"]);
    // an empty current-context counts as unset
    let kc = parse(b"current-context: \"\"\ncontexts: []\nclusters: [{name: c}]").unwrap();
    assert_eq!(current_context(&kc), None);
}

#[test]
fn read_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(&path, kubeconfig_with(&token_user())).unwrap();
    assert_eq!(contexts(&read(&path).unwrap()), vec!["ctx-b", "ctx-a"]);

    std::fs::write(&path, "").unwrap();
    assert!(matches!(read(&path).unwrap_err(), Error::Empty));

    std::fs::write(&path, format!("users: [{{token: {TOKEN}")).unwrap();
    let err = read(&path).unwrap_err();
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    assert_no_secret(&err.to_string());

    let err = read(&dir.path().join("missing")).unwrap_err();
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn exec_refused_by_default_naming_context_and_basename_only() {
    let kc = parse(kubeconfig_with(&exec_user("/opt/plugins/get-token")).as_bytes()).unwrap();
    let err = check_exec_policy(&kc, None, &ExecPolicy::default()).unwrap_err();
    match &err {
        Error::ExecNotAllowed {
            context, command, ..
        } => {
            assert_eq!(context, "ctx-b");
            assert_eq!(command, "get-token");
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("ctx-b") && msg.contains("get-token"), "{msg}");
    assert!(!msg.contains("/opt/plugins"), "{msg}");
    assert_no_secret(&msg);
    // the other context's user has no exec: allowed
    check_exec_policy(&kc, Some("ctx-a"), &ExecPolicy::Deny).unwrap();
}

#[test]
fn exec_allowed_by_policy() {
    let kc = parse(kubeconfig_with(&exec_user("/opt/plugins/get-token")).as_bytes()).unwrap();
    check_exec_policy(&kc, None, &ExecPolicy::AllowAll).unwrap();
    let allowed = |list: &[&str]| {
        let policy = ExecPolicy::Allow(
            list.iter()
                .map(|s| {
                    ExecRule::command(*s)
                        .any_args()
                        .any_server()
                        .kubeconfig_env(["SECRET"])
                })
                .collect(),
        );
        check_exec_policy(&kc, None, &policy).is_ok()
    };
    assert!(allowed(&["/opt/plugins/get-token"]), "exact path");
    assert!(allowed(&["other", "get-token"]), "basename");
    assert!(!allowed(&[]));
    assert!(
        !allowed(&["/usr/bin/get-token"]),
        "other path, same basename"
    );
    assert!(!allowed(&["get"]));
    assert!(!allowed(&["token"]));
    assert!(!allowed(&[""]));
    assert!(!allowed(&["/opt/plugins"]));

    let bare = parse(kubeconfig_with(&exec_user("get-token")).as_bytes()).unwrap();
    let rule = |c: &str| {
        ExecRule::command(c)
            .any_args()
            .any_server()
            .kubeconfig_env(["SECRET"])
    };
    let policy = ExecPolicy::allow(rule("get-token"));
    check_exec_policy(&bare, None, &policy).unwrap();
    let policy = ExecPolicy::allow(rule("/opt/plugins/get-token"));
    assert!(check_exec_policy(&bare, None, &policy).is_err());
}

#[test]
fn auth_provider_refused_unless_allow_all() {
    let user = format!(
        "    auth-provider:\n      name: gcp\n      config:\n        access-token: {TOKEN}\n        cmd-path: /usr/bin/gcloud"
    );
    let kc = parse(kubeconfig_with(&user).as_bytes()).unwrap();
    for policy in [
        ExecPolicy::Deny,
        ExecPolicy::allow(ExecRule::command("gcloud").any_args().any_server())
            .or_allow(ExecRule::command("/usr/bin/gcloud").any_args().any_server()),
    ] {
        let err = check_exec_policy(&kc, None, &policy).unwrap_err();
        assert!(
            matches!(&err, Error::AuthProviderNotAllowed { context, provider } if context == "ctx-b" && provider == "gcp"),
            "{err:?}"
        );
        assert_no_secret(&err.to_string());
    }
    // Even trusted, an auth-provider that needs a command is refused: mcr never runs one.
    let err = check_exec_policy(&kc, None, &ExecPolicy::AllowAll).unwrap_err();
    assert!(
        matches!(&err, Error::AuthProviderCommand { context, provider } if context == "ctx-b" && provider == "gcp"),
        "{err:?}"
    );
    assert!(err.is_policy_denial());
    assert_no_secret(&err.to_string());
    let stored =
        parse(kubeconfig_with(&user.replace("\n        cmd-path: /usr/bin/gcloud", "")).as_bytes())
            .unwrap();
    check_exec_policy(&stored, None, &ExecPolicy::AllowAll).unwrap();
}

#[test]
fn resolution_errors() {
    let kc = parse(kubeconfig_with(&token_user()).as_bytes()).unwrap();
    let err = check_exec_policy(&kc, Some("nope"), &ExecPolicy::Deny).unwrap_err();
    assert!(
        matches!(&err, Error::ContextNotFound { context } if context == "nope"),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"nope\""));

    let kc =
        parse(b"clusters: [{name: c}]\ncontexts: [{name: x, context: {cluster: gone}}]").unwrap();
    assert!(matches!(
        connection_hash(&kc, None).unwrap_err(),
        Error::NoContext
    ));
    let err = connection_hash(&kc, Some("x")).unwrap_err();
    assert!(
        matches!(&err, Error::ClusterNotFound { context, cluster } if context == "x" && cluster == "gone"),
        "{err:?}"
    );
}

#[test]
fn parsed_lists_keep_no_spare_room() {
    // A provider holds one parsed kubeconfig per member while its fleet is built.
    let yaml = "clusters: [{name: c, cluster: {server: 'https://a'}}]\n\
                users: [{name: u, user: {token: t}}]\n\
                contexts: [{name: x, context: {cluster: c, user: u}}]\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, yaml).unwrap();
    for kc in [parse(yaml.as_bytes()).unwrap(), read(&path).unwrap()] {
        assert_eq!(kc.clusters.capacity(), kc.clusters.len());
        assert_eq!(kc.auth_infos.capacity(), kc.auth_infos.len());
        assert_eq!(kc.contexts.capacity(), kc.contexts.len());
    }
}
