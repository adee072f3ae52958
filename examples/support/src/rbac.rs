//! Proving the shipped `deploy/` RBAC on real API servers (`MCR_ENVTEST=real`): render a
//! kustomization with kubectl, list every verb of every rule of its roles, apply the roles with
//! one verb removed, get ServiceAccount tokens from TokenRequests, run an example binary with
//! its log in a file, and see the API server refuse a verb in that log.
//!
//! [`prove`] is the loop the examples' `tests/rbac.rs` share: the scenario must complete with
//! every shipped verb and the API server refusing nothing, and must not complete, with a
//! refusal of that verb seen in the log, when any one verb is removed.
//!
//! The controller runs as a process ([`Controller::start`]), or in its container image
//! ([`Controller::start_container`], when [`image`] names one) the way a Pod runs it, with a
//! [`PodIdentity`] mounted where a Pod finds its ServiceAccount.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use base64::Engine as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;
use serde_json::Value;

/// A step the controller should complete: generous, the machine may be slow and shared.
pub const STEP_DEADLINE: Duration = Duration::from_secs(120);
/// With a verb removed: how long each step gets to (wrongly) complete anyway. The steps
/// before the one that needs the verb complete in seconds (the full run shows it). A
/// deadline too short could only report an earlier step: the proof also needs the refusal
/// of the removed verb in the log, which a rule nobody needs never produces.
pub const REMOVED_STEP_DEADLINE: Duration = Duration::from_secs(15);

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Whether the tests run on real control planes; prints the test as skipped if not (the
/// emulator does not authorize).
pub fn real_or_skip() -> bool {
    if mcr_envtest::backend().is_real() {
        return true;
    }
    eprintln!("skipped: RBAC needs a real kube-apiserver (MCR_ENVTEST=real, cargo xtask e2e)");
    false
}

/// Runs the assets' kubectl with `args`, failing with its output. Async: the real clusters'
/// proxies run on the test's runtime.
pub async fn kubectl(args: &[&str]) -> Result<String> {
    let bin = mcr_envtest::real::Assets::find()?
        .kubectl
        .context("no kubectl among the real assets (cargo xtask assets builds one)")?;
    let out = tokio::process::Command::new(bin)
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

/// `kubectl apply -k dir` with the admin kubeconfig of `cluster` (written under `scratch`).
pub async fn apply_kustomization(cluster: &TestCluster, dir: &Path, scratch: &Path) -> Result<()> {
    let kc = scratch.join(format!("{}-admin.kubeconfig", cluster.name()));
    cluster.write_kubeconfig(&kc)?;
    let (kc, dir) = (kc.display().to_string(), dir.display().to_string());
    kubectl(&["--kubeconfig", &kc, "apply", "-k", &dir]).await?;
    Ok(())
}

/// The objects `kubectl kustomize dir` renders.
pub async fn render(dir: &Path) -> Result<Vec<Value>> {
    let yaml = kubectl(&["kustomize", &dir.display().to_string()]).await?;
    serde_saphyr::from_multiple(&yaml).context("parsing kustomize output")
}

/// One verb of one rule of a shipped role.
#[derive(Clone, Debug)]
pub struct Grant {
    /// Which rendered set of roles it comes from (the index given to [`grants`]).
    pub set: usize,
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The role's name.
    pub name: String,
    /// The rule's index in the role.
    pub rule: usize,
    /// The verb.
    pub verb: String,
    /// The rule's one resource.
    pub resource: String,
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} on {} ({} {}, rule {})",
            self.verb, self.resource, self.kind, self.name, self.rule
        )
    }
}

fn roles(docs: &[Value]) -> impl Iterator<Item = &Value> {
    docs.iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("Role" | "ClusterRole")))
}

