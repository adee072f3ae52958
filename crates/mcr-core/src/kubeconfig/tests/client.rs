//! Client building: errors without credentials, panics contained, file references.

use super::*;
use crate::kubeconfig::*;

async fn client_err(
    kc: &Kubeconfig,
    context: Option<&str>,
    opts: &ClientOptions,
    policy: &Policy,
) -> Error {
    match client_for_context(kc, context, opts, policy).await {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn client_errors_never_contain_credentials() {
    let opts = ClientOptions::default();
    // exec refused before anything runs
    let kc = parse(kubeconfig_with(&exec_user("/opt/plugins/get-token")).as_bytes()).unwrap();
    let err = client_err(&kc, None, &opts, &Policy::default()).await;
    assert!(matches!(err, Error::ExecNotAllowed { .. }), "{err:?}");
    assert_no_secret(&err.to_string());
    // exec allowed, but the plugin does not exist: the error names the basename only
    let err = client_err(&kc, None, &opts, &Policy::trusted()).await;
    let msg = err.to_string();
    assert!(matches!(err, Error::Client { .. }), "{err:?}");
    assert!(msg.contains("get-token") && msg.contains("ctx-b"), "{msg}");
    assert_no_secret(&msg);

    // undecodable key data
    let kc = parse(
        kubeconfig_with(&format!(
            "    client-certificate-data: {KEY_DATA}\n    client-key-data: \"{TOKEN}!!\""
        ))
        .as_bytes(),
    )
    .unwrap();
    let err = client_err(&kc, None, &opts, &Policy::default()).await;
    assert_no_secret(&err.to_string());
    assert_no_secret(&format!("{err:?}"));

    // bad CA data
    let kc = parse(
        format!(
            "clusters: [{{name: c, cluster: {{server: \"https://x\", certificate-authority-data: \"{TOKEN}\"}}}}]\nusers: [{{name: u, user: {{token: {TOKEN}}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]"
        )
        .as_bytes(),
    )
    .unwrap();
    let err = client_err(&kc, Some("x"), &opts, &Policy::default()).await;
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err:?}");
    assert!(err.to_string().contains("certificate-authority"), "{err}");
    assert_no_secret(&err.to_string());

    // an invalid token (not a header value)
    let kc = parse(kubeconfig_with("    token: \"bad\\ntoken-sEcReT\"").as_bytes()).unwrap();
    let err = client_err(&kc, None, &opts, &Policy::default()).await;
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err:?}");
    assert!(err.to_string().contains("token"), "{err}");
    assert!(!err.to_string().contains("sEcReT"), "{err}");

    // an invalid user agent is named but not echoed
    let bad = ClientOptions {
        user_agent: Some("x\ny-sEcReT".into()),
        ..ClientOptions::default()
    };
    let kc = parse(kubeconfig_with(&token_user()).as_bytes()).unwrap();
    let err = client_err(&kc, Some("ctx-a"), &bad, &Policy::default()).await;
    assert!(err.to_string().contains("user_agent"), "{err}");
    assert_no_secret(&err.to_string());
}

#[cfg(unix)]
#[tokio::test]
async fn malformed_plugin_token_is_an_error_not_a_panic() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad-plugin");
    std::fs::write(
        &script,
        // `\u0001` is not allowed in a header value; a heredoc keeps the shell from touching it
        concat!(
            "#!/bin/sh\ncat <<'EOF'\n",
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"bad\u0001sEcReT"}}"#,
            "\nEOF\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kc = parse(kubeconfig_with(&exec_user(script.to_str().unwrap())).as_bytes()).unwrap();
    let err = client_err(&kc, None, &ClientOptions::default(), &Policy::trusted()).await;
    assert!(matches!(err, Error::Client { .. }), "{err:?}");
    assert_no_secret(&err.to_string());

    // a plugin that fails: its output is not echoed
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho {TOKEN}\necho {TOKEN} >&2\nexit 3\n"),
    )
    .unwrap();
    let err = client_err(&kc, None, &ClientOptions::default(), &Policy::trusted()).await;
    let msg = err.to_string();
    assert!(msg.contains("bad-plugin") && msg.contains('3'), "{msg}");
    assert_no_secret(&msg);
    assert_no_secret(&format!("{err:?}"));
}

#[tokio::test]
async fn client_builds_without_connecting() {
    let kc = parse(kubeconfig_with(&token_user()).as_bytes()).unwrap();
    let opts = ClientOptions {
        impersonate: Some("someone".into()),
        ..ClientOptions::default()
    };
    let client = client_for_context(&kc, Some("ctx-a"), &opts, &Policy::default())
        .await
        .unwrap();
    assert_eq!(client.default_namespace(), "team-a");
}

#[tokio::test]
async fn file_references_are_refused_when_denied() {
    let user = "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token";
    let kc = parse(kubeconfig_with(user).as_bytes()).unwrap();
    let err = check_file_references(&kc, None).unwrap_err();
    assert!(
        matches!(&err, Error::FileReferenceNotAllowed { context, field } if context == "ctx-b" && field == "tokenFile"),
        "{err:?}"
    );
    assert!(!err.to_string().contains("/var/run"), "{err}");
    // the other context only has inline credentials
    check_file_references(&kc, Some("ctx-a")).unwrap();

    // The default policy refuses it, whatever client options are set: options only tune.
    let tuned = ClientOptions {
        read_timeout: Some(std::time::Duration::from_secs(5)),
        user_agent: Some("tuned/1.0".into()),
        ..ClientOptions::default()
    };
    let err = client_err(&kc, None, &tuned, &Policy::default()).await;
    assert!(
        matches!(err, Error::FileReferenceNotAllowed { .. }),
        "{err:?}"
    );
    client_for_context(&kc, Some("ctx-a"), &tuned, &Policy::default())
        .await
        .unwrap();
    // only the policy allows it
    let allowed = Policy::default().allow_file_references(true);
    check_policy(&kc, None, &allowed).unwrap();

    for (yaml, field) in [
        (
            "    client-certificate: cert.pem\n    client-key-data: eA==",
            "client-certificate",
        ),
        ("    client-key: key.pem", "client-key"),
    ] {
        let kc = parse(kubeconfig_with(yaml).as_bytes()).unwrap();
        let err = check_file_references(&kc, None).unwrap_err();
        assert!(
            matches!(&err, Error::FileReferenceNotAllowed { field: f, .. } if f == field),
            "{err:?}"
        );
    }
    let kc = parse(
        b"clusters: [{name: c, cluster: {server: \"https://x\", certificate-authority: /etc/ca.pem}}]\ncontexts: [{name: x, context: {cluster: c}}]",
    )
    .unwrap();
    let err = check_file_references(&kc, Some("x")).unwrap_err();
    assert!(
        matches!(&err, Error::FileReferenceNotAllowed { field, .. } if field == "certificate-authority"),
        "{err:?}"
    );
    // allowed by default
    check_file_references(
        &parse(kubeconfig_with(&token_user()).as_bytes()).unwrap(),
        None,
    )
    .unwrap();
}
