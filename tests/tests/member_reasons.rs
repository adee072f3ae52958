//! Why a member failed, without reading logs: a member whose API server refuses the
//! controller's list (403 here) is `Failed` in `member_statuses()` at once, with the verb, the
//! resource, the scope and the API server's answer as its reason, not "did not sync within"
//! after the sync timeout (an hour here, so only the refusal can explain the reason within the
//! test's deadline). On the emulator the 403 is injected; on kube-apiserver (`MCR_ENVTEST=real`)
//! it comes from RBAC: the member's credentials have only a Role in `team-a`, and a controller
//! watching `team-a` alone engages it.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::controller::Action;
use mcr_core::{MemberState, members::MemberOptions};
use mcr_envtest::{ErrorRule, Fleet, TestCluster};
use mcr_manager::{Context, Controller, Manager, WatchOptions};
use mcr_provider_file::{FileProvider, Options};
use mcr_test_support::{WAIT, eventually, init_tracing, role_only_kubeconfig};
use tokio_util::sync::CancellationToken;

async fn reconcile(_: Arc<ConfigMap>, _: Context<()>) -> Result<Action, kube::Error> {
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<()>) -> Action {
    Action::await_change()
}

/// A manager over the kubeconfig files of `dir` with one ConfigMap controller, watching
/// `namespace` or every namespace; member syncs may take an hour.
fn manager(host: &TestCluster, dir: &std::path::Path, namespace: Option<&str>) -> Manager {
    let provider = FileProvider::new(Options {
        dirs: vec![dir.to_path_buf()],
        members: MemberOptions {
            sync_timeout: Duration::from_secs(3600),
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_millis(500),
            ..Options::default().members
        },
        ..Options::default()
    });
    let mgr = Manager::builder(host.client())
        .provider(Arc::new(provider))
        .build();
    let opts = match namespace {
        Some(ns) => WatchOptions::new().namespace(ns),
        None => WatchOptions::new(),
    };
    Controller::new(&mgr)
        .for_with::<ConfigMap>(opts)
        .register(reconcile, error_policy, Arc::new(()))
        .unwrap();
    mgr
}

/// The reason of the one member's failure, if it failed.
fn failure(mgr: &Manager) -> Option<String> {
    mgr.member_statuses()
        .into_iter()
        .find_map(|s| match s.state {
            MemberState::Failed { reason, .. } => Some(reason),
            _ => None,
        })
}

#[tokio::test]
async fn a_refused_list_is_the_members_failure_reason_at_once() {
    init_tracing();
    let real = mcr_envtest::backend().is_real();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(1)
        .name_prefix("member")
        .https(true)
        .start()
        .await
        .unwrap();
    let member = &fleet.clusters()[0];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("member.kubeconfig");
    if real {
        let narrow =
            role_only_kubeconfig(member, "team-a", &["configmaps"], &["list", "watch"]).await;
        std::fs::write(&file, narrow).unwrap();
    } else {
        member.write_kubeconfig(&file).unwrap();
        member.inject_error(ErrorRule::new(403).verb("list").resource("configmaps"));
    }

    let mgr = manager(&host, dir.path(), None);
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });
    eventually("the member failed", WAIT, || failure(&mgr).is_some()).await;
    let reason = failure(&mgr).unwrap();
    assert!(
        reason.contains("list configmaps in all namespaces refused: 403 Forbidden"),
        "{reason}"
    );
    assert!(!reason.contains("did not sync"), "{reason}");
    if real {
        assert!(
            reason.contains("cannot list resource \"configmaps\""),
            "the API server's words: {reason}"
        );
    }
    stop.cancel();
    run.await.unwrap().unwrap();

    // What the credentials allow engages the member.
    if !real {
        member.clear_faults();
    }
    let namespace = real.then_some("team-a");
    let mgr = manager(&host, dir.path(), namespace);
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });
    eventually("the member engaged", WAIT, || {
        mgr.engaged_clusters().len() == 1
    })
    .await;
    assert!(failure(&mgr).is_none());
    stop.cancel();
    run.await.unwrap().unwrap();
}
