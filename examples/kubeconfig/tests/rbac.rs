//! The shipped `deploy/` manifests on a real kube-apiserver with RBAC authorization
//! (`MCR_ENVTEST=real`, run by `cargo xtask e2e`; on the emulator, which does not authorize,
//! the tests print that they are skipped). The loop is `example_support::rbac::prove`.
//!
//! - [`shipped_roles_are_enough_and_every_rule_is_needed`]: the host gets
//!   `deploy/examples/kubeconfig` (base + the kubeconfig provider's component) and every
//!   member `deploy/member`, applied with `kubectl apply -k`. The example controller runs with
//!   leader election and ServiceAccount tokens from TokenRequests (`mcr-system/mcr-controller`
//!   on the host, `mcr-system/mcr-member` in the members' kubeconfig Secrets), so it can do
//!   only what those roles allow, and must complete its scenario. Then, for every verb of
//!   every rule of those roles, the same scenario runs with just that verb removed: the API
//!   server must refuse the controller that verb (seen in its log) and the scenario must not
//!   complete.
//! - [`every_base_passes_server_side_dry_run`]: `kubectl apply --dry-run=server -k` of every
//!   overlay under `deploy/examples` and of `deploy/member`.
//!
//! The Helm chart (`charts/mcr-controller`, with the `helm` that `cargo xtask assets` builds):
//!
//! - [`the_chart_grants_what_the_kustomize_overlays_grant`]: for each provider's values file
//!   (and sharding), the Roles and ClusterRoles `helm template` renders grant the same rules
//!   to the same ServiceAccount as the overlay under `deploy/examples` (the file provider's:
//!   `deploy/base` alone), names aside. So the proof above covers the chart's rules, and the
//!   two cannot drift apart.
//! - [`the_chart_lints_and_every_values_file_passes_server_side_dry_run`]: `helm lint
//!   --strict` and `helm template` of every `ci/*-values.yaml`, then `kubectl apply
//!   --dry-run=server` of the result (stand-in CRDs for ServiceMonitor, Certificate, Issuer).
//! - [`the_example_runs_in_the_mode_the_chart_s_environment_says`]: the example binary,
//!   started with the arguments and environment the chart renders, takes the Lease they name
//!   (leader election, then sharding): the chart passes no flag of ours.
//! - [`the_installed_chart_s_service_account_runs_the_scenario`]: `helm install` on the host,
//!   then the scenario below with a token of the ServiceAccount the chart installed (the
//!   controller runs on the test machine: there is no kubelet), refused nothing.
//!
//! The scenario (each step needs something the one before did not):
//! 1. member `a` (a Secret made before the controller starts) has a labelled ConfigMap made
//!    before the controller starts: stamped through the Lease (get, create, update), a list of
//!    Secrets, a list of ConfigMaps and a patch;
//! 2. a second ConfigMap made in `a` after that stamp: stamped only through a ConfigMap watch;
//! 3. member `b` (the host itself, as a member) joins by a Secret made after that: engaged only
//!    through a Secret watch, its ConfigMap stamped.
//!
//! With `MCR_E2E_IMAGE` naming the example's image (`cargo xtask e2e` sets it when `cargo xtask
//! image` has built it), the controller runs in that container as the shipped Deployment runs
//! it: `--in-cluster`, the `mcr-controller` token, the host's CA and the namespace mounted at
//! `/var/run/secrets/kubernetes.io/serviceaccount`, UID 65532, read-only root, no capability
//! (`--network host` reaches the API servers on 127.0.0.1). Without it, the binary runs as a
//! process with a kubeconfig of that token.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use example_support::helm;
use example_support::rbac::{
    self, Controller, Outcome, PodIdentity, kubeconfig_secret, labelled, stamped,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use mcr_envtest::TestCluster;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_example-kubeconfig");
const NAMESPACE: &str = "mcr-system";
/// The rendered sets of roles: the host's overlay, and the members'.
const HOST: usize = 0;
const MEMBER: usize = 1;

/// The clusters and credentials every run shares.
struct World {
    host: TestCluster,
    member: TestCluster,
    docs: [Vec<Value>; 2],
    /// The controller's host kubeconfig (ServiceAccount token), on disk.
    host_kubeconfig: PathBuf,
    /// The image to run the controller from, and the same token as a Pod gets it.
    container: Option<(String, PodIdentity)>,
    /// Member kubeconfigs (ServiceAccount tokens) for the Secrets: `a` (member), `b` (host).
    member_a: String,
    member_b: String,
    dir: tempfile::TempDir,
}

/// How the host gets the controller's objects.
enum Install<'a> {
    /// `kubectl apply -k` of a Kustomize overlay.
    Kustomize(&'a Path),
    /// `helm install` of the chart with a values file (release [`RELEASE`], objects named
    /// `mcr-controller` as in `deploy/`).
    Helm(&'a Path),
}

/// The chart's release in the tests; `--set fullnameOverride=mcr-controller` names the
/// ServiceAccount as `deploy/` does.
const RELEASE: &str = "mcr";

impl World {
    async fn start(install: Install<'_>) -> Result<World> {
        let host = TestCluster::start("host").await?;
        let member = TestCluster::start("member").await?;
        let dir = tempfile::tempdir()?;
        let member_dir = rbac::deploy_dir().join("member");
        let host_docs = match install {
            Install::Kustomize(overlay) => {
                rbac::apply_kustomization(&host, overlay, dir.path()).await?;
                rbac::render(overlay).await?
            }
            Install::Helm(values) => {
                let kc = dir.path().join("host-admin.kubeconfig");
                host.write_kubeconfig(&kc)?;
                let (kc, chart) = (kc.display().to_string(), helm::chart_dir());
                let (chart, values) = (chart.display().to_string(), values.display().to_string());
                let out = helm::helm(
                    dir.path(),
                    &[
                        "install",
                        RELEASE,
                        &chart,
                        "--kubeconfig",
                        &kc,
                        "--namespace",
                        NAMESPACE,
                        "--create-namespace",
                        "-f",
                        &values,
                        "--set",
                        "fullnameOverride=mcr-controller",
                    ],
                )
                .await?;
                ensure!(out.contains("STATUS: deployed"), "helm install: {out}");
                let manifest = helm::helm(
                    dir.path(),
                    &[
                        "get",
                        "manifest",
                        RELEASE,
                        "--kubeconfig",
                        &kc,
                        "-n",
                        NAMESPACE,
                    ],
                )
                .await?;
                helm::parse(&manifest)?
            }
        };
        // The host is member `b` too, so it gets the member's identity and role.
        rbac::apply_kustomization(&host, &member_dir, dir.path()).await?;
        rbac::apply_kustomization(&member, &member_dir, dir.path()).await?;
        let host_token = rbac::token(&host.client(), NAMESPACE, "mcr-controller").await?;
        let host_kubeconfig = dir.path().join("host-controller.kubeconfig");
        std::fs::write(&host_kubeconfig, rbac::kubeconfig_as(&host, &host_token)?)?;
        let container = match rbac::image() {
            Some(image) => {
                let sa = dir.path().join("serviceaccount");
                let identity = PodIdentity::write(&host, &host_token, NAMESPACE, &sa)?;
                eprintln!("the controller runs in the container image {image}");
                Some((image, identity))
            }
            None => None,
        };
        let (member_client, host_client) = (member.client(), host.client());
        let token_a = rbac::token(&member_client, NAMESPACE, "mcr-member").await?;
        let token_b = rbac::token(&host_client, NAMESPACE, "mcr-member").await?;
        let member_a = rbac::kubeconfig_as(&member, &token_a)?;
        let member_b = rbac::kubeconfig_as(&host, &token_b)?;
        Ok(World {
            docs: [host_docs, rbac::render(&member_dir).await?],
            host,
            member,
            host_kubeconfig,
            container,
            member_a,
            member_b,
            dir,
        })
    }

    /// The shipped roles, without `removed`, on the host and the members.
    async fn grant(&self, removed: Option<&rbac::Grant>) -> Result<()> {
        let (host, member) = (self.host.client(), self.member.client());
        rbac::apply_roles(&host, &self.docs[HOST], HOST, removed).await?;
        rbac::apply_roles(&host, &self.docs[MEMBER], MEMBER, removed).await?;
        rbac::apply_roles(&member, &self.docs[MEMBER], MEMBER, removed).await?;
        Ok(())
    }

    fn log(&self, run: usize) -> PathBuf {
        self.dir.path().join(format!("controller-{run}.log"))
    }

    /// Runs the scenario as run `run`, each step bounded by `deadline`.
    async fn scenario(&self, run: usize, deadline: Duration) -> Result<Outcome> {
        let secrets: Api<Secret> = Api::namespaced(self.host.client(), NAMESPACE);
        let in_a: Api<ConfigMap> = Api::namespaced(self.member.client(), "default");
        let in_b: Api<ConfigMap> = Api::namespaced(self.host.client(), "default");
        let (a, b) = (format!("a-{run}"), format!("b-{run}"));
        let cms = [1, 2, 3].map(|i| format!("cm{i}-{run}"));
        let pp = PostParams::default();
        secrets
            .create(&pp, &kubeconfig_secret(&a, &self.member_a))
            .await?;
        in_a.create(&pp, &labelled(&cms[0])).await?;
        let lease = format!("mcr-rbac-{run}");
        let args = [
            "--namespace",
            NAMESPACE,
            "--leader-election-id",
            lease.as_str(),
            "--lease-duration-seconds",
            "3",
        ];
        let controller = match &self.container {
            Some((image, identity)) => {
                let name = format!("mcr-rbac-{}-{run}", std::process::id());
                let args = [&["--in-cluster"][..], &args].concat();
                Controller::start_container(image, &name, identity, &args, &self.log(run))?
            }
            None => {
                let host_kc = self.host_kubeconfig.display().to_string();
                let args = [&["--kubeconfig", host_kc.as_str()][..], &args].concat();
                Controller::start(BIN, &args, &self.log(run))?
            }
        };
        let failed = async {
            if !stamped(&in_a, &cms[0], &a, deadline).await {
                return Ok::<_, anyhow::Error>(Some(1));
            }
            in_a.create(&pp, &labelled(&cms[1])).await?;
            if !stamped(&in_a, &cms[1], &a, deadline).await {
                return Ok(Some(2));
            }
            secrets
                .create(&pp, &kubeconfig_secret(&b, &self.member_b))
                .await?;
            in_b.create(&pp, &labelled(&cms[2])).await?;
            if !stamped(&in_b, &cms[2], &b, deadline).await {
                return Ok(Some(3));
            }
            Ok(None)
        }
        .await?;
        let log = controller.stop().await?;
        for name in [&a, &b] {
            let _ = secrets.delete(name, &DeleteParams::default()).await;
        }
        Ok(Outcome { failed, log })
    }
}

#[tokio::test]
async fn shipped_roles_are_enough_and_every_rule_is_needed() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let overlay = rbac::deploy_dir().join("examples/kubeconfig");
    let world = World::start(Install::Kustomize(&overlay)).await?;
    let mut all = rbac::grants(&world.docs[HOST], HOST)?;
    all.extend(rbac::grants(&world.docs[MEMBER], MEMBER)?);
    let report = rbac::prove(
        &all,
        async |removed| world.grant(removed).await,
        async |run, deadline| world.scenario(run, deadline).await,
        |run| world.log(run),
    )
    .await?;
    // Leases get/create/update, Secrets list/watch, member ConfigMaps list/watch/patch.
    ensure!(report.len() == 8, "{report:#?}");
    Ok(())
}

#[tokio::test]
async fn every_base_passes_server_side_dry_run() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let cluster = TestCluster::start("dry-run").await?;
    let dir = tempfile::tempdir()?;
    let kc = dir.path().join("admin");
    cluster.write_kubeconfig(&kc)?;
    let kc = kc.display().to_string();
    let deploy = rbac::deploy_dir();
    // The namespace must exist for a server-side dry run of what lives in it.
    let ns = deploy.join("base/namespace.yaml").display().to_string();
    rbac::kubectl(&["--kubeconfig", &kc, "apply", "-f", &ns]).await?;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(deploy.join("examples"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    dirs.sort();
    dirs.push(deploy.join("member"));
    ensure!(
        dirs.len() >= 7,
        "expected an overlay per provider, found {dirs:?}"
    );
    for d in &dirs {
        let d = d.display().to_string();
        let out =
            rbac::kubectl(&["--kubeconfig", &kc, "apply", "--dry-run=server", "-k", &d]).await?;
        ensure!(out.contains("(server dry run)"), "{d}: {out}");
        eprintln!(
            "{d}: {} objects accepted (server dry run)",
            out.lines().count()
        );
    }
    Ok(())
}

/// The chart's provider values and the Kustomize overlay whose RBAC they must render.
const CHART_OVERLAYS: &[(&str, &str)] = &[
    ("kubeconfig", "kubeconfig"),
    ("capi", "capi"),
    ("cluster-inventory", "cluster-inventory"),
    ("namespace", "namespace"),
    ("gardener", "gardener"),
    ("sharded", "sharded"),
    // The file provider reads mounted files: nothing on the host beyond the base's Lease
    // rules (the file values' extra rules are left out to compare).
    ("file", "../base"),
];

#[tokio::test]
async fn the_chart_grants_what_the_kustomize_overlays_grant() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let home = tempfile::tempdir()?;
    let chart_ci = helm::chart_dir().join("ci");
    for (values, overlay) in CHART_OVERLAYS {
        let values = chart_ci.join(format!("{values}-values.yaml"));
        // Named as deploy/ names them, so that the bound subjects compare too.
        let chart = helm::template(
            home.path(),
            RELEASE,
            NAMESPACE,
            &values,
            &[
                "--set",
                "fullnameOverride=mcr-controller",
                "--set",
                "extraClusterRules=null",
                "--set",
                "extraNamespaceRules=null",
            ],
        )
        .await?;
        let chart = helm::grants(&helm::parse(&chart)?);
        let overlay = rbac::deploy_dir().join("examples").join(overlay);
        let kustomize = helm::grants(&rbac::render(&overlay).await?);
        ensure!(
            chart == kustomize,
            "{} grants\n  {}\nbut {} grants\n  {}",
            values.display(),
            chart.join("\n  "),
            overlay.display(),
            kustomize.join("\n  ")
        );
        eprintln!("{}: {} roles as in deploy/", values.display(), chart.len());
    }
    Ok(())
}

#[tokio::test]
async fn the_chart_lints_and_every_values_file_passes_server_side_dry_run() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let cluster = TestCluster::start("chart-dry-run").await?;
    let dir = tempfile::tempdir()?;
    let kc = dir.path().join("admin");
    cluster.write_kubeconfig(&kc)?;
    let kc = kc.display().to_string();
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/third-party-crds.yaml");
    let crds = crds.display().to_string();
    rbac::kubectl(&["--kubeconfig", &kc, "apply", "-f", &crds]).await?;
    rbac::kubectl(&["--kubeconfig", &kc, "create", "namespace", NAMESPACE]).await?;
    rbac::kubectl(&[
        "--kubeconfig",
        &kc,
        "wait",
        "--for=condition=Established",
        "crd",
        "--all",
        "--timeout=120s",
    ])
    .await?;
    let chart = helm::chart_dir().display().to_string();
    let files = helm::values_files()?;
    ensure!(
        files.len() >= 8,
        "expected the chart's ci values files, found {files:?}"
    );
    for values in &files {
        let values_arg = values.display().to_string();
        helm::helm(dir.path(), &["lint", "--strict", &chart, "-f", &values_arg]).await?;
        let manifests = helm::template(dir.path(), RELEASE, NAMESPACE, values, &[]).await?;
        let file = dir.path().join("manifests.yaml");
        std::fs::write(&file, &manifests)?;
        let file = file.display().to_string();
        let out = rbac::kubectl(&[
            "--kubeconfig",
            &kc,
            "apply",
            "--dry-run=server",
            "-f",
            &file,
        ])
        .await?;
        let objects = helm::parse(&manifests)?.len();
        ensure!(
            out.lines()
                .filter(|l| l.contains("(server dry run)"))
                .count()
                == objects,
            "{}: {objects} objects rendered, but the server dry run said:\n{out}",
            values.display()
        );
        eprintln!(
            "{}: lint clean, {objects} objects accepted (server dry run)",
            values.display()
        );
    }
    Ok(())
}

