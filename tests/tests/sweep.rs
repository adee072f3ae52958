//! `Builder::sweep`: the cleanup of what members that left while no replica ran left behind.
//! A host summary holds an entry for a member that is no longer in the fleet; the first sweep,
//! run once the provider (files) has reported its members, removes it and keeps those of the
//! members wanted, including one another replica owns (sharded: it merely moved).

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
    runtime::controller::Action,
};
use mcr_core::{ClusterName, MemberState};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::{Context, Controller, Manager, Members};
use mcr_provider_file::{FileProvider, Options};
use mcr_test_support::{Owned, WAIT, eventually_async, init_tracing};
use tokio_util::sync::CancellationToken;

async fn reconcile(_: Arc<ConfigMap>, _: Context<()>) -> Result<Action, kube::Error> {
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<()>) -> Action {
    Action::await_change()
}

/// Removes the entries of members the fleet does not want.
async fn sweep(summary: Api<ConfigMap>, members: Members) -> Result<(), kube::Error> {
    let cm = summary.get("summary").await?;
    let gone: serde_json::Map<String, serde_json::Value> = (cm.data.unwrap_or_default())
        .into_keys()
        .filter(|key| !members.wants_key(key))
        .map(|key| (key, serde_json::Value::Null))
        .collect();
    if !gone.is_empty() {
        let patch = serde_json::json!({"data": gone});
        summary
            .patch("summary", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

async fn keys(summary: &Api<ConfigMap>) -> Vec<String> {
    let cm = summary.get("summary").await.unwrap();
    cm.data.unwrap_or_default().into_keys().collect()
}

#[tokio::test]
async fn the_first_sweep_removes_what_members_that_left_while_down_left_behind() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(2)
        .name_prefix("member")
        .https(true)
        .kubeconfig_dir(dir.path())
        .start()
        .await
        .unwrap();
    let provider = Arc::new(FileProvider::new(Options {
        dirs: vec![dir.path().to_path_buf()],
        ..Options::default()
    }));
    // The members' names as the file provider makes them, from the report of a first pass.
    let mgr = Manager::builder(host.client())
        .provider(provider.clone())
        .build();
    let names: Vec<ClusterName> = fleet
        .names()
        .iter()
        .map(|n| {
            let file = dir.path().join(format!("{n}.kubeconfig"));
            ClusterName::new(format!("{}+{n}", file.display()))
        })
        .collect();
    // Sharded: this replica owns the first member; another replica the second.
    let owned = Owned::new(&[names[0].as_str()]);
    assert!(mgr.engagements().coordinate(owned).is_ok());

    // A summary written by an earlier run: both members, and one that left meanwhile.
    let summary: Api<ConfigMap> = Api::namespaced(host.client(), "default");
    let ghost = ClusterName::new("/etc/fleet/gone.kubeconfig+gone");
    let data = names
        .iter()
        .chain([&ghost])
        .map(|n| (n.key().into_owned(), "1.30".to_owned()))
        .collect();
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("summary".into()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    summary.create(&PostParams::default(), &cm).await.unwrap();

    let swept = summary.clone();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .sweep(Duration::from_secs(3600), move |members| {
            sweep(swept.clone(), members)
        })
        .register(reconcile, error_policy, Arc::new(()))
        .unwrap();
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });
    let mut wanted: Vec<String> = names.iter().map(|n| n.key().into_owned()).collect();
    wanted.sort();
    eventually_async("the ghost swept", WAIT, || async {
        let mut now = keys(&summary).await;
        now.sort();
        now == wanted
    })
    .await;
    // One member engaged here, the other owned elsewhere: both wanted, both kept.
    let states: Vec<MemberState> = mgr.member_statuses().into_iter().map(|s| s.state).collect();
    assert!(states.contains(&MemberState::Engaged), "{states:?}");
    assert!(
        states
            .iter()
            .any(|s| matches!(s, MemberState::Elsewhere { .. })),
        "{states:?}"
    );
    stop.cancel();
    run.await.unwrap().unwrap();
}
