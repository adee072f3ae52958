use serde_json::json;

use super::*;

/// The test file, sending credentials to any server (the server tests say otherwise).
fn file(args_policy: &str, env_policy: &str) -> AccessProviders {
    file_as_read(args_policy, env_policy).any_server()
}

/// The test file as read, with no operator settings.
fn file_as_read(args_policy: &str, env_policy: &str) -> AccessProviders {
    let json = json!({"providers": [
        {"name": "other", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/other"}},
        {"name": "tokens", "execConfig": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": "/opt/plugin",
            "args": ["--base"], "env": [{"name": "A", "value": "file"}, {"name": "B", "value": "file"}],
            "provideClusterInfo": true},
         "profileSourcedCLIArgsPolicy": args_policy, "profileSourcedEnvVarsPolicy": env_policy},
    ]});
    AccessProviders::from_json(json.to_string().as_bytes(), "test.json").unwrap()
}

fn profile(extra: serde_json::Value) -> ClusterProfile {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "status": {
            "credentialProviders": [{"name": "tokens", "cluster": {"server": "https://old"}}],
            "accessProviders": [{"name": "tokens", "cluster": {
                "server": "https://10.0.0.1:6443",
                "certificate-authority-data": "Q0E=",
                "proxy-url": "http://proxy:3128",
                "certificate-authority": "/etc/kubernetes/pki/ca.crt",
                "insecure-skip-tls-verify": true,
                "extensions": extra,
            }}],
        },
    }))
    .unwrap()
}

fn exts(args: serde_json::Value, envs: serde_json::Value) -> serde_json::Value {
    json!([
        {"name": EXEC_EXTENSION, "extension": {"clusterName": "member-1"}},
        {"name": ADDITIONAL_ARGS_EXTENSION, "extension": args},
        {"name": ADDITIONAL_ENVS_EXTENSION, "extension": envs},
    ])
}

fn exec_of(r: &Resolved) -> &ExecConfig {
    r.kubeconfig.auth_infos[0]
        .auth_info
        .as_ref()
        .unwrap()
        .exec
        .as_ref()
        .unwrap()
}

