//! The shipped `deploy/` manifests on a real kube-apiserver with RBAC authorization
//! (`MCR_ENVTEST=real`, run by `cargo xtask e2e`; on the emulator, which does not authorize,
//! the tests print that they are skipped).
//!
//! - [`shipped_roles_are_enough_and_every_rule_is_needed`]: the host gets
//!   `deploy/examples/kubeconfig` (base + the kubeconfig provider's component) and every
//!   member `deploy/member`, applied with `kubectl apply -k`. The example controller runs with
//!   ServiceAccount tokens from TokenRequests (`mcr-system/mcr-controller` on the host,
//!   `mcr-system/mcr-member` in the members' kubeconfig Secrets), so it can do only what those
//!   roles allow, and must complete its scenario. Then, for every verb of every rule of those
//!   roles, the same scenario runs with just that verb removed: the API server must refuse a
//!   request of the controller for it (a `forbidden` naming the verb and resource in the
//!   controller's log) and the scenario must not complete.
//! - [`every_base_passes_server_side_dry_run`]: `kubectl apply --dry-run=server -k` of every
//!   overlay under `deploy/examples` and of `deploy/member`.
//!
//! The scenario (each step needs something the one before did not):
//! 1. member `a` (a Secret made before the controller starts) has a labelled ConfigMap made
//!    before the controller starts: stamped through the Lease (get, create, update), a list of
//!    Secrets, a list of ConfigMaps and a patch;
//! 2. a second ConfigMap made in `a` after that stamp: stamped only through a ConfigMap watch;
//! 3. member `b` (the host itself, as a member) joins by a Secret made after that: engaged only
//!    through a Secret watch, its ConfigMap stamped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_example-kubeconfig");
const NAMESPACE: &str = "mcr-system";
const CONTROLLER_SA: &str = "mcr-controller";
const MEMBER_SA: &str = "mcr-member";
const PROVIDER_LABEL: &str = "sigs.k8s.io/multicluster-runtime-kubeconfig";
/// A step the controller should complete: generous, the machine may be slow and shared.
const STEP_DEADLINE: Duration = Duration::from_secs(120);
/// With a verb removed: how long each step gets to (wrongly) complete anyway. The steps before
/// the one that needs the verb complete in a few seconds (the full run shows it).
const REMOVED_STEP_DEADLINE: Duration = Duration::from_secs(30);

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Only on real control planes: the emulator does not authorize.
fn real() -> bool {
    if mcr_envtest::backend().is_real() {
        return true;
    }
    eprintln!("skipped: RBAC needs a real kube-apiserver (MCR_ENVTEST=real, cargo xtask e2e)");
    false
}

fn kubectl() -> Result<PathBuf> {
    mcr_envtest::real::Assets::find()?
        .kubectl
        .context("no kubectl among the real assets (cargo xtask assets builds one)")
}

/// Runs kubectl, failing with its output (async: the clusters' proxies run on this runtime).
async fn run_kubectl(args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new(kubectl()?)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .context("running kubectl")?;
    ensure!(
        out.status.success(),
        "kubectl {} failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The objects `kubectl kustomize` renders for `dir`.
async fn render(dir: &Path) -> Result<Vec<Value>> {
    let yaml = run_kubectl(&["kustomize", &dir.display().to_string()]).await?;
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&yaml).context("parsing kustomize output")?;
    Ok(docs)
}

/// One verb of one rule of a shipped role.
#[derive(Clone, Debug)]
struct Grant {
    /// `true`: a role applied in members (`deploy/member`), else on the host.
    member: bool,
    kind: String,
    name: String,
    rule: usize,
    verb: String,
    resource: String,
}

/// Every (role, rule, verb) of the roles among `docs`.
fn grants(docs: &[Value], member: bool) -> Result<Vec<Grant>> {
    let mut out = Vec::new();
    for doc in roles(docs) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let rules: Vec<PolicyRule> = serde_json::from_value(doc["rules"].clone())?;
        for (i, rule) in rules.iter().enumerate() {
            let resources = rule.resources.clone().unwrap_or_default();
            ensure!(
                resources.len() == 1,
                "{kind} {name}: one resource per rule, so that each can be removed alone"
            );
            for verb in &rule.verbs {
                out.push(Grant {
                    member,
                    kind: kind.clone(),
                    name: name.clone(),
                    rule: i,
                    verb: verb.clone(),
                    resource: resources[0].clone(),
                });
            }
        }
    }
    Ok(out)
}

