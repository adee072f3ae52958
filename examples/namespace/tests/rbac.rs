//! The namespace provider's shipped RBAC component (`deploy/components/rbac-namespace`) on a
//! real kube-apiserver with RBAC authorization (`MCR_ENVTEST=real`, run by `cargo xtask e2e`;
//! skipped on the emulator). The loop is `example_support::rbac::prove`; the Lease role of
//! the base is proven by example-kubeconfig's `tests/rbac.rs` (this example does not elect).
//!
//! The host gets `deploy/examples/namespace` (`kubectl apply -k`); the example runs with a
//! TokenRequest token of `mcr-system/mcr-controller` and must complete the scenario; with any
//! one verb of the component's ClusterRole removed, the API server must refuse it and the
//! scenario must not complete. The scenario (each step needs something the one before did not):
//! 1. namespace `a` with a labelled ConfigMap, both made before the controller starts:
//!    stamped through a list of Namespaces, a list of ConfigMaps and a patch;
//! 2. a second ConfigMap made in `a` after that stamp: stamped only through a ConfigMap watch;
//! 3. namespace `b` made after that, with a ConfigMap: a cluster only through a Namespace watch.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, ensure};
use example_support::rbac::{self, Controller, Outcome, labelled, stamped};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_envtest::TestCluster;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_example-namespace");
/// The component's role; the base's Lease role is not used by this example.
const ROLE: &str = "mcr-namespace-provider";

fn namespace(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

struct World {
    host: TestCluster,
    docs: Vec<Value>,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Result<World> {
        let host = TestCluster::start("host").await?;
        let dir = tempfile::tempdir()?;
        let overlay = rbac::deploy_dir().join("examples/namespace");
        rbac::apply_kustomization(&host, &overlay, dir.path()).await?;
        let token = rbac::token(&host.client(), "mcr-system", "mcr-controller").await?;
        let kubeconfig = dir.path().join("controller.kubeconfig");
        std::fs::write(&kubeconfig, rbac::kubeconfig_as(&host, &token)?)?;
        let docs = rbac::render(&overlay).await?;
        Ok(World {
            host,
            docs,
            kubeconfig,
            dir,
        })
    }

    fn log(&self, run: usize) -> PathBuf {
        self.dir.path().join(format!("controller-{run}.log"))
    }

    async fn scenario(&self, run: usize, deadline: Duration) -> Result<Outcome> {
        let client = self.host.client();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let (a, b) = (format!("a-{run}"), format!("b-{run}"));
        let in_a: Api<ConfigMap> = Api::namespaced(client.clone(), &a);
        let in_b: Api<ConfigMap> = Api::namespaced(client.clone(), &b);
        let pp = PostParams::default();
        namespaces.create(&pp, &namespace(&a)).await?;
        in_a.create(&pp, &labelled("one")).await?;
        let kc = self.kubeconfig.display().to_string();
        let controller = Controller::start(BIN, &["--kubeconfig", &kc], &self.log(run))?;
        let failed = async {
            if !stamped(&in_a, "one", &a, deadline).await {
                return Ok::<_, anyhow::Error>(Some(1));
            }
            in_a.create(&pp, &labelled("two")).await?;
            if !stamped(&in_a, "two", &a, deadline).await {
                return Ok(Some(2));
            }
            namespaces.create(&pp, &namespace(&b)).await?;
            in_b.create(&pp, &labelled("three")).await?;
            if !stamped(&in_b, "three", &b, deadline).await {
                return Ok(Some(3));
            }
            Ok(None)
        }
        .await?;
        // Namespaces stay (no namespace controller deletes them on this control plane); each
        // run uses its own.
        let log = controller.stop().await?;
        Ok(Outcome { failed, log })
    }
}

#[tokio::test]
async fn shipped_namespace_role_is_enough_and_every_rule_is_needed() -> Result<()> {
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
    // Namespaces list/watch, ConfigMaps list/watch/patch.
    ensure!(report.len() == 5, "{report:#?}");
    Ok(())
}
