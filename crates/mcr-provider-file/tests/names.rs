//! Cluster names are `<path><separator><context>`, so two (file, context) pairs can map to one
//! name (`/d/a.kubeconfig` with context `b.kubeconfig+c`, `/d/a.kubeconfig+b.kubeconfig` with
//! context `c`). The pair that sorts first (path, then context) owns the name on every pass and
//! after every restart, whatever was written last; the other is reported as a conflict.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use mcr_core::members::MemberProvider;
use mcr_core::{ClusterName, Engagements};
use mcr_envtest::TestCluster;
use mcr_provider_file::{Error, FileProvider, MemberOptions, Options};
use mcr_test_support::{animal_configmap, init_tracing};
use tokio_util::sync::CancellationToken;

/// `tc`'s kubeconfig with its only context renamed to `context` (and made current).
fn with_context(tc: &TestCluster, context: &str) -> String {
    let mut kc: Kubeconfig = tc.kubeconfig().unwrap();
    kc.contexts[0].name = context.into();
    kc.current_context = Some(context.into());
    serde_json::to_string(&kc).unwrap()
}

async fn marker(registry: &Engagements, name: &str) -> Option<String> {
    let cluster = registry.get(&ClusterName::new(name)).ok()?;
    let cm = Api::<ConfigMap>::namespaced(cluster.client(), "default")
        .get_opt("marker")
        .await
        .ok()??;
    cm.data?.get("animal").cloned()
}

/// A member cluster holding a `marker` ConfigMap that says `animal`.
async fn marked(animal: &str) -> TestCluster {
    let member = TestCluster::start_https(animal).await.unwrap();
    Api::<ConfigMap>::namespaced(member.client(), "default")
        .create(&PostParams::default(), &animal_configmap("marker", animal))
        .await
        .unwrap();
    member
}

fn opts(dir: &Path) -> Options {
    Options {
        dirs: vec![dir.to_path_buf()],
        members: MemberOptions {
            sync_timeout: Duration::from_secs(10),
            ..Options::default().members
        },
        ..Options::default()
    }
}

#[tokio::test]
async fn two_files_mapping_to_one_name_have_one_stable_owner() {
    init_tracing();
    let (one, two) = (marked("one").await, marked("two").await);
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.kubeconfig");
    let second = dir.path().join("a.kubeconfig+b.kubeconfig");
    let name = format!("{}+b.kubeconfig+c", first.display());
    assert_eq!(
        name,
        format!("{}+c", second.display()),
        "the two pairs collide"
    );

    // Written in both orders; each time a fresh provider (a restart) makes one pass.
    for order in [[0, 1], [1, 0]] {
        for i in order {
            match i {
                0 => std::fs::write(&first, with_context(&one, "b.kubeconfig+c")).unwrap(),
                _ => std::fs::write(&second, with_context(&two, "c")).unwrap(),
            }
        }
        let provider = FileProvider::new(opts(dir.path()));
        let registry = provider.members().engagements();
        let token = CancellationToken::new();
        let report = provider.run_once(&token).await;
        assert_eq!(
            report.added,
            [ClusterName::new(name.as_str())],
            "{report:?}"
        );
        assert_eq!(
            marker(&registry, &name).await.as_deref(),
            Some("one"),
            "a.kubeconfig sorts first and owns the name"
        );
        let conflicts: Vec<String> = report
            .failed
            .iter()
            .map(|e| match e {
                Error::NameConflict { .. } => e.to_string(),
                other => panic!("unexpected failure: {other}"),
            })
            .collect();
        assert_eq!(conflicts.len(), 1, "{report:?}");
        for part in [&first.display().to_string(), &second.display().to_string()] {
            assert!(
                conflicts[0].contains(part.as_str()),
                "names both files: {}",
                conflicts[0]
            );
        }
        token.cancel();
        for file in [&first, &second] {
            std::fs::remove_file(file).unwrap();
        }
    }
}

/// A file that cannot be read keeps its last good clusters, the names it owns included: the
/// other pair mapping to such a name does not take it over while the owner's file is broken.
#[tokio::test]
async fn an_unreadable_file_keeps_the_names_it_owns() {
    init_tracing();
    let (one, two) = (marked("one").await, marked("two").await);
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.kubeconfig");
    let second = dir.path().join("a.kubeconfig+b.kubeconfig");
    let name = ClusterName::new(format!("{}+b.kubeconfig+c", first.display()));
    std::fs::write(&first, with_context(&one, "b.kubeconfig+c")).unwrap();
    std::fs::write(&second, with_context(&two, "c")).unwrap();
    let provider = FileProvider::new(opts(dir.path()));
    let registry = provider.members().engagements();
    let token = CancellationToken::new();
    let report = provider.run_once(&token).await;
    assert_eq!(report.added, std::slice::from_ref(&name), "{report:?}");

    // Emptied, as while a tool rewrites it.
    std::fs::write(&first, "").unwrap();
    let report = provider.run_once(&token).await;
    assert_eq!(report.invalid_files.len(), 1, "{report:?}");
    assert!(
        report.replaced.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    assert_eq!(
        marker(&registry, name.as_str()).await.as_deref(),
        Some("one"),
        "a.kubeconfig keeps its cluster"
    );
    assert!(
        matches!(&report.failed[..], [Error::NameConflict { owner_path, .. }] if *owner_path == first),
        "{report:?}"
    );
    token.cancel();
}