#[tokio::test]
async fn the_installed_chart_s_service_account_runs_the_scenario() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let values = helm::chart_dir().join("ci/kubeconfig-values.yaml");
    let world = World::start(Install::Helm(&values)).await?;
    let run = world.scenario(0, rbac::STEP_DEADLINE).await?;
    ensure!(
        run.failed.is_none(),
        "with the installed chart's roles the scenario stopped at step {:?}; log:\n{}",
        run.failed,
        run.log
    );
    ensure!(
        !run.log.contains("forbidden"),
        "with the installed chart's roles the API server refused something; log:\n{}",
        run.log
    );
    Ok(())
}

#[tokio::test]
async fn the_chart_renders_a_webhook_only_where_every_replica_answers_every_review() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let home = tempfile::tempdir()?;
    let defaults = helm::chart_dir().join("values.yaml");
    // The defaults with the webhook on: leader election, two replicas, one Service in front of
    // both. mcr-webhook's `tests/leader.rs` runs that combination: both replicas answer every
    // member's review (the standby engages the members read-only), the leader alone writes.
    let out = helm::template(
        home.path(),
        RELEASE,
        NAMESPACE,
        &defaults,
        &[
            "--set",
            "webhook.enabled=true",
            "--set",
            "image.repository=x",
        ],
    )
    .await?;
    let objects = helm::parse(&out)?;
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .context("no Deployment rendered")?;
    ensure!(deployment["spec"]["replicas"] == 2, "{deployment}");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let env = container_env(container);
    ensure!(
        env.iter().any(|(k, _)| k == "MCR_LEADER_ELECTION_ID"),
        "{env:?}"
    );
    // The webhook's address and certificate directory reach the binary through the
    // environment (DeploymentEnv::webhook), matching the container port and the mount.
    let webhook = mcr_manager::DeploymentEnv::from_vars(|k| {
        env.iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.clone())
    })?
    .webhook
    .context("no webhook in the rendered environment")?;
    ensure!(webhook.address.port() == 9443, "{webhook:?}");
    ensure!(
        container["ports"]
            .as_array()
            .is_some_and(|ports| ports.iter().any(|p| p["containerPort"] == 9443)),
        "{container}"
    );
    ensure!(
        container["volumeMounts"]
            .as_array()
            .is_some_and(|mounts| mounts
                .iter()
                .any(|m| m["mountPath"].as_str().map(std::path::Path::new)
                    == Some(webhook.cert_dir.as_path()))),
        "the certificate directory {:?} is not mounted: {container}",
        webhook.cert_dir
    );
    ensure!(
        objects.iter().any(|o| o["kind"] == "Service"
            && o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-webhook"))),
        "no webhook Service rendered"
    );
    // The memory limit has room for what a flood of the webhook port may add (160 MiB).
    let limit = container["resources"]["limits"]["memory"]
        .as_str()
        .and_then(|m| m.strip_suffix("Ki"))
        .and_then(|m| m.parse::<u64>().ok())
        .context("no memory limit in KiB")?;
    let request = container["resources"]["requests"]["memory"]
        .as_str()
        .and_then(|m| m.strip_suffix("Ki"))
        .and_then(|m| m.parse::<u64>().ok())
        .context("no memory request in KiB")?;
    ensure!(
        limit == 2 * request + 160 * 1024,
        "limit {limit}, request {request}"
    );

    // Sharding with the webhook, not said to be review-only: a replica would fail (503) the
    // reviews of members it does not own, so the chart refuses to render it, saying why.
    let refused = helm::template(
        home.path(),
        RELEASE,
        NAMESPACE,
        &defaults,
        &[
            "--set",
            "webhook.enabled=true",
            "--set",
            "mode=sharding",
            "--set",
            "image.repository=x",
        ],
    )
    .await;
    ensure!(
        refused
            .as_ref()
            .is_err_and(|e| format!("{e:#}").contains("webhook.reviewOnly=true")),
        "{refused:?}"
    );
    // Said review-only, it renders (ci/sharded-webhook-values.yaml).
    let values = helm::chart_dir().join("ci/sharded-webhook-values.yaml");
    helm::template(home.path(), RELEASE, NAMESPACE, &values, &[]).await?;
    Ok(())
}

