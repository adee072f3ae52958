//! Namespace-scoped watches on a real kube-apiserver with RBAC authorization
//! (`MCR_ENVTEST=real`, run by `cargo xtask e2e`; skipped on the emulator, which does not
//! authorize).
//!
//! The member grants the controller's ServiceAccount only a Role and a RoleBinding in one
//! namespace, `team-a` (`list`, `watch`, `patch` on ConfigMaps), and no ClusterRole. Then:
//! 1. `example-kubeconfig --watch-namespace team-a` (the manager's default namespaces) stamps a
//!    ConfigMap made in `team-a` before it started and one made after (so through its watch),
//!    and the API server refuses it nothing;
//! 2. the same program without `--watch-namespace` (a cluster-wide watch) is refused the list
//!    of ConfigMaps at the cluster scope (seen in its log) and stamps nothing: the Role alone
//!    is not enough for it, so the first run passed because its watches were namespaced.
//!
//! The host runs with the admin kubeconfig: what is proven here is the members' grant.
//!
//! A second test shards the same grant: two replicas (`--shard-group`) with
//! `--watch-namespace team-a` share two members granted only that Role, and every ConfigMap,
//! made before the second replica joined or after, is stamped with nothing refused.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use example_support::rbac::{
    self, Controller, STEP_DEADLINE, kubeconfig_secret, labelled, refusal_in, stamped,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use mcr_envtest::TestCluster;

const BIN: &str = env!("CARGO_BIN_EXE_example-kubeconfig");
/// Where the host keeps the kubeconfig Secrets.
const SECRETS: &str = "mcr-system";
/// The one namespace the member grants the controller.
const TEAM: &str = "team-a";
/// How long the cluster-wide run is watched for a (wrong) result once its list was refused.
/// The namespace-scoped run gets there within a second or two; a result would need a list
/// that succeeds, and the refusal in the log already shows the one it made did not.
const AFTER_REFUSAL: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_role_in_one_namespace_serves_a_namespaced_watch_and_refuses_a_cluster_wide_one()
-> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let host = TestCluster::start("host").await?;
    let member = TestCluster::start("member").await?;
    let dir = tempfile::tempdir()?;
    let secrets = secrets_namespace(&host).await?;
    let verbs = ["list", "watch", "patch"];
    let token =
        rbac::grant_in_namespace(&member.client(), TEAM, "mcr-member", "configmaps", &verbs)
            .await?;
    let member_kubeconfig = rbac::kubeconfig_as(&member, &token)?;
    // The identity is refused ConfigMaps at the cluster scope.
    let path = dir.path().join("member.kubeconfig");
    std::fs::write(&path, &member_kubeconfig)?;
    let as_member = example_support::client(&path).await?;
    let everywhere = Api::<ConfigMap>::all(as_member)
        .list(&Default::default())
        .await;
    ensure!(
        matches!(everywhere, Err(kube::Error::Api(s)) if s.code == 403),
        "a cluster-wide list must be refused to the member's identity"
    );
    let host_kubeconfig = dir.path().join("host.kubeconfig");
    host.write_kubeconfig(&host_kubeconfig)?;
    let host_kc = host_kubeconfig.display().to_string();
    let team: Api<ConfigMap> = Api::namespaced(member.client(), TEAM);
    let pp = PostParams::default();

    // 1. Namespace-scoped: both ConfigMaps stamped, nothing refused.
    team.create(&pp, &labelled("before")).await?;
    secrets
        .create(&pp, &kubeconfig_secret("a", &member_kubeconfig))
        .await?;
    let log = dir.path().join("namespaced.log");
    let args = ["--kubeconfig", &host_kc, "--namespace", SECRETS];
    let scoped = Controller::start(
        BIN,
        &[&args[..], &["--watch-namespace", TEAM]].concat(),
        &log,
    )?;
    ensure!(
        stamped(&team, "before", "a", STEP_DEADLINE).await,
        "namespace-scoped: the ConfigMap made before the start was not stamped; log:\n{}",
        scoped.log()
    );
    team.create(&pp, &labelled("after")).await?;
    ensure!(
        stamped(&team, "after", "a", STEP_DEADLINE).await,
        "namespace-scoped: the ConfigMap made after the start was not stamped; log:\n{}",
        scoped.log()
    );
    let text = scoped.stop().await?;
    ensure!(
        !text.contains("forbidden"),
        "namespace-scoped: the API server refused something; log:\n{text}"
    );
    secrets.delete("a", &DeleteParams::default()).await?;
    eprintln!("namespace-scoped watch: both ConfigMaps stamped, nothing refused");

    // 2. Cluster-wide: refused the list at the cluster scope, nothing stamped.
    team.create(&pp, &labelled("cluster-wide")).await?;
    secrets
        .create(&pp, &kubeconfig_secret("b", &member_kubeconfig))
        .await?;
    let log = dir.path().join("cluster-wide.log");
    let wide = Controller::start(BIN, &args, &log)?;
    let line = refusal_in(&log, "list", "configmaps", STEP_DEADLINE).await;
    let Some(line) = line else {
        anyhow::bail!(
            "cluster-wide: the API server never refused the list; log:\n{}",
            wide.log()
        );
    };
    ensure!(
        line.contains("at the cluster scope"),
        "cluster-wide: the refusal is not of the cluster scope: {line}"
    );
    ensure!(
        !stamped(&team, "cluster-wide", "b", AFTER_REFUSAL).await,
        "cluster-wide: stamped although its list was refused; log:\n{}",
        wide.log()
    );
    wide.stop().await?;
    eprintln!("cluster-wide watch: refused ({line}), nothing stamped");
    Ok(())
}