/// Every (role, rule, verb) of the roles among `docs`, tagged with `set`. Each rule must name
/// one resource, so that each verb can be removed alone.
pub fn grants(docs: &[Value], set: usize) -> Result<Vec<Grant>> {
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
                    set,
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

/// Server-side applies the roles among `docs` (set `set`) to `client`, without `removed` when
/// it belongs to them (the rule goes when it has no verb left).
pub async fn apply_roles(
    client: &kube::Client,
    docs: &[Value],
    set: usize,
    removed: Option<&Grant>,
) -> Result<()> {
    let pp = PatchParams::apply("mcr-rbac-test").force();
    for doc in roles(docs) {
        let mut doc = doc.clone();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        if let Some(g) = removed.filter(|g| g.set == set && g.kind == kind && g.name == name) {
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

/// A token for `ns/sa` from a TokenRequest (what a Pod's projected token is), valid 1 h.
pub async fn token(client: &kube::Client, ns: &str, sa: &str) -> Result<String> {
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
pub fn kubeconfig_as(cluster: &TestCluster, token: &str) -> Result<String> {
    let admin = cluster
        .kubeconfig_yaml()
        .context("real clusters serve HTTPS")?;
    ensure!(
        admin.contains(cluster.token()),
        "the kubeconfig carries a token"
    );
    Ok(admin.replace(cluster.token(), token))
}

/// The variable that names the image the RBAC proofs run the controller from (`cargo xtask
/// e2e` sets it when `cargo xtask image` has built one). Unset or empty: the binary runs as a
/// process.
pub const IMAGE_VAR: &str = "MCR_E2E_IMAGE";

/// The image named by [`IMAGE_VAR`], if any.
pub fn image() -> Option<String> {
    std::env::var(IMAGE_VAR)
        .ok()
        .filter(|image| !image.is_empty())
}

/// Where a Pod finds its ServiceAccount's files.
const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How long podman gets to remove a container.
const PODMAN_DEADLINE: Duration = Duration::from_secs(60);

/// What a Pod of a ServiceAccount is given to reach its API server: `token`, `ca.crt` and
/// `namespace` in one directory (mounted at `/var/run/secrets/kubernetes.io/serviceaccount`),
/// and `KUBERNETES_SERVICE_HOST`/`_PORT`. What `kube::Config::incluster()` reads.
pub struct PodIdentity {
    dir: PathBuf,
    host: String,
    port: String,
}

impl PodIdentity {
    /// Writes `cluster`'s CA, `token` and `namespace` into `dir` (created), readable by any
    /// user as a projected ServiceAccount volume is, so that a non-root container reads them.
    pub fn write(
        cluster: &TestCluster,
        token: &str,
        namespace: &str,
        dir: &Path,
    ) -> Result<PodIdentity> {
        use std::os::unix::fs::PermissionsExt as _;
        let kubeconfig = cluster.kubeconfig().context("real clusters serve HTTPS")?;
        let ca = kubeconfig
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.certificate_authority_data.as_deref())
            .context("the cluster's kubeconfig has no inline CA")?;
        let ca = base64::engine::general_purpose::STANDARD
            .decode(ca)
            .context("the kubeconfig's CA is not base64")?;
        let url = cluster.url().context("real clusters have a URL")?;
        let (host, port) = url
            .strip_prefix("https://")
            .and_then(|addr| addr.rsplit_once(':'))
            .with_context(|| format!("{url} is not https://<host>:<port>"))?;
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        for (file, content) in [
            ("token", token.as_bytes()),
            ("ca.crt", &ca),
            ("namespace", namespace.as_bytes()),
        ] {
            let path = dir.join(file);
            std::fs::write(&path, content)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        }
        Ok(PodIdentity {
            dir: dir.to_path_buf(),
            host: host.to_owned(),
            port: port.to_owned(),
        })
    }
}

/// An example binary running with its stdout and stderr (tracing) in a file, as a process or
/// in a container; killed (the container removed) when dropped.
pub struct Controller {
    child: tokio::process::Child,
    log: PathBuf,
    /// The container's name, until it is removed.
    container: Option<String>,
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(name) = self.container.take() {
            // Not awaited (a destructor cannot): podman removes it within seconds.
            let _ = std::process::Command::new("podman")
                .args(["rm", "--force", "--time", "0", &name])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
        }
    }
}

impl Controller {
    /// Starts `bin args` with `RUST_LOG=info`, writing to `log`.
    pub fn start(bin: &str, args: &[&str], log: &Path) -> Result<Controller> {
        let file = std::fs::File::create(log)?;
        let child = tokio::process::Command::new(bin)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {bin}"))?;
        Ok(Controller {
            child,
            log: log.to_path_buf(),
            container: None,
        })
    }

    /// Starts `image` with `args` in a podman container named `name`, as a Pod of `identity`
    /// with the shipped `securityContext` runs it: UID 65532, read-only root filesystem (no
    /// writable tmpfs either), every capability dropped, no privilege escalation; the
    /// ServiceAccount's files mounted read-only where a Pod has them, and
    /// `KUBERNETES_SERVICE_HOST`/`_PORT` set. `--network host`, so the API servers on
    /// 127.0.0.1 are reachable. `RUST_LOG=info`; its output goes to `log`.
    pub fn start_container(
        image: &str,
        name: &str,
        identity: &PodIdentity,
        args: &[&str],
        log: &Path,
    ) -> Result<Controller> {
        let mount = format!("{}:{SERVICE_ACCOUNT_MOUNT}:ro", identity.dir.display());
        let host = format!("KUBERNETES_SERVICE_HOST={}", identity.host);
        let port = format!("KUBERNETES_SERVICE_PORT={}", identity.port);
        let mut podman = vec![
            "run",
            "--rm",
            "--pull=never",
            "--name",
            name,
            "--network",
            "host",
            "--read-only",
            "--read-only-tmpfs=false",
            "--cap-drop=ALL",
            "--security-opt=no-new-privileges",
            "--user",
            "65532:65532",
            "--volume",
            &mount,
            "--env",
            &host,
            "--env",
            &port,
            "--env",
            "RUST_LOG=info",
            image,
        ];
        podman.extend_from_slice(args);
        let mut controller = Controller::start("podman", &podman, log)?;
        controller.container = Some(name.to_owned());
        Ok(controller)
    }

    /// What it wrote so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops it cleanly: SIGTERM, then waits up to `deadline` for it to exit (killed after
    /// that). Fails (with the log) if it had exited by itself.
    pub async fn terminate(mut self, deadline: Duration) -> Result<String> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("the controller exited ({status}); log:\n{}", self.log());
        }
        let pid = self.child.id().context("the controller has no pid")?;
        let sent = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await?;
        ensure!(sent.success(), "kill -TERM {pid} failed");
        if tokio::time::timeout(deadline, self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(self.log())
    }

    /// Stops it (a container is removed); fails (with the log) if it had exited by itself.
    pub async fn stop(mut self) -> Result<String> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("the controller exited ({status}); log:\n{}", self.log());
        }
        if let Some(name) = self.container.take() {
            let removed = tokio::process::Command::new("podman")
                .args(["rm", "--force", "--time", "0", &name])
                .kill_on_drop(true)
                .output();
            let out = tokio::time::timeout(PODMAN_DEADLINE, removed)
                .await
                .with_context(|| format!("podman rm {name}: no answer in {PODMAN_DEADLINE:?}"))??;
            ensure!(
                out.status.success(),
                "podman rm {name} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        self.child.kill().await?;
        Ok(self.log())
    }
}

/// A kubeconfig Secret named `name` as the kubeconfig provider reads it by default: labelled
/// `sigs.k8s.io/multicluster-runtime-kubeconfig=true`, the kubeconfig under `kubeconfig`.
pub fn kubeconfig_secret(name: &str, kubeconfig: &str) -> k8s_openapi::api::core::v1::Secret {
    k8s_openapi::api::core::v1::Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(std::collections::BTreeMap::from([(
                "sigs.k8s.io/multicluster-runtime-kubeconfig".into(),
                "true".into(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(std::collections::BTreeMap::from([(
            "kubeconfig".into(),
            k8s_openapi::ByteString(kubeconfig.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// Whether shard replica Lease `lease` claims `peer`: its `mcr.sigs.k8s.io/shard-claim`
/// annotation names it (`peer=...`), so the replica has taken the peer into its assignment.
/// False when the Lease cannot be read.
pub async fn lease_claims(
    leases: &Api<k8s_openapi::api::coordination::v1::Lease>,
    lease: &str,
    peer: &str,
) -> bool {
    let prefix = format!("{peer}=");
    leases
        .get_opt(lease)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.metadata.annotations)
        .and_then(|a| a.get("mcr.sigs.k8s.io/shard-claim").cloned())
        .is_some_and(|claim| claim.split(',').any(|p| p.starts_with(&prefix)))
}

/// A ConfigMap named `name` with the label the example controllers watch.
pub fn labelled(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(crate::stamp::LABEL.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Waits (at most `deadline`) until ConfigMap `name` is stamped by `cluster`.
pub async fn stamped(api: &Api<ConfigMap>, name: &str, cluster: &str, deadline: Duration) -> bool {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Ok(cm) = api.get(name).await
            && cm
                .annotations()
                .get(crate::stamp::ANNOTATION)
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

/// Whether `log` shows the API server refusing `verb` on `resource`.
pub fn refused(log: &str, verb: &str, resource: &str) -> bool {
    let escaped = format!("cannot {verb} resource \\\"{resource}\\\"");
    let plain = format!("cannot {verb} resource \"{resource}\"");
    log.lines()
        .any(|l| l.contains("forbidden") && (l.contains(&escaped) || l.contains(&plain)))
}

/// What one run of a scenario did.
pub struct Outcome {
    /// The first step that did not complete in time, if any.
    pub failed: Option<u8>,
    /// The controller's log.
    pub log: String,
}

/// The proof: `grant(None)` then `scenario(0, STEP_DEADLINE)` must complete with no refusal;
/// then for each grant `g`, `grant(Some(g))` and `scenario(i, REMOVED_STEP_DEADLINE)` must
/// stop at some step with a refusal of `g` in the log (`log(i)` names the file the scenario's
/// controller writes, watched while it runs). Returns one line per grant.
pub async fn prove(
    all: &[Grant],
    mut grant: impl AsyncFnMut(Option<&Grant>) -> Result<()>,
    mut scenario: impl AsyncFnMut(usize, Duration) -> Result<Outcome>,
    log: impl Fn(usize) -> PathBuf,
) -> Result<Vec<String>> {
    ensure!(!all.is_empty(), "no roles rendered");
    grant(None).await?;
    let full = scenario(0, STEP_DEADLINE).await?;
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
        grant(Some(g)).await?;
        let run = i + 1;
        let path = log(run);
        let watch = async {
            let until = tokio::time::Instant::now() + STEP_DEADLINE;
            while tokio::time::Instant::now() < until {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if refused(&text, &g.verb, &g.resource) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            false
        };
        let (outcome, seen) = tokio::join!(scenario(run, REMOVED_STEP_DEADLINE), watch);
        let outcome = outcome?;
        ensure!(
            seen,
            "without {g}: the API server never refused the controller; log:\n{}",
            outcome.log
        );
        let Some(step) = outcome.failed else {
            anyhow::bail!(
                "without {g}: the scenario still completed, so the rule is not needed; log:\n{}",
                outcome.log
            );
        };
        let line = format!("without {g}: refused, scenario stopped at step {step}");
        eprintln!("{line}");
        report.push(line);
    }
    grant(None).await?;
    Ok(report)
}

/// Creates namespace `ns` (if missing), ServiceAccount `account` in it, and a Role and
/// RoleBinding there granting that account `verbs` on core-group `resource`, in that namespace
/// only: a tenant's grant, with no ClusterRole. Returns a token for the account.
pub async fn grant_in_namespace(
    client: &kube::Client,
    ns: &str,
    account: &str,
    resource: &str,
    verbs: &[&str],
) -> Result<String> {
    let meta = |name: &str, namespace: Option<&str>| ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    };
    let pp = PostParams::default();
    let namespace = Namespace {
        metadata: meta(ns, None),
        ..Namespace::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&pp, &namespace)
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        other => {
            other.with_context(|| format!("creating namespace {ns}"))?;
        }
    }
    let sa = ServiceAccount {
        metadata: meta(account, Some(ns)),
        ..ServiceAccount::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&pp, &sa)
        .await?;
    let name = format!("{account}-{resource}");
    let role = Role {
        metadata: meta(&name, Some(ns)),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec![resource.into()]),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&pp, &role)
        .await?;
    let binding = RoleBinding {
        metadata: meta(&name, Some(ns)),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.into()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&pp, &binding)
        .await?;
    token(client, ns, account).await
}

/// Waits (at most `deadline`) until the file at `log` shows the API server refusing `verb` on
/// `resource`; returns that line.
pub async fn refusal_in(
    log: &Path,
    verb: &str,
    resource: &str,
    deadline: Duration,
) -> Option<String> {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| refused(l, verb, resource)) {
            return Some(line.to_owned());
        }
        if tokio::time::Instant::now() > until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
