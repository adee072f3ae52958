//! The sync recipe (guide, chapter 12) with Roles only, on real kube-apiservers with RBAC
//! authorization (`MCR_ENVTEST=real`, run by `cargo xtask e2e`; skipped on the emulator, which
//! does not authorize).
//!
//! The host grants the controller `get`, `list`, `watch` on ConfigMaps in the source namespace
//! `team-a` only, and the member `get`, `list`, `watch`, `create`, `patch`, `delete` there only:
//! a Role and a RoleBinding in each cluster, no ClusterRole. Then:
//! 1. `example-sync-local-to-remote --namespace team-a` (namespaced watches, in the host and
//!    the member) copies a labelled source into the member, and the API servers refuse it
//!    nothing;
//! 2. the same program without `--namespace` (cluster-wide watches) is refused the list of
//!    ConfigMaps at the cluster scope (seen in its log) and copies nothing: the Roles alone are
//!    not enough for it, so the first run passed because its watches were namespaced.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, ensure};
use example_support::rbac::{self, Controller, STEP_DEADLINE, refusal_in};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_envtest::TestCluster;

const BIN: &str = env!("CARGO_BIN_EXE_example-sync-local-to-remote");
/// The one namespace both clusters grant the controller.
const TEAM: &str = "team-a";
/// How long the cluster-wide run is watched for a (wrong) result once its list was refused.
/// The namespace-scoped run gets there within a second or two; a result would need a list
/// that succeeds, and the refusal in the log already shows the one it made did not.
const AFTER_REFUSAL: Duration = Duration::from_secs(5);

fn source(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("mcr.example/sync".into(), "true".into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("color".into(), "blue".into())])),
        ..ConfigMap::default()
    }
}

/// Whether the copy of `name` appears in `api` within `deadline`.
async fn copied(api: &Api<ConfigMap>, name: &str, deadline: Duration) -> bool {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Ok(Some(copy)) = api.get_opt(name).await
            && copy
                .data
                .as_ref()
                .and_then(|d| d.get("color"))
                .map(String::as_str)
                == Some("blue")
        {
            return true;
        }
        if tokio::time::Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn roles_in_the_source_namespace_serve_namespaced_watches_and_refuse_cluster_wide_ones()
-> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let host = TestCluster::start("host").await?;
    let member = TestCluster::start("member").await?;
    let dir = tempfile::tempdir()?;
    let read = ["get", "list", "watch"];
    let host_token =
        rbac::grant_in_namespace(&host.client(), TEAM, "mcr-sync", "configmaps", &read).await?;
    let write = ["get", "list", "watch", "create", "patch", "delete"];
    let member_token =
        rbac::grant_in_namespace(&member.client(), TEAM, "mcr-member", "configmaps", &write)
            .await?;
    let host_kubeconfig = dir.path().join("host.kubeconfig");
    std::fs::write(&host_kubeconfig, rbac::kubeconfig_as(&host, &host_token)?)?;
    let members = dir.path().join("members");
    std::fs::create_dir(&members)?;
    std::fs::write(
        members.join("member.kubeconfig"),
        rbac::kubeconfig_as(&member, &member_token)?,
    )?;
    let (host_kc, members) = (
        host_kubeconfig.display().to_string(),
        members.display().to_string(),
    );
    let args = ["--kubeconfig", &host_kc, "--kubeconfig-dir", &members];
    let sources: Api<ConfigMap> = Api::namespaced(host.client(), TEAM);
    let copies: Api<ConfigMap> = Api::namespaced(member.client(), TEAM);
    let pp = PostParams::default();

    // 1. Namespaced: the source is copied, nothing refused.
    sources.create(&pp, &source("first")).await?;
    let log = dir.path().join("namespaced.log");
    let scoped = Controller::start(BIN, &[&args[..], &["--namespace", TEAM]].concat(), &log)?;
    ensure!(
        copied(&copies, "first", STEP_DEADLINE).await,
        "namespaced: the source was not copied; log:\n{}",
        scoped.log()
    );
    let text = scoped.stop().await?;
    ensure!(
        !text.contains("forbidden"),
        "namespaced: the API servers refused something; log:\n{text}"
    );
    eprintln!("namespaced watches: copied, nothing refused");

    // 2. Cluster-wide: refused at the cluster scope, nothing copied.
    sources.create(&pp, &source("second")).await?;
    let log = dir.path().join("cluster-wide.log");
    let wide = Controller::start(BIN, &args, &log)?;
    let Some(line) = refusal_in(&log, "list", "configmaps", STEP_DEADLINE).await else {
        anyhow::bail!(
            "cluster-wide: the API servers never refused the list; log:\n{}",
            wide.log()
        );
    };
    ensure!(
        line.contains("at the cluster scope"),
        "cluster-wide: the refusal is not of the cluster scope: {line}"
    );
    ensure!(
        !copied(&copies, "second", AFTER_REFUSAL).await,
        "cluster-wide: copied although its lists were refused; log:\n{}",
        wide.log()
    );
    wide.stop().await?;
    eprintln!("cluster-wide watches: refused ({line}), nothing copied");
    Ok(())
}