/// The namespace Secrets live in, on `host`.
async fn secrets_namespace(host: &TestCluster) -> Result<Api<Secret>> {
    let fleet_ns = Namespace {
        metadata: ObjectMeta {
            name: Some(SECRETS.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(host.client())
        .create(&PostParams::default(), &fleet_ns)
        .await?;
    Ok(Api::namespaced(host.client(), SECRETS))
}

#[tokio::test]
async fn sharded_replicas_with_namespaced_watches_need_only_the_role() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    const GROUP: &str = "shard-ns";
    let host = TestCluster::start("host").await?;
    let members = [
        TestCluster::start("member-1").await?,
        TestCluster::start("member-2").await?,
    ];
    let names = ["m1", "m2"];
    let dir = tempfile::tempdir()?;
    let secrets = secrets_namespace(&host).await?;
    let pp = PostParams::default();
    let mut teams = Vec::new();
    for (member, name) in members.iter().zip(names) {
        let token = rbac::grant_in_namespace(
            &member.client(),
            TEAM,
            "mcr-member",
            "configmaps",
            &["list", "watch", "patch"],
        )
        .await?;
        let team: Api<ConfigMap> = Api::namespaced(member.client(), TEAM);
        team.create(&pp, &labelled("before")).await?;
        secrets
            .create(
                &pp,
                &kubeconfig_secret(name, &rbac::kubeconfig_as(member, &token)?),
            )
            .await?;
        teams.push(team);
    }
    let host_kubeconfig = dir.path().join("host.kubeconfig");
    host.write_kubeconfig(&host_kubeconfig)?;
    let host_kc = host_kubeconfig.display().to_string();
    let replica = |id: &str| {
        Controller::start(
            BIN,
            &[
                "--kubeconfig",
                &host_kc,
                "--namespace",
                SECRETS,
                "--watch-namespace",
                TEAM,
                "--shard-group",
                GROUP,
                "--shard-identity",
                id,
                "--lease-duration-seconds",
                "3",
            ],
            &dir.path().join(format!("replica-{id}.log")),
        )
    };

    // Replica a alone owns both members.
    let a = replica("a")?;
    for (team, name) in teams.iter().zip(names) {
        ensure!(
            stamped(team, "before", name, STEP_DEADLINE).await,
            "{name}: the ConfigMap made before the start was not stamped; log of a:\n{}",
            a.log()
        );
    }
    // Replica b joins: a's Lease claims the two of them.
    let b = replica("b")?;
    let leases: Api<Lease> = Api::namespaced(host.client(), SECRETS);
    let lease_a = format!("{GROUP}-a");
    example_support::wait_for("a's Lease to claim b as a peer", || {
        rbac::lease_claims(&leases, &lease_a, "b")
    })
    .await
    .with_context(|| format!("log of b:\n{}", b.log()))?;
    // Made after b joined: stamped by whichever replica owns the member now.
    for (team, name) in teams.iter().zip(names) {
        team.create(&pp, &labelled("after")).await?;
        ensure!(
            stamped(team, "after", name, STEP_DEADLINE).await,
            "{name}: the ConfigMap made after b joined was not stamped; logs:\n{}\n{}",
            a.log(),
            b.log()
        );
    }
    let logs = [a.stop().await?, b.stop().await?];
    for (id, text) in ["a", "b"].iter().zip(&logs) {
        ensure!(
            !text.contains("forbidden"),
            "replica {id}: the API server refused something; log:\n{text}"
        );
    }
    let engaged = |text: &str| text.contains("cluster engaged");
    eprintln!(
        "sharded and namespace-scoped: 4 ConfigMaps stamped, nothing refused; engaged by a: {}, by b: {}",
        engaged(&logs[0]),
        engaged(&logs[1])
    );
    for name in names {
        secrets.delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}
