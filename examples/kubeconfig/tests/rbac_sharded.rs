//! The shipped sharding component (`deploy/components/sharding`, in
//! `deploy/examples/sharded`) on a real kube-apiserver with RBAC authorization
//! (`MCR_ENVTEST=real`, run by `cargo xtask e2e`; skipped on the emulator, which does not
//! authorize). The loop is `example_support::rbac::prove`, over the verbs of the component's
//! Role `mcr-sharding` (the provider's and the members' roles are proven by `tests/rbac.rs`).
//!
//! Two replicas of the example controller, `a` and `b`, run with `--shard-group` and tokens of
//! `mcr-system/mcr-controller`. The scenario (each step needs something the one before did
//! not):
//! 1. `a` alone: a ConfigMap in member `a` made before the start is stamped (the peer Leases
//!    listed, this replica's Lease read and created);
//! 2. `a`'s Lease is renewed (update);
//! 3. `b` starts: `a` sees it through its watch and claims the two of them (its Lease's claim
//!    names `b`);
//! 4. `a` stops cleanly: its Lease is deleted.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, ensure};
use example_support::rbac::{self, Controller, Outcome, kubeconfig_secret, labelled, stamped};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use mcr_envtest::TestCluster;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_example-kubeconfig");
const NAMESPACE: &str = "mcr-system";
/// The Role proven here.
const ROLE: &str = "mcr-sharding";
const HOST: usize = 0;
const MEMBER: usize = 1;

/// Polls `check` every 200 ms until it holds (`true`) or `deadline` passes (`false`).
async fn within(deadline: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct World {
    host: TestCluster,
    member: TestCluster,
    docs: [Vec<Value>; 2],
    host_kubeconfig: PathBuf,
    member_a: String,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Result<World> {
        let host = TestCluster::start("host").await?;
        let member = TestCluster::start("member").await?;
        let dir = tempfile::tempdir()?;
        let deploy = rbac::deploy_dir();
        let (host_dir, member_dir) = (deploy.join("examples/sharded"), deploy.join("member"));
        rbac::apply_kustomization(&host, &host_dir, dir.path()).await?;
        rbac::apply_kustomization(&member, &member_dir, dir.path()).await?;
        let host_token = rbac::token(&host.client(), NAMESPACE, "mcr-controller").await?;
        let host_kubeconfig = dir.path().join("host-controller.kubeconfig");
        std::fs::write(&host_kubeconfig, rbac::kubeconfig_as(&host, &host_token)?)?;
        let token_a = rbac::token(&member.client(), NAMESPACE, "mcr-member").await?;
        let member_a = rbac::kubeconfig_as(&member, &token_a)?;
        Ok(World {
            docs: [
                rbac::render(&host_dir).await?,
                rbac::render(&member_dir).await?,
            ],
            host,
            member,
            host_kubeconfig,
            member_a,
            dir,
        })
    }

    async fn grant(&self, removed: Option<&rbac::Grant>) -> Result<()> {
        rbac::apply_roles(&self.host.client(), &self.docs[HOST], HOST, removed).await?;
        rbac::apply_roles(&self.member.client(), &self.docs[MEMBER], MEMBER, None).await?;
        Ok(())
    }

    /// Replica `a`'s log (the one the proof reads for refusals: every step involves `a`).
    fn log(&self, run: usize) -> PathBuf {
        self.dir.path().join(format!("replica-a-{run}.log"))
    }

    fn replica(&self, run: usize, group: &str, id: &str) -> Result<Controller> {
        let kc = self.host_kubeconfig.display().to_string();
        let log = match id {
            "a" => self.log(run),
            _ => self.dir.path().join(format!("replica-{id}-{run}.log")),
        };
        Controller::start(
            BIN,
            &[
                "--kubeconfig",
                &kc,
                "--namespace",
                NAMESPACE,
                "--shard-group",
                group,
                "--shard-identity",
                id,
                "--lease-duration-seconds",
                "3",
            ],
            &log,
        )
    }

    async fn scenario(&self, run: usize, deadline: Duration) -> Result<Outcome> {
        let secrets: Api<Secret> = Api::namespaced(self.host.client(), NAMESPACE);
        let leases: Api<Lease> = Api::namespaced(self.host.client(), NAMESPACE);
        let in_a: Api<ConfigMap> = Api::namespaced(self.member.client(), "default");
        let a = format!("a-{run}");
        let cm = format!("cm-{run}");
        let group = format!("shard-rbac-{run}");
        let (lease_a, lease_b) = (format!("{group}-a"), format!("{group}-b"));
        let pp = PostParams::default();
        secrets
            .create(&pp, &kubeconfig_secret(&a, &self.member_a))
            .await?;
        in_a.create(&pp, &labelled(&cm)).await?;
        let replica_a = self.replica(run, &group, "a")?;
        let mut replica_b = None;
        let renew_time = async |name: &str| {
            leases
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec?.renew_time)
                .map(|t| t.0)
        };
        let failed = async {
            if !stamped(&in_a, &cm, &a, deadline).await {
                return Ok::<_, anyhow::Error>(Some(1));
            }
            let first = renew_time(&lease_a).await;
            if !within(deadline, async || renew_time(&lease_a).await > first).await {
                return Ok(Some(2));
            }
            replica_b = Some(self.replica(run, &group, "b")?);
            let claims_b = async || rbac::lease_claims(&leases, &lease_a, "b").await;
            if !within(deadline, claims_b).await {
                return Ok(Some(3));
            }
            Ok(None)
        }
        .await?;
        // Step 4: a clean stop deletes the Lease.
        let mut log = replica_a.terminate(deadline).await?;
        let failed = match failed {
            Some(step) => Some(step),
            None => {
                let gone = async || matches!(leases.get_opt(&lease_a).await, Ok(None));
                (!within(deadline, gone).await).then_some(4)
            }
        };
        if let Some(b) = replica_b {
            log.push_str(&b.stop().await.unwrap_or_else(|e| e.to_string()));
        }
        let _ = secrets.delete(&a, &DeleteParams::default()).await;
        for name in [&lease_a, &lease_b] {
            let _ = leases.delete(name, &DeleteParams::default()).await;
        }
        Ok(Outcome { failed, log })
    }
}

#[tokio::test]
async fn shipped_sharding_role_is_enough_and_every_verb_is_needed() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let world = World::start().await?;
    let all: Vec<rbac::Grant> = rbac::grants(&world.docs[HOST], HOST)?
        .into_iter()
        .filter(|g| g.name == ROLE)
        .collect();
    let report = rbac::prove(
        &all,
        async |removed| world.grant(removed).await,
        async |run, deadline| world.scenario(run, deadline).await,
        |run| world.log(run),
    )
    .await?;
    // Leases get, list, watch, create, update, delete.
    ensure!(report.len() == 6, "{report:#?}");
    Ok(())
}
