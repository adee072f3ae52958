//! Servers for outside clients (the corpus's kubectl, kube-rs's own tests): an `mcr-envtest`
//! fleet process (`--features cli`) on the emulator or, with `MCR_ENVTEST=real`, on
//! kube-apiserver + etcd, and kubectl pointed at one of its clusters.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long a fleet may take to serve (real clusters start an API server each).
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How long one kubectl command may run before it is killed (webhooks that cannot be reached
/// answer within their own timeouts, far below this).
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(180);

/// Builds the `mcr-envtest` binary and returns its path.
pub fn build_binary() -> Result<PathBuf> {
    let args = [
        "build",
        "-p",
        "mcr-envtest",
        "--features",
        "cli",
        "--bin",
        "mcr-envtest",
        "--message-format=json-render-diagnostics",
    ];
    eprintln!("$ cargo {}", args.join(" "));
    let out = crate::command("cargo")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .context("could not start cargo")?;
    if !out.status.success() {
        bail!("building the mcr-envtest binary failed ({})", out.status);
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find_map(|message| {
            (message["target"]["name"] == "mcr-envtest")
                .then(|| message["executable"].as_str().map(PathBuf::from))
                .flatten()
        })
        .context("cargo built no mcr-envtest executable")
}

/// A running fleet; stopped (Ctrl-C, then killed) when dropped.
pub struct Fleet {
    child: Child,
    kubeconfigs: Vec<PathBuf>,
    backend: String,
}

impl Fleet {
    /// Starts `clusters` clusters on `backend` (`emulator` or `real`), kubeconfigs in `dir`.
    pub fn start(
        binary: &Path,
        backend: &str,
        clusters: usize,
        dir: &Path,
        assets: Option<&Path>,
    ) -> Result<Fleet> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let log = dir.join("fleet.log");
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut command = Command::new(binary);
        command
            .args([
                "--clusters",
                &clusters.to_string(),
                "--name-prefix",
                backend,
            ])
            .arg("--kubeconfig-dir")
            .arg(dir)
            .env("MCR_ENVTEST", backend)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if let Some(assets) = assets {
            command.env("KUBEBUILDER_ASSETS", assets);
        }
        let child = command
            .spawn()
            .with_context(|| format!("could not start {}", binary.display()))?;
        let mut fleet = Fleet {
            child,
            kubeconfigs: (1..=clusters)
                .map(|i| dir.join(format!("{backend}-{i}.kubeconfig")))
                .collect(),
            backend: backend.to_owned(),
        };
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("serving until Ctrl-C") {
                break;
            }
            if let Some(status) = fleet.child.try_wait()? {
                bail!("the {backend} fleet exited ({status}) before serving:\n{text}");
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "the {backend} fleet did not serve within {} s:\n{text}",
                    START_TIMEOUT.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "corpus: {clusters} {backend} clusters up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(fleet)
    }

    /// The kubeconfig of cluster `index` (from 0).
    pub fn kubeconfig(&self, index: usize) -> &Path {
        &self.kubeconfigs[index]
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "corpus: the {} fleet did not stop on Ctrl-C: killed",
            self.backend
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a command answered.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// The exit code (-1: killed or no code).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// kubectl against one cluster, with its own discovery cache.
pub struct Kubectl {
    /// The kubectl binary.
    pub binary: PathBuf,
    /// The cluster's kubeconfig.
    pub kubeconfig: PathBuf,
    /// A folder of its own (discovery cache, captured output).
    pub scratch: PathBuf,
}

impl Kubectl {
    /// Runs `kubectl args` in `cwd`, bounded by [`KUBECTL_TIMEOUT`].
    pub fn run(&self, cwd: &Path, args: &[&str]) -> Result<Answer> {
        std::fs::create_dir_all(&self.scratch)?;
        let out_path = self.scratch.join("stdout");
        let err_path = self.scratch.join("stderr");
        let cache = self.scratch.join("cache");
        let mut child = Command::new(&self.binary)
            .args(args)
            .arg(format!("--cache-dir={}", cache.display()))
            .env("KUBECONFIG", &self.kubeconfig)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_path)?)
            .stderr(std::fs::File::create(&err_path)?)
            .spawn()
            .with_context(|| format!("could not start {}", self.binary.display()))?;
        let started = Instant::now();
        let code = loop {
            if let Some(status) = child.try_wait()? {
                break status.code().unwrap_or(-1);
            }
            if started.elapsed() > KUBECTL_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                break -1;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        if code == -1 && started.elapsed() > KUBECTL_TIMEOUT {
            stderr.push_str(&format!("(killed after {} s)\n", KUBECTL_TIMEOUT.as_secs()));
        }
        Ok(Answer {
            code,
            stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
            stderr,
        })
    }
}
