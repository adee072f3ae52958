//! Property tests of `ClusterName::object_name`: every name a provider may engage a member under
//! gives a valid object name, the same every time, and different names give different ones;
//! and the API server (the emulator's, or kube-apiserver's with `MCR_ENVTEST=real`) accepts it
//! as a Namespace name (a DNS-1123 label) and as a ConfigMap name (a subdomain).

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_core::ClusterName;
use mcr_envtest::TestCluster;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Member names as providers make them, and worse: DNS names, file provider names
/// (`<path>+<context>`), names with upper case, `_`, `#`, `:`, any printable Unicode, names
/// that read like made object names, and long ones.
fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9-]{1,70}",
        "[a-zA-Z0-9._/+#:@-]{1,120}",
        "/[a-z]{1,20}/[a-zA-Z0-9_.-]{1,40}\\.kubeconfig\\+[a-zA-Z0-9_.@-]{1,40}",
        "[a-z0-9-]{0,50}-?[0-9a-f]{12}",
        "\\PC{1,80}",
    ]
}

/// A DNS-1123 label as kube-apiserver checks it (`IsDNS1123Label`), written out from its rule.
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 subdomain as kube-apiserver checks it (`IsDNS1123Subdomain`: at most 253
/// characters, dot-separated parts of the label alphabet; no limit per part).
fn is_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

proptest! {
    #![proptest_config(Config { cases: 2_000, ..Config::default() })]

    #[test]
    fn object_names_are_valid_and_stable(name in names()) {
        let object = ClusterName::new(name.as_str()).object_name().into_owned();
        prop_assert!(is_label(&object), "{name:?} -> {object:?}");
        let again = ClusterName::new(name.as_str()).object_name().into_owned();
        prop_assert_eq!(again, object.clone());
        // The recipe's prefixed form is a subdomain.
        let prefixed = format!("summary-{object}");
        prop_assert!(is_subdomain(&prefixed), "{prefixed:?}");
    }

    #[test]
    fn different_names_give_different_object_names(a in names(), b in names()) {
        prop_assume!(a != b);
        let (a, b) = (ClusterName::new(a.as_str()), ClusterName::new(b.as_str()));
        prop_assert_ne!(a.object_name().into_owned(), b.object_name().into_owned());
    }

    /// The object name of a name, taken as a name, cannot stand for the first one.
    #[test]
    fn a_made_name_taken_as_a_name_gives_another(name in names()) {
        let made = ClusterName::new(name.as_str()).object_name().into_owned();
        prop_assume!(made != name);
        let again = ClusterName::new(made.as_str()).object_name().into_owned();
        prop_assert_ne!(again, made);
    }
}

/// Every object name of 200 generated member names (the same 200 on every run) is accepted
/// by the API server as a Namespace and as a ConfigMap name (server-side dry runs: nothing is
/// stored).
#[test]
fn the_api_server_accepts_every_object_name() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _enter = rt.enter();
    let cluster = rt.block_on(TestCluster::start("names")).unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let config = Config {
        cases: 200,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&names(), |name| {
        let object = ClusterName::new(name.as_str()).object_name().into_owned();
        let meta = || ObjectMeta {
            name: Some(object.clone()),
            ..ObjectMeta::default()
        };
        let ns = Namespace {
            metadata: meta(),
            ..Namespace::default()
        };
        let cm = ConfigMap {
            metadata: meta(),
            ..ConfigMap::default()
        };
        rt.block_on(async {
            namespaces.create(&dry_run, &ns).await.map_err(|err| {
                TestCaseError::fail(format!("{name:?} -> {object:?}: Namespace refused: {err}"))
            })?;
            configmaps.create(&dry_run, &cm).await.map_err(|err| {
                TestCaseError::fail(format!("{name:?} -> {object:?}: ConfigMap refused: {err}"))
            })?;
            Ok(())
        })
    });
    result.unwrap();
}