/// The plain `env` entries of a rendered container (`valueFrom` ones left out).
fn container_env(container: &Value) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_owned(),
                e["value"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// The chart's contract with a controller's binary: the example, started with the arguments
/// and environment the chart renders for it (a kubeconfig instead of `--in-cluster`, as there
/// is no kubelet; `POD_NAME` as the kubelet would set it), leads or shards through Leases named
/// from the release in the release namespace, without any flag of ours.
#[tokio::test]
async fn the_example_runs_in_the_mode_the_chart_s_environment_says() -> Result<()> {
    if !rbac::real_or_skip() {
        return Ok(());
    }
    let host = TestCluster::start("chart-env").await?;
    let dir = tempfile::tempdir()?;
    let kc = dir.path().join("admin");
    host.write_kubeconfig(&kc)?;
    let kc = kc.display().to_string();
    rbac::kubectl(&["--kubeconfig", &kc, "create", "namespace", NAMESPACE]).await?;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(host.client(), NAMESPACE);
    for (values, lease_prefix) in [
        ("kubeconfig", "mcr-mcr-controller"),
        ("sharded", "mcr-mcr-controller-replica-0"),
    ] {
        let values = helm::chart_dir().join(format!("ci/{values}-values.yaml"));
        let objects =
            helm::parse(&helm::template(dir.path(), RELEASE, NAMESPACE, &values, &[]).await?)?;
        let deployment = objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .context("no Deployment rendered")?;
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        ensure!(
            args == ["--in-cluster"],
            "the chart added arguments: {args:?}"
        );
        let mut env = container_env(container);
        ensure!(
            env.iter()
                .any(|(k, v)| k == "MCR_METRICS_BIND_ADDRESS" && v == "0.0.0.0:8080"),
            "{env:?}"
        );
        // A free port on the test machine instead of the Pod's 8080.
        env.retain(|(k, _)| k != "MCR_METRICS_BIND_ADDRESS");
        env.push(("MCR_METRICS_BIND_ADDRESS".into(), "127.0.0.1:0".into()));
        env.push(("POD_NAME".into(), "replica-0".into()));
        let mut example =
            example_support::Running::start_with_env(BIN, &["--kubeconfig", &kc], &env)?;
        example_support::wait_for(
            &format!(
                "a Lease {lease_prefix}* in {NAMESPACE} ({})",
                values.display()
            ),
            || async {
                leases.list(&Default::default()).await.is_ok_and(|l| {
                    l.items.iter().any(|l| {
                        l.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| n.starts_with(lease_prefix))
                    })
                })
            },
        )
        .await?;
        example.assert_running()?;
        drop(example);
        eprintln!("{}: {lease_prefix}* taken", values.display());
    }
    Ok(())
}
