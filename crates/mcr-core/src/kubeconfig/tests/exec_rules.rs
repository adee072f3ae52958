//! Exec rules: arguments, servers and kubeconfig environment are pinned, not only the command
//! (issue 17 item 1). Refusals never echo argument or environment values.

use super::*;
use crate::kubeconfig::*;

/// A kubeconfig whose user runs `command` with `args` and `env` against `server`.
fn exec_kubeconfig(command: &str, args: &[&str], env: &[(&str, &str)], server: &str) -> Kubeconfig {
    let args = args
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let env = env
        .iter()
        .map(|(n, v)| format!("{{name: {n:?}, value: {v:?}}}"))
        .collect::<Vec<_>>()
        .join(", ");
    parse(
        format!(
            r#"
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: {command}, args: [{args}], env: [{env}]}}}}}}]
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]
current-context: ctx
"#
        )
        .as_bytes(),
    )
    .unwrap()
}

const EKS: &str = "https://ABC123.gr7.eu-west-1.eks.amazonaws.com";

fn refusal(kc: &Kubeconfig, policy: &ExecPolicy) -> String {
    match check_exec_policy(kc, None, policy) {
        Err(err @ Error::ExecNotAllowed { .. }) => {
            let msg = err.to_string();
            assert_no_secret(&msg);
            msg
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_allowed_command_no_longer_accepts_any_arguments_server_or_environment() {
    let eks = ExecRule::command("aws")
        .args_matching(["eks", "get-token", "--cluster-name", "*"])
        .servers(["*.eks.amazonaws.com"])
        .pass_env(["HOME", "AWS_PROFILE"]);
    let policy = ExecPolicy::allow(eks);
    let good = exec_kubeconfig(
        "/usr/bin/aws",
        &["eks", "get-token", "--cluster-name", "prod"],
        &[],
        EKS,
    );
    check_exec_policy(&good, None, &policy).unwrap();

    // The attacks the issue describes: other arguments (reading local files), another server
    // (receiving the controller's cloud token), the kubeconfig's own environment.
    let s3 = exec_kubeconfig(
        "aws",
        &["s3", "cp", "/var/run/secrets/token", TOKEN],
        &[],
        EKS,
    );
    let msg = refusal(&s3, &policy);
    assert!(msg.contains("aws") && msg.contains("argument 1"), "{msg}");
    let evil = exec_kubeconfig(
        "aws",
        &["eks", "get-token", "--cluster-name", "prod"],
        &[],
        "https://collector.evil.example:443",
    );
    let msg = refusal(&evil, &policy);
    assert!(msg.contains("collector.evil.example"), "{msg}");
    let suffix_trick = exec_kubeconfig(
        "aws",
        &["eks", "get-token", "--cluster-name", "prod"],
        &[],
        "https://eks.amazonaws.com.evil.example",
    );
    refusal(&suffix_trick, &policy);
    let env = exec_kubeconfig(
        "aws",
        &["eks", "get-token", "--cluster-name", "prod"],
        &[("AWS_CONFIG_FILE", TOKEN)],
        EKS,
    );
    let msg = refusal(&env, &policy);
    assert!(msg.contains("AWS_CONFIG_FILE"), "{msg}");
    // ... unless the rule allows that variable
    let lenient = ExecPolicy::allow(
        ExecRule::command("aws")
            .args_matching(["eks", "get-token", "--cluster-name", "*"])
            .servers(["*.eks.amazonaws.com"])
            .kubeconfig_env(["AWS_CONFIG_FILE"]),
    );
    check_exec_policy(&env, None, &lenient).unwrap();
}

#[test]
fn rule_defaults_refuse_what_is_not_stated() {
    let kc = exec_kubeconfig("get-token", &[], &[], EKS);
    // no servers named: refused, with a hint
    let msg = refusal(&kc, &ExecPolicy::allow(ExecRule::command("get-token")));
    assert!(msg.contains("any_server"), "{msg}");
    check_exec_policy(
        &kc,
        None,
        &ExecPolicy::allow(ExecRule::command("get-token").any_server()),
    )
    .unwrap();
    // no arguments allowed unless stated
    let with_args = exec_kubeconfig("get-token", &["--token", TOKEN], &[], EKS);
    let plain = ExecPolicy::allow(ExecRule::command("get-token").any_server());
    let msg = refusal(&with_args, &plain);
    assert!(msg.contains("no arguments"), "{msg}");
    let exact = ExecPolicy::allow(
        ExecRule::command("get-token")
            .args(["--token", "other"])
            .any_server(),
    );
    let msg = refusal(&with_args, &exact);
    assert!(msg.contains("argument 2"), "{msg}");
    let exact = ExecPolicy::allow(
        ExecRule::command("get-token")
            .args(["--token", TOKEN])
            .any_server(),
    );
    check_exec_policy(&with_args, None, &exact).unwrap();
    let any = ExecPolicy::allow(ExecRule::command("get-token").any_args().any_server());
    check_exec_policy(&with_args, None, &any).unwrap();
    // a second rule for the same command can accept what the first refuses
    let two = ExecPolicy::allow(ExecRule::command("get-token").servers(["*.gke.goog"])).or_allow(
        ExecRule::command("get-token")
            .any_args()
            .servers(["*.amazonaws.com"]),
    );
    check_exec_policy(&with_args, None, &two).unwrap();
    // servers: IP addresses and ports
    let ip = exec_kubeconfig("get-token", &[], &[], "https://10.0.0.7:6443");
    let rule = |p: &str| ExecPolicy::allow(ExecRule::command("get-token").servers([p]));
    check_exec_policy(&ip, None, &rule("10.0.0.?")).unwrap();
    refusal(&ip, &rule("10.0.0.1"));
    // a server without a host never matches a host pattern
    let no_host = exec_kubeconfig("get-token", &[], &[], "10.0.0.5:6443");
    refusal(&no_host, &rule("*"));
}

#[test]
fn refused_by_deny_and_by_an_unknown_command() {
    let kc = exec_kubeconfig("get-token", &["--token", TOKEN], &[("SECRET", TOKEN)], EKS);
    let msg = refusal(&kc, &ExecPolicy::Deny);
    assert!(msg.contains("denied"), "{msg}");
    let msg = refusal(
        &kc,
        &ExecPolicy::allow(ExecRule::command("aws").any_server()),
    );
    assert!(msg.contains("no rule"), "{msg}");
    check_exec_policy(&kc, None, &ExecPolicy::AllowAll).unwrap();
}

#[test]
fn the_policy_is_one_value_apart_from_client_options() {
    // A kubeconfig proxy is refused by default and allowed by the trusted policy.
    let kc = parse(
        br#"
clusters: [{name: c, cluster: {server: "https://10.0.0.1", proxy-url: "http://proxy:3128"}}]
users: [{name: u, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"#,
    )
    .unwrap();
    let err = check_policy(&kc, None, &Policy::default()).unwrap_err();
    assert!(
        matches!(err, Error::FileReferenceNotAllowed { .. }),
        "{err:?}"
    );
    let err = check_policy(&kc, None, &Policy::default().allow_file_references(true)).unwrap_err();
    assert!(matches!(err, Error::ProxyNotAllowed { .. }), "{err:?}");
    check_policy(&kc, None, &Policy::trusted()).unwrap();
    // an exec policy converts into the untrusted policy with that exec policy
    let p: Policy = ExecPolicy::AllowAll.into();
    assert!(!p.allow_file_references && !p.allow_kubeconfig_proxy && p.env_proxy.is_none());
}
