//! The cluster-inventory provider's shipped RBAC component
//! (`deploy/components/rbac-cluster-inventory`) on a real kube-apiserver with RBAC
//! authorization (`MCR_ENVTEST=real`, run by `cargo xtask e2e`; skipped on the emulator). The
//! loop is `example_support::rbac::prove`; the members' role (`deploy/member`) and the base's
//! Lease role are proven by example-kubeconfig's `tests/rbac.rs` (this example does not elect).
//!
//! The hub (the host) gets the `ClusterProfile` CRD (admin) and
//! `deploy/examples/cluster-inventory` (`kubectl apply -k`); the example runs with the
//! access-provider strategy (a provider file naming the test credential plugin, which hands
//! out TokenRequest tokens of `mcr-system/mcr-member`) and a TokenRequest token of
//! `mcr-system/mcr-controller` on the hub, watching every namespace, and must complete the
//! scenario; with any one verb of the component's ClusterRole removed, the API server must
//! refuse it and the scenario must not complete. The scenario:
//! 1. profile `a` (healthy, reached through the plugin: the member) made before the controller
//!    starts, with a labelled ConfigMap in the member: stamped through a list of profiles;
//! 2. profile `b` (the hub itself as a member) made after that: its ConfigMap stamped only
//!    through a profile watch.
//!
//! The deprecated Secret strategy also needs Secrets list and watch (the component says how to
//! add them); it is not what the component ships, so not proven here.

#[path = "../../../crates/mcr-provider-cluster-inventory/tests/common/mod.rs"]
mod common;
mod plugin_common;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, ensure};
use example_support::rbac::{self, Controller, Outcome, labelled, stamped};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use mcr_envtest::TestCluster;
use serde_json::{Value, json};

use plugin_common::{Plugin, access};

const BIN: &str = env!("CARGO_BIN_EXE_example-cluster-inventory");
/// The component's role; the base's Lease role is not used by this example.
const ROLE: &str = "mcr-cluster-inventory-provider";
/// Where the test's profiles live.
const NAMESPACE: &str = "default";
/// The members' identity (`deploy/member`).
const MEMBER_NS: &str = "mcr-system";

struct World {
    hub: TestCluster,
    member: TestCluster,
    docs: Vec<Value>,
    /// The controller's kubeconfig (ServiceAccount token), on disk.
    kubeconfig: PathBuf,
    /// The provider file, whose plugin reads `a`'s and `b`'s member tokens from its directory.
    plugin: Plugin,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Result<World> {
        let hub = common::hub().await;
        let member = TestCluster::start("member").await?;
        let dir = tempfile::tempdir()?;
        let deploy = rbac::deploy_dir();
        let (overlay, member_dir) = (
            deploy.join("examples/cluster-inventory"),
            deploy.join("member"),
        );
        rbac::apply_kustomization(&hub, &overlay, dir.path()).await?;
        // The hub is member `b` too, so it gets the member's identity and role.
        rbac::apply_kustomization(&hub, &member_dir, dir.path()).await?;
        rbac::apply_kustomization(&member, &member_dir, dir.path()).await?;
        let token = rbac::token(&hub.client(), "mcr-system", "mcr-controller").await?;
        let kubeconfig = dir.path().join("controller.kubeconfig");
        std::fs::write(&kubeconfig, rbac::kubeconfig_as(&hub, &token)?)?;
        let plugin = Plugin::new(&[]);
        for (name, cluster) in [("a", &member), ("b", &hub)] {
            let token = rbac::token(&cluster.client(), MEMBER_NS, "mcr-member").await?;
            std::fs::write(PathBuf::from(plugin.tokens()).join(name), token)?;
        }
        // Written next to the tokens as provider-file.json.
        plugin.file("Append", "Replace");
        Ok(World {
            docs: rbac::render(&overlay).await?,
            hub,
            member,
            kubeconfig,
            plugin,
            dir,
        })
    }

    fn log(&self, run: usize) -> PathBuf {
        self.dir.path().join(format!("controller-{run}.log"))
    }

    async fn scenario(&self, run: usize, deadline: Duration) -> Result<Outcome> {
        let in_a: Api<ConfigMap> = Api::namespaced(self.member.client(), "default");
        let in_b: Api<ConfigMap> = Api::namespaced(self.hub.client(), "default");
        let (a, b) = (format!("a-{run}"), format!("b-{run}"));
        let (cm_a, cm_b) = (format!("cm-a-{run}"), format!("cm-b-{run}"));
        let pp = PostParams::default();
        let profile = |member: &TestCluster, token: &str| {
            common::status(
                true,
                access(member, json!({"clusterName": token}), None, None),
            )
        };
        common::put_profile(&self.hub, NAMESPACE, &a, profile(&self.member, "a")).await;
        in_a.create(&pp, &labelled(&cm_a)).await?;
        let kc = self.kubeconfig.display().to_string();
        let file = self.plugin.dir.path().join("provider-file.json");
        let file = file.display().to_string();
        let args = [
            "--kubeconfig",
            &kc,
            "--provider-file",
            &file,
            "--allowed-server",
            "127.0.0.1",
        ];
        let controller = Controller::start(BIN, &args, &self.log(run))?;
        let failed = async {
            if !stamped(&in_a, &cm_a, &format!("{NAMESPACE}/{a}"), deadline).await {
                return Ok::<_, anyhow::Error>(Some(1));
            }
            common::put_profile(&self.hub, NAMESPACE, &b, profile(&self.hub, "b")).await;
            in_b.create(&pp, &labelled(&cm_b)).await?;
            if !stamped(&in_b, &cm_b, &format!("{NAMESPACE}/{b}"), deadline).await {
                return Ok(Some(2));
            }
            Ok(None)
        }
        .await?;
        let log = controller.stop().await?;
        // The next run's controller must not find this run's profiles.
        let profiles = common::profiles(&self.hub, NAMESPACE);
        for name in [&a, &b] {
            let _ = profiles.delete(name, &DeleteParams::default()).await;
        }
        Ok(Outcome { failed, log })
    }
}

#[tokio::test]
async fn shipped_cluster_inventory_role_is_enough_and_every_rule_is_needed() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let world = World::start().await?;
    let all: Vec<rbac::Grant> = rbac::grants(&world.docs, 0)?
        .into_iter()
        .filter(|g| g.name == ROLE)
        .collect();
    let client = world.hub.client();
    let report = rbac::prove(
        &all,
        async |removed| rbac::apply_roles(&client, &world.docs, 0, removed).await,
        async |run, deadline| world.scenario(run, deadline).await,
        |run| world.log(run),
    )
    .await?;
    // ClusterProfiles list/watch.
    ensure!(report.len() == 2, "{report:#?}");
    Ok(())
}