fn env_of(r: &Resolved) -> Vec<(String, String)> {
    exec_of(r)
        .env
        .iter()
        .flatten()
        .map(|e| (e["name"].clone(), e["value"].clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn connection_comes_from_the_access_provider_entry_and_the_command_from_the_file() {
    let f = file("Append", "Replace");
    let r = f
        .resolve(&profile(exts(json!(["--x"]), json!({}))), "ctx")
        .unwrap();
    let cluster = r.kubeconfig.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.1:6443"));
    assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
    assert_eq!(cluster.proxy_url.as_deref(), Some("http://proxy:3128"));
    assert_eq!(
        cluster.certificate_authority, None,
        "file paths are not copied"
    );
    assert_eq!(cluster.insecure_skip_tls_verify, None);
    let ext = cluster.extensions.as_ref().unwrap();
    assert_eq!(ext.len(), 1);
    assert_eq!(ext[0].extension, json!({"clusterName": "member-1"}));
    let exec = exec_of(&r);
    assert_eq!(exec.command.as_deref(), Some("/opt/plugin"));
    assert!(exec.provide_cluster_info);
    assert!(r.policy.exec.allows_command("/opt/plugin"));
    assert!(!r.policy.exec.allows_command("/opt/other"));
    assert!(!r.policy.allow_file_references);
}

/// The plugin's credential (the controller's identity) goes only to servers the operator
/// listed, and never through a profile's proxy unless the operator allows it.
#[test]
fn servers_must_be_allowed_by_the_operator_and_proxies_are_refused() {
    use mcr_core::kubeconfig::{Error, check_policy};
    let p = profile(exts(json!([]), json!({})));
    let mut direct = p.clone();
    direct.status.as_mut().unwrap().access_providers[0]
        .cluster
        .proxy_url = None;
    let check = |f: &AccessProviders, p: &ClusterProfile| {
        let r = f.resolve(p, "ctx")?;
        check_policy(&r.kubeconfig, None, &r.policy).map_err(|e| e.to_string())
    };

    // No allow-list: no server at all, and the message says how to allow some.
    let err = check(&file_as_read("Ignore", "Ignore"), &direct).unwrap_err();
    assert!(err.contains("AccessProviders::servers"), "{err}");

    // A listed host, directly: allowed.
    let fleet = file("Ignore", "Ignore").servers(["10.0.0.*"]);
    check(&fleet, &direct).unwrap();
    // Another host: refused by the exec policy, naming the host.
    let err = check(
        &file("Ignore", "Ignore").servers(["*.fleet.example"]),
        &direct,
    )
    .unwrap_err();
    assert!(err.contains("\"10.0.0.1\""), "{err}");
    // The profile's proxy: refused unless the operator allows it.
    let r = fleet.resolve(&p, "ctx").unwrap();
    assert!(matches!(
        check_policy(&r.kubeconfig, None, &r.policy),
        Err(Error::ProxyNotAllowed { .. })
    ));
    check(&fleet.clone().allow_profile_proxy(true), &p).unwrap();
    // `any_server` is the explicit opt-out.
    check(&file_as_read("Ignore", "Ignore").any_server(), &direct).unwrap();
}

/// Variables a profile may set for the plugin are an allow-list: nothing that changes which
/// code runs, where it connects or which configuration it reads gets through unless listed.
#[test]
fn profile_env_is_an_allow_list() {
    let f = file("Ignore", "AppendIfNotExists").profile_env(["AWS_REGION"]);
    for name in [
        "BASH_ENV",
        "NODE_OPTIONS",
        "PYTHONPATH",
        "HTTPS_PROXY",
        "AWS_CONFIG_FILE",
        "PATH",
        "LD_PRELOAD",
        "KUBERNETES_EXEC_INFO",
    ] {
        let err = f
            .resolve(&profile(exts(json!([]), json!({name: "/tmp/x"}))), "c")
            .unwrap_err();
        assert!(err.contains(&format!("may not set {name}")), "{err}");
        assert!(!err.contains("/tmp/x"), "{err}");
    }
    let r = f
        .resolve(
            &profile(exts(json!([]), json!({"AWS_REGION": "eu-west-1"}))),
            "c",
        )
        .unwrap();
    assert!(env_of(&r).contains(&("AWS_REGION".to_string(), "eu-west-1".to_string())));
}

#[test]
fn append_adds_profile_args_once_per_resolution() {
    let f = file("Append", "Ignore");
    let p = profile(exts(json!(["--extra", "1"]), json!({})));
    for _ in 0..3 {
        let r = f.resolve(&p, "ctx").unwrap();
        assert_eq!(
            exec_of(&r).args.as_deref().unwrap(),
            ["--base", "--extra", "1"]
        );
    }
    assert_eq!(
        f.providers[1].exec_config.args.as_deref().unwrap(),
        ["--base"],
        "the file's entry is never modified"
    );
}

#[test]
fn ignore_policies_leave_args_and_env_alone() {
    let f = file("Ignore", "Ignore");
    let r = f
        .resolve(
            &profile(exts(json!(["--x"]), json!({"A": "p", "C": "p"}))),
            "ctx",
        )
        .unwrap();
    assert_eq!(exec_of(&r).args.as_deref().unwrap(), ["--base"]);
    assert_eq!(env_of(&r), pairs(&[("A", "file"), ("B", "file")]));
    // Ignored extensions may even be malformed.
    assert!(
        f.resolve(&profile(exts(json!(7), json!("x"))), "ctx")
            .is_ok()
    );
}

#[test]
fn env_policies() {
    let p = profile(exts(json!([]), json!({"A": "profile", "C": "profile"})));
    let keep = file("Ignore", "AppendIfNotExists")
        .profile_env(["A", "C"])
        .resolve(&p, "c")
        .unwrap();
    assert_eq!(
        env_of(&keep),
        pairs(&[("A", "file"), ("B", "file"), ("C", "profile")])
    );
    let replace = file("Ignore", "Replace")
        .profile_env(["A", "C"])
        .resolve(&p, "c")
        .unwrap();
    assert_eq!(
        env_of(&replace),
        pairs(&[("A", "profile"), ("B", "file"), ("C", "profile")])
    );
}

#[test]
fn malformed_extensions_and_missing_matches_are_per_profile_errors() {
    let f = file("Append", "Replace");
    let err = f
        .resolve(&profile(exts(json!("--x"), json!({}))), "c")
        .unwrap_err();
    assert!(err.contains("additional-args"), "{err}");
    let err = f
        .resolve(&profile(exts(json!([]), json!(["A"]))), "c")
        .unwrap_err();
    assert!(err.contains("additional-envs"), "{err}");
    let none: ClusterProfile = serde_json::from_value(json!({"status": {
        "accessProviders": [{"name": "unknown", "cluster": {"server": "https://x"}}]}}))
    .unwrap();
    let err = f.resolve(&none, "c").unwrap_err();
    assert!(err.contains("\"unknown\""), "{err}");
}

#[test]
fn file_order_decides_between_providers_and_deprecated_entries_count() {
    let f = file("Ignore", "Ignore");
    let p: ClusterProfile = serde_json::from_value(json!({"status": {
        "accessProviders": [{"name": "tokens", "cluster": {"server": "https://tokens"}}],
        "credentialProviders": [{"name": "other", "cluster": {"server": "https://other"}}],
    }}))
    .unwrap();
    let r = f.resolve(&p, "c").unwrap();
    assert_eq!(exec_of(&r).command.as_deref(), Some("/bin/other"));
}

#[test]
fn malformed_files_name_the_file_and_the_problem() {
    let cases: [(&str, &str); 6] = [
        ("{", "malformed JSON"),
        (r#"{"providers": []}"#, "no providers"),
        (
            r#"{"providers": [{"name": "a"}]}"#,
            "missing field `execConfig`",
        ),
        (
            r#"{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": ""}}]}"#,
            "command is empty",
        ),
        (
            r#"{"providers": [{"name": "a", "execConfig": {"apiVersion": "v9", "command": "x"}}]}"#,
            "apiVersion",
        ),
        (
            r#"{"providers": [{"name": "a", "profileSourcedCLIArgsPolicy": "Prepend", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}}]}"#,
            "unknown variant `Prepend`",
        ),
    ];
    for (json, expected) in cases {
        let err = AccessProviders::from_json(json.as_bytes(), "/etc/p.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("access-provider file /etc/p.json: "),
            "{err}"
        );
        assert!(err.contains(expected), "{json}: {err}");
    }
}
