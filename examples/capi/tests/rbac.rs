//! The Cluster API provider's shipped RBAC component (`deploy/components/rbac-capi`) on a real
//! kube-apiserver with RBAC authorization (`MCR_ENVTEST=real`, run by `cargo xtask e2e`;
//! skipped on the emulator). The loop is `example_support::rbac::prove`; the members' role
//! (`deploy/member`) and the base's Lease role are proven by example-kubeconfig's
//! `tests/rbac.rs` (this example does not elect).
//!
//! The management cluster (the host) gets the `Cluster` CRD (admin) and `deploy/examples/capi`
//! (`kubectl apply -k`); the example runs with a TokenRequest token of
//! `mcr-system/mcr-controller`, watching every namespace (the provider's default), and must
//! complete the scenario; with any one verb of the component's ClusterRole removed, the API
//! server must refuse it and the scenario must not complete. The workload clusters' kubeconfig
//! Secrets carry tokens of `mcr-system/mcr-member`. The scenario (each step needs something
//! the one before did not):
//! 1. `Cluster` `a` (ready, workload: the member) and its kubeconfig Secret, made before the
//!    controller starts, with a labelled ConfigMap in the member: stamped through a list of
//!    Clusters and a get of the Secret;
//! 2. `Cluster` `b` (ready, workload: the host itself) made after that, without its Secret:
//!    the provider reports waiting for the Secret (in its log) only through a Cluster watch;
//! 3. `b`'s Secret made after that, with a labelled ConfigMap in the host: engaged only through
//!    the (metadata) Secret watch, so its list and watch.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, ensure};
use example_support::rbac::{self, Controller, Outcome, labelled, stamped};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use mcr_envtest::TestCluster;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_example-capi");
/// The component's role; the base's Lease role is not used by this example.
const ROLE: &str = "mcr-capi-provider";
/// Where the test's `Cluster`s and their Secrets live.
const NAMESPACE: &str = "default";
/// The members' identity (`deploy/member`).
const MEMBER_NS: &str = "mcr-system";