fn roles(docs: &[Value]) -> impl Iterator<Item = &Value> {
    docs.iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("Role" | "ClusterRole")))
}

/// Server-side applies the roles among `docs` to `client`, without `removed` (a verb of one
/// rule; the rule goes when it has no verb left).
async fn apply_roles(client: &kube::Client, docs: &[Value], removed: Option<&Grant>) -> Result<()> {
    let pp = PatchParams::apply("mcr-rbac-test").force();
    for doc in roles(docs) {
        let mut doc = doc.clone();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        if let Some(g) = removed.filter(|g| g.kind == kind && g.name == name) {
            let mut rules: Vec<PolicyRule> = serde_json::from_value(doc["rules"].clone())?;
            rules[g.rule].verbs.retain(|v| *v != g.verb);
            rules.retain(|r| !r.verbs.is_empty());
            doc["rules"] = serde_json::to_value(rules)?;
        }
        if kind == "Role" {
            let role: Role = serde_json::from_value(doc)?;
            let ns = role.namespace().context("a Role without namespace")?;
            Api::<Role>::namespaced(client.clone(), &ns)
                .patch(&name, &pp, &Patch::Apply(&role))
                .await?;
        } else {
            let role: ClusterRole = serde_json::from_value(doc)?;
            Api::<ClusterRole>::all(client.clone())
                .patch(&name, &pp, &Patch::Apply(&role))
                .await?;
        }
    }
    Ok(())
}

/// A token for `ns/sa` from a TokenRequest (what a Pod's projected token is).
async fn token(client: &kube::Client, ns: &str, sa: &str) -> Result<String> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let answer = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .with_context(|| format!("TokenRequest for {ns}/{sa}"))?;
    answer
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .with_context(|| format!("the TokenRequest for {ns}/{sa} returned no token"))
}

/// `cluster`'s kubeconfig with `token` instead of the admin token.
fn kubeconfig_as(cluster: &TestCluster, token: &str) -> Result<String> {
    let admin = cluster
        .kubeconfig_yaml()
        .context("real clusters serve HTTPS")?;
    ensure!(
        admin.contains(cluster.token()),
        "the kubeconfig carries a token"
    );
    Ok(admin.replace(cluster.token(), token))
}

