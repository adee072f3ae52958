//! Shared by the mcr examples: the [`stamp`] controller they all run, and test helpers (where
//! the clusters come from, clients, waiting, and running an example binary in the background).
//!
//! By default [`Env::start`] starts emulated clusters (`mcr-envtest`, HTTPS, kubeconfig files
//! on disk). With `MCR_E2E_KUBECONFIG_DIR` set (by `cargo xtask e2e`), it uses the real
//! clusters described there instead:
//!
//! ```text
//! $MCR_E2E_KUBECONFIG_DIR/host.kubeconfig
//! $MCR_E2E_KUBECONFIG_DIR/members/<member>.kubeconfig
//! ```
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let env = example_support::Env::start(2).await?;
//! let host = env.host_client().await?;
//! for member in env.members() {
//!     let client = example_support::client(&member.kubeconfig).await?;
//! }
//! # Ok(()) }
//! ```

pub mod helm;
pub mod logs;
pub mod rbac;
pub mod stamp;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mcr_envtest::{Fleet, TestCluster};

/// The variable `cargo xtask e2e` sets to point the tests at real clusters.
pub const E2E_DIR_VAR: &str = "MCR_E2E_KUBECONFIG_DIR";

/// How long any awaited condition may take.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// One member cluster, as the example sees it: a kubeconfig file.
#[derive(Clone, Debug)]
pub struct Member {
    /// The file's stem (`member-1` for `member-1.kubeconfig`).
    pub name: String,
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    /// The kubeconfig's current context.
    pub context: String,
}

/// A host cluster and member clusters, emulated or real.
pub struct Env {
    host_kubeconfig: PathBuf,
    members_dir: PathBuf,
    members: Vec<Member>,
    /// Emulated clusters, kept alive for the test; `None` against real clusters.
    pub emulated: Option<Emulated>,
    _dir: Option<tempfile::TempDir>,
}

/// The emulated clusters behind an [`Env`].
pub struct Emulated {
    /// The host cluster.
    pub host: TestCluster,
    /// The member clusters (`member-1` ..).
    pub fleet: Fleet,
}

impl Env {
    /// Real clusters from `MCR_E2E_KUBECONFIG_DIR` if set, else `members` emulated members and
    /// an emulated host, all over HTTPS with kubeconfig files in a temporary directory.
    pub async fn start(members: usize) -> Result<Env> {
        if let Some(dir) = std::env::var_os(E2E_DIR_VAR) {
            return Env::from_dir(Path::new(&dir));
        }
        let dir = tempfile::tempdir()?;
        let members_dir = dir.path().join("members");
        let host = TestCluster::start_https("host").await?;
        let host_kubeconfig = dir.path().join("host.kubeconfig");
        host.write_kubeconfig(&host_kubeconfig)?;
        let fleet = Fleet::builder()
            .clusters(members)
            .name_prefix("member")
            .kubeconfig_dir(&members_dir)
            .start()
            .await?;
        let mut env = Env::from_dir(dir.path())?;
        env.emulated = Some(Emulated { host, fleet });
        env._dir = Some(dir);
        debug_assert_eq!(env.host_kubeconfig, host_kubeconfig);
        Ok(env)
    }

    /// Reads `<dir>/host.kubeconfig` and `<dir>/members/*.kubeconfig`.
    pub fn from_dir(dir: &Path) -> Result<Env> {
        let members_dir = dir.join("members");
        let mut members = Vec::new();
        for entry in std::fs::read_dir(&members_dir)
            .with_context(|| format!("reading {}", members_dir.display()))?
        {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "kubeconfig") {
                let kc = Kubeconfig::read_from(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let name = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let context = kc.current_context.unwrap_or_default();
                members.push(Member {
                    name,
                    kubeconfig: path,
                    context,
                });
            }
        }
        members.sort_by(|a, b| a.name.cmp(&b.name));
        if members.is_empty() {
            bail!("no member kubeconfigs in {}", members_dir.display());
        }
        Ok(Env {
            host_kubeconfig: dir.join("host.kubeconfig"),
            members_dir,
            members,
            emulated: None,
            _dir: None,
        })
    }

    /// The host cluster's kubeconfig file.
    pub fn host_kubeconfig(&self) -> &Path {
        &self.host_kubeconfig
    }

    /// The directory holding one kubeconfig per member.
    pub fn members_dir(&self) -> &Path {
        &self.members_dir
    }

    /// The members, sorted by name.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// A client for the host cluster.
    pub async fn host_client(&self) -> Result<kube::Client> {
        client(&self.host_kubeconfig).await
    }

    /// Whether these are emulated clusters (no controllers run in them).
    pub fn is_emulated(&self) -> bool {
        self.emulated.is_some()
    }
}

/// A client for the current context of a kubeconfig file.
pub async fn client(kubeconfig: &Path) -> Result<kube::Client> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Polls `check` every 20 ms until it returns true; fails with `what` after [`DEADLINE`].
pub async fn wait_for<F, Fut>(what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    while !check().await {
        if start.elapsed() > DEADLINE {
            bail!(
                "timed out after {}s waiting for: {what}",
                DEADLINE.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// A unique suffix for object names, so tests against real clusters do not collide.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}

/// An example binary running in the background; killed when dropped.
pub struct Running {
    child: tokio::process::Child,
}

impl Running {
    /// Starts `binary` with `args`; its output goes to the test's stderr (quiet unless
    /// `RUST_LOG` is set).
    pub fn start(binary: &str, args: &[&str]) -> Result<Running> {
        Self::start_with_env(binary, args, &[])
    }

    /// [`start`](Self::start) with these environment variables added.
    pub fn start_with_env(
        binary: &str,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<Running> {
        let child = tokio::process::Command::new(binary)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        Ok(Running { child })
    }

    /// Fails if the program already exited (it should run until stopped).
    pub fn assert_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the example exited early ({status})");
        }
        Ok(())
    }
}

/// Runs `binary` with `args` to completion and returns (success, stdout, stderr).
pub async fn run_to_end(binary: &str, args: &[&str]) -> Result<(bool, String, String)> {
    let out = tokio::process::Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {binary}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