/// The kubeconfig Secret Cluster API writes for Cluster `cluster`.
fn kubeconfig_secret(cluster: &str, kubeconfig: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(format!("{cluster}-kubeconfig")),
            labels: Some(BTreeMap::from([(
                mcr_provider_capi::CLUSTER_NAME_LABEL.into(),
                cluster.into(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            mcr_provider_capi::DEFAULT_SECRET_KEY.into(),
            ByteString(kubeconfig.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

struct World {
    host: TestCluster,
    member: TestCluster,
    docs: Vec<Value>,
    /// The controller's kubeconfig (ServiceAccount token), on disk.
    kubeconfig: PathBuf,
    /// Workload kubeconfigs (ServiceAccount tokens): `a` (the member), `b` (the host).
    workload_a: String,
    workload_b: String,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Result<World> {
        let host = TestCluster::start("mgmt").await?;
        let member = TestCluster::start("member").await?;
        let dir = tempfile::tempdir()?;
        mcr_test_support::install_crd(&host.client(), &mcr_test_support::capi_cluster_crd()).await;
        let deploy = rbac::deploy_dir();
        let (overlay, member_dir) = (deploy.join("examples/capi"), deploy.join("member"));
        rbac::apply_kustomization(&host, &overlay, dir.path()).await?;
        // The host is workload cluster `b` too, so it gets the member's identity and role.
        rbac::apply_kustomization(&host, &member_dir, dir.path()).await?;
        rbac::apply_kustomization(&member, &member_dir, dir.path()).await?;
        let token = rbac::token(&host.client(), "mcr-system", "mcr-controller").await?;
        let kubeconfig = dir.path().join("controller.kubeconfig");
        std::fs::write(&kubeconfig, rbac::kubeconfig_as(&host, &token)?)?;
        let token_a = rbac::token(&member.client(), MEMBER_NS, "mcr-member").await?;
        let token_b = rbac::token(&host.client(), MEMBER_NS, "mcr-member").await?;
        Ok(World {
            docs: rbac::render(&overlay).await?,
            workload_a: rbac::kubeconfig_as(&member, &token_a)?,
            workload_b: rbac::kubeconfig_as(&host, &token_b)?,
            host,
            member,
            kubeconfig,
            dir,
        })
    }

    fn log(&self, run: usize) -> PathBuf {
        self.dir.path().join(format!("controller-{run}.log"))
    }

    async fn scenario(&self, run: usize, deadline: Duration) -> Result<Outcome> {
        let host = self.host.client();
        let clusters = mcr_test_support::capi_clusters(&host, NAMESPACE, "v1beta2");
        let secrets: Api<Secret> = Api::namespaced(host.clone(), NAMESPACE);
        let in_a: Api<ConfigMap> = Api::namespaced(self.member.client(), "default");
        let in_b: Api<ConfigMap> = Api::namespaced(host.clone(), "default");
        let (a, b) = (format!("a-{run}"), format!("b-{run}"));
        let (cm_a, cm_b) = (format!("cm-a-{run}"), format!("cm-b-{run}"));
        let pp = PostParams::default();
        secrets
            .create(&pp, &kubeconfig_secret(&a, &self.workload_a))
            .await?;
        clusters
            .create(&pp, &mcr_test_support::capi_cluster("v1beta2", &a, true))
            .await?;
        in_a.create(&pp, &labelled(&cm_a)).await?;
        let kc = self.kubeconfig.display().to_string();
        let controller = Controller::start(BIN, &["--kubeconfig", &kc], &self.log(run))?;
        let failed = async {
            if !stamped(&in_a, &cm_a, &format!("{NAMESPACE}/{a}"), deadline).await {
                return Ok::<_, anyhow::Error>(Some(1));
            }
            clusters
                .create(&pp, &mcr_test_support::capi_cluster("v1beta2", &b, true))
                .await?;
            // The Secret comes only after the member's fifth failed attempt: its next retry
            // is then 16 s away, past the deadline of a run without a grant, so the Secret
            // watch (not the table's backoff) is what brings the member up at once.
            let missing = format!("{b}-kubeconfig");
            if !waits_for_secret(&controller, &missing, 5, deadline).await {
                return Ok(Some(2));
            }
            secrets
                .create(&pp, &kubeconfig_secret(&b, &self.workload_b))
                .await?;
            in_b.create(&pp, &labelled(&cm_b)).await?;
            if !stamped(&in_b, &cm_b, &format!("{NAMESPACE}/{b}"), deadline).await {
                return Ok(Some(3));
            }
            Ok(None)
        }
        .await?;
        let log = controller.stop().await?;
        // The next run's controller must not find this run's Clusters.
        let dp = DeleteParams::default();
        for name in [&a, &b] {
            let _ = clusters.delete(name, &dp).await;
            let _ = secrets.delete(&format!("{name}-kubeconfig"), &dp).await;
        }
        Ok(Outcome { failed, log })
    }
}

/// Waits (at most `deadline`) until the controller logged `times` times that it did not find
/// Secret `secret`.
async fn waits_for_secret(
    controller: &Controller,
    secret: &str,
    times: usize,
    deadline: Duration,
) -> bool {
    let until = tokio::time::Instant::now() + deadline;
    let line = format!("kubeconfig Secret {NAMESPACE}/{secret} not found");
    while tokio::time::Instant::now() < until {
        if controller
            .log()
            .lines()
            .filter(|l| l.contains(&line))
            .count()
            >= times
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

#[tokio::test]
async fn shipped_capi_role_is_enough_and_every_rule_is_needed() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let world = World::start().await?;
    let all: Vec<rbac::Grant> = rbac::grants(&world.docs, 0)?
        .into_iter()
        .filter(|g| g.name == ROLE)
        .collect();
    let client = world.host.client();
    let report = rbac::prove(
        &all,
        async |removed| rbac::apply_roles(&client, &world.docs, 0, removed).await,
        async |run, deadline| world.scenario(run, deadline).await,
        |run| world.log(run),
    )
    .await?;
    // Clusters list/watch, Secrets get/list/watch.
    ensure!(report.len() == 5, "{report:#?}");
    Ok(())
}
