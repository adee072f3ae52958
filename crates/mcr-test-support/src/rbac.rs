//! Narrow credentials on real control planes: a ServiceAccount allowed only some verbs on some
//! resources of one namespace (a Role), and a kubeconfig that authenticates as it.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;

use crate::create_namespace;

/// A kubeconfig (JSON, which kubeconfig readers take as YAML) for `cluster` that authenticates
/// as the ServiceAccount `namespace/narrow`, whose only grant is a Role in `namespace` allowing
/// `verbs` on `resources` of the core group. Real control planes only (the emulator does not
/// authorize): it panics on the emulator.
///
/// ```no_run
/// # async fn demo(member: mcr_envtest::TestCluster) {
/// let kubeconfig =
///     mcr_test_support::role_only_kubeconfig(&member, "team-a", &["configmaps"], &["list", "watch"]).await;
/// # }
/// ```
pub async fn role_only_kubeconfig(
    cluster: &TestCluster,
    namespace: &str,
    resources: &[&str],
    verbs: &[&str],
) -> String {
    assert!(
        cluster.backend().is_real(),
        "role_only_kubeconfig needs a real control plane (the emulator does not authorize)"
    );
    let admin = cluster.client();
    create_namespace(&admin, namespace, &[]).await;
    let meta = |name: &str| ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        ..ObjectMeta::default()
    };
    let apply = PatchParams::apply("mcr-test-support").force();
    let sa = ServiceAccount {
        metadata: meta("narrow"),
        ..ServiceAccount::default()
    };
    Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .patch("narrow", &apply, &Patch::Apply(&sa))
        .await
        .unwrap();
    let role = Role {
        metadata: meta("narrow"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .patch("narrow", &apply, &Patch::Apply(&role))
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: meta("narrow"),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "narrow".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "narrow".into(),
            namespace: Some(namespace.into()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .patch("narrow", &apply, &Patch::Apply(&binding))
        .await
        .unwrap();
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin, namespace)
        .create_token_request("narrow", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .and_then(|s| s.token)
        .expect("a TokenRequest answers with a token");
    let mut kubeconfig = cluster
        .kubeconfig()
        .expect("a real control plane has a kubeconfig");
    for user in &mut kubeconfig.auth_infos {
        if let Some(auth) = user.auth_info.as_mut() {
            *auth = kube::config::AuthInfo {
                token: Some(token.clone().into()),
                ..kube::config::AuthInfo::default()
            };
        }
    }
    serde_json::to_string(&kubeconfig).unwrap()
}

/// Whether the test runs on real control planes; says the test is skipped otherwise (the
/// emulator does not authorize: RBAC tests need kube-apiserver).
///
/// ```no_run
/// # fn a_test() {
/// if !mcr_test_support::require_real("RBAC needs kube-apiserver") {
///     return;
/// }
/// # }
/// ```
pub fn require_real(why: &str) -> bool {
    if mcr_envtest::backend().is_real() {
        return true;
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed test>");
    // Straight to the stderr handle: libtest captures `eprintln!` of passing tests.
    let line = format!("SKIPPED on the emulator: {test}: {why} (MCR_ENVTEST=real runs it)\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    false
}

/// A client from a kubeconfig's current context (such as [`role_only_kubeconfig`]'s).
///
/// ```no_run
/// # async fn demo(kubeconfig: String) {
/// let client = mcr_test_support::client_of(&kubeconfig).await;
/// # }
/// ```
pub async fn client_of(kubeconfig: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}