fn kubeconfig_secret(name: &str, kubeconfig: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(PROVIDER_LABEL.into(), "true".into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "kubeconfig".into(),
            ByteString(kubeconfig.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

fn labelled(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("mcr.example/demo".into(), "true".into())])),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Waits (at most `deadline`) until ConfigMap `name` is stamped by `cluster`.
async fn stamped(api: &Api<ConfigMap>, name: &str, cluster: &str, deadline: Duration) -> bool {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Ok(cm) = api.get(name).await
            && cm
                .annotations()
                .get("mcr.example/reconciled-by")
                .map(String::as_str)
                == Some(cluster)
        {
            return true;
        }
        if tokio::time::Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The clusters and credentials every run shares.
struct World {
    host: TestCluster,
    member: TestCluster,
    host_docs: Vec<Value>,
    member_docs: Vec<Value>,
    /// The controller's host kubeconfig (ServiceAccount token), on disk.
    host_kubeconfig: PathBuf,
    /// Member kubeconfigs (ServiceAccount tokens) for the Secrets: `a` (member), `b` (host).
    member_a: String,
    member_b: String,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Result<World> {
        let host = TestCluster::start("host").await?;
        let member = TestCluster::start("member").await?;
        let dir = tempfile::tempdir()?;
        let deploy = deploy_dir();
        let (host_dir, member_dir) = (deploy.join("examples/kubeconfig"), deploy.join("member"));
        for (cluster, file) in [(&host, "host-admin"), (&member, "member-admin")] {
            cluster.write_kubeconfig(&dir.path().join(file))?;
        }
        let admin = |f: &str| dir.path().join(f).display().to_string();
        // The host is member `b` too, so it gets the member's identity and role.
        for (kc, k) in [
            ("host-admin", &host_dir),
            ("host-admin", &member_dir),
            ("member-admin", &member_dir),
        ] {
            run_kubectl(&[
                "--kubeconfig",
                &admin(kc),
                "apply",
                "-k",
                &k.display().to_string(),
            ])
            .await?;
        }
        let host_token = token(&host.client(), NAMESPACE, CONTROLLER_SA).await?;
        let host_kubeconfig = dir.path().join("host-controller");
        std::fs::write(&host_kubeconfig, kubeconfig_as(&host, &host_token)?)?;
        let member_a = kubeconfig_as(
            &member,
            &token(&member.client(), NAMESPACE, MEMBER_SA).await?,
        )?;
        let member_b = kubeconfig_as(&host, &token(&host.client(), NAMESPACE, MEMBER_SA).await?)?;
        Ok(World {
            host_docs: render(&host_dir).await?,
            member_docs: render(&member_dir).await?,
            host,
            member,
            host_kubeconfig,
            member_a,
            member_b,
            dir,
        })
    }

    /// The shipped roles, without `removed`, on the host and the members.
    async fn grant(&self, removed: Option<&Grant>) -> Result<()> {
        let host_removed = removed.filter(|g| !g.member);
        let member_removed = removed.filter(|g| g.member);
        apply_roles(&self.host.client(), &self.host_docs, host_removed).await?;
        apply_roles(&self.host.client(), &self.member_docs, member_removed).await?;
        apply_roles(&self.member.client(), &self.member_docs, member_removed).await?;
        Ok(())
    }

    /// Runs the scenario as run `run`; returns the step that did not complete (within
    /// `deadline`, counted per step), if any, and the controller's log.
    async fn scenario(&self, run: usize, deadline: Option<Duration>) -> Result<Scenario> {
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
        let log = self.dir.path().join(format!("controller-{run}.log"));
        let lease = format!("mcr-rbac-{run}");
        let host_kc = self.host_kubeconfig.display().to_string();
        let mut child = tokio::process::Command::new(BIN)
            .args(["--kubeconfig", &host_kc, "--namespace", NAMESPACE])
            .args([
                "--leader-election-id",
                &lease,
                "--lease-duration-seconds",
                "3",
            ])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting example-kubeconfig")?;
        let wait = deadline.unwrap_or(STEP_DEADLINE);
        let failed = async {
            if !stamped(&in_a, &cms[0], &a, wait).await {
                return Ok::<_, anyhow::Error>(Some(1));
            }
            in_a.create(&pp, &labelled(&cms[1])).await?;
            if !stamped(&in_a, &cms[1], &a, wait).await {
                return Ok(Some(2));
            }
            secrets
                .create(&pp, &kubeconfig_secret(&b, &self.member_b))
                .await?;
            in_b.create(&pp, &labelled(&cms[2])).await?;
            if !stamped(&in_b, &cms[2], &b, wait).await {
                return Ok(Some(3));
            }
            Ok(None)
        }
        .await?;
        if let Some(status) = child.try_wait()? {
            bail!("example-kubeconfig exited ({status}); log:\n{}", read(&log));
        }
        child.kill().await?;
        let dp = DeleteParams::default();
        for name in [&a, &b] {
            let _ = secrets.delete(name, &dp).await;
        }
        Ok(Scenario {
            failed,
            log: read(&log),
        })
    }
}

struct Scenario {
    /// The first step that did not complete.
    failed: Option<u8>,
    log: String,
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Whether the log shows the API server refusing `verb` on `resource`.
fn refused(log: &str, verb: &str, resource: &str) -> bool {
    let needle = format!("cannot {verb} resource \\\"{resource}\\\"");
    let plain = format!("cannot {verb} resource \"{resource}\"");
    log.lines()
        .any(|l| l.contains("forbidden") && (l.contains(&needle) || l.contains(&plain)))
}

/// Waits (bounded) until the controller writing `log` logs the refusal of `g`.
async fn wait_refused(log: &Path, g: &Grant) -> bool {
    let until = tokio::time::Instant::now() + STEP_DEADLINE;
    while tokio::time::Instant::now() < until {
        if refused(&read(log), &g.verb, &g.resource) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

#[tokio::test]
async fn shipped_roles_are_enough_and_every_rule_is_needed() -> Result<()> {
    if !real() {
        return Ok(());
    }
    let world = World::start().await?;
    let mut all = grants(&world.host_docs, false)?;
    all.extend(grants(&world.member_docs, true)?);
    ensure!(!all.is_empty(), "no roles rendered");

    world.grant(None).await?;
    let full = world.scenario(0, None).await?;
    ensure!(
        full.failed.is_none(),
        "with every shipped rule the scenario stopped at step {:?}; log:\n{}",
        full.failed,
        full.log
    );
    ensure!(
        !full.log.contains("forbidden"),
        "with every shipped rule the API server still refused something; log:\n{}",
        full.log
    );
    eprintln!("all {} grants: scenario complete", all.len());

    let mut report = Vec::new();
    for (i, g) in all.iter().enumerate() {
        world.grant(Some(g)).await?;
        let run = i + 1;
        let log = world.dir.path().join(format!("controller-{run}.log"));
        // Run the scenario with a short per-step deadline while watching the log for the refusal.
        let (outcome, seen) =
            tokio::join!(world.scenario(run, Some(REMOVED_STEP_DEADLINE)), async {
                // The log file appears once the scenario starts the controller.
                wait_refused(&log, g).await
            });
        let outcome = outcome?;
        let what = format!(
            "without {} on {} ({} {}, rule {})",
            g.verb, g.resource, g.kind, g.name, g.rule
        );
        ensure!(
            seen,
            "{what}: the API server never refused the controller; log:\n{}",
            outcome.log
        );
        ensure!(
            outcome.failed.is_some(),
            "{what}: the scenario still completed, so the rule is not needed; log:\n{}",
            outcome.log
        );
        eprintln!(
            "{what}: refused, scenario stopped at step {:?}",
            outcome.failed
        );
        report.push(what);
    }
    world.grant(None).await?;
    eprintln!("every one of {} grants is needed", report.len());
    Ok(())
}

#[tokio::test]
async fn every_base_passes_server_side_dry_run() -> Result<()> {
    if !real() {
        return Ok(());
    }
    let cluster = TestCluster::start("dry-run").await?;
    let dir = tempfile::tempdir()?;
    let kc = dir.path().join("admin");
    cluster.write_kubeconfig(&kc)?;
    let kc = kc.display().to_string();
    let deploy = deploy_dir();
    // The namespace must exist for a server-side dry run of what lives in it.
    run_kubectl(&[
        "--kubeconfig",
        &kc,
        "apply",
        "-f",
        &deploy.join("base/namespace.yaml").display().to_string(),
    ])
    .await?;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(deploy.join("examples"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    dirs.sort();
    dirs.push(deploy.join("member"));
    ensure!(
        dirs.len() >= 6,
        "expected an overlay per provider, found {dirs:?}"
    );
    for d in &dirs {
        let out = run_kubectl(&[
            "--kubeconfig",
            &kc,
            "apply",
            "--dry-run=server",
            "-k",
            &d.display().to_string(),
        ])
        .await?;
        ensure!(out.contains("(server dry run)"), "{}: {out}", d.display());
        eprintln!("{}: {}", d.display(), out.lines().count());
    }
    Ok(())
}
