//! The workspace's test binaries, built once and run by package.
//!
//! `cargo test -p a -p b` resolves dependency features for the packages it names, so after
//! `cargo test --workspace` it builds a second copy of tokio, hyper, kube and the rest, and
//! links every test binary again: minutes of CPU and gigabytes of disk for each selection (a
//! CI run once ran out of disk in the third copy). The suites against real control planes
//! therefore run the binaries `cargo test --workspace --no-run` lists, which is the build the
//! emulator suite already made, each from its package's directory as `cargo test` does.
//! Doc-tests are not run here: none of them starts a control plane.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// How long one test binary may run before it is killed and counted as failed: far above the
/// slowest suite (about two and a half minutes on two busy cores), so only a hang reaches it.
const BINARY_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// Which test binaries to run, with which arguments and environment.
pub struct Selection<'a> {
    /// Packages whose test binaries run (unit tests of libraries and binaries, integration
    /// tests).
    pub packages: &'a [&'a str],
    /// Only the integration test target of this name (`cargo test --test <name>`).
    pub test: Option<&'a str>,
    /// Arguments for every binary (after `--` in `cargo test`).
    pub args: &'a [&'a str],
    /// Environment variables for every binary.
    pub envs: Vec<(&'a str, String)>,
}

/// One test binary of the workspace build.
struct Binary {
    package: String,
    target: String,
    kind: String,
    executable: PathBuf,
    manifest_dir: PathBuf,
}

/// One binary to run, with its selection's arguments and environment.
struct Job<'a> {
    binary: &'a Binary,
    selection: &'a Selection<'a>,
}

impl Job<'_> {
    fn label(&self) -> String {
        let b = self.binary;
        format!("{} ({} {})", b.package, b.kind, b.target)
    }
}

/// Builds the workspace's tests (nothing, when `cargo test --workspace` ran before with the
/// same settings) and runs the selected binaries, [`jobs`] at a time. Each binary's output
/// is kept in a file and printed whole when it ends, so parallel suites do not interleave.
/// Every selected binary runs; the error names the ones that failed.
pub fn run(selections: &[Selection<'_>]) -> Result<()> {
    let binaries = workspace_binaries()?;
    let mut queue = Vec::new();
    for selection in selections {
        let chosen: Vec<&Binary> = binaries
            .iter()
            .filter(|b| selection.packages.contains(&b.package.as_str()))
            .filter(|b| match selection.test {
                Some(test) => b.kind == "test" && b.target == test,
                None => true,
            })
            .collect();
        for package in selection.packages {
            if !chosen.iter().any(|b| b.package == *package) {
                bail!("package {package} has no selected test binary in the workspace build");
            }
        }
        queue.extend(chosen.into_iter().map(|binary| Job { binary, selection }));
    }
    // The RBAC proofs start the most control planes and take longest: started first, they do
    // not end up running alone at the end.
    queue.sort_by_key(|job| !job.binary.target.starts_with("rbac"));
    let logs = std::env::temp_dir().join(format!("mcr-xtask-tests-{}", std::process::id()));
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let total = queue.len();
    let queue = Mutex::new(queue.into_iter().enumerate().collect::<VecDeque<_>>());
    let failed = Mutex::new(Vec::new());
    let workers = jobs();
    eprintln!("xtask: {total} test binaries, {workers} at a time");
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.pop_front()).unwrap_or(None);
                    let Some((index, job)) = next else { break };
                    let log = logs.join(format!("{index}.log"));
                    if let Err(err) = run_one(&job, &log)
                        && let Ok(mut failed) = failed.lock()
                    {
                        failed.push(format!("{}: {err:#}", job.label()));
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&logs);
    let failed = failed.into_inner().unwrap_or_default();
    if !failed.is_empty() {
        bail!("test binaries failed:\n  {}", failed.join("\n  "));
    }
    Ok(())
}

/// How many test binaries run at once: `MCR_TEST_JOBS`, default 2. Each binary runs its
/// tests on several threads and starts its own control planes, so more mostly adds contention
/// on a small machine.
fn jobs() -> usize {
    std::env::var("MCR_TEST_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(2)
}

/// Runs one binary with its output in `log`, then prints that output under a header.
fn run_one(job: &Job<'_>, log: &Path) -> Result<()> {
    let binary = job.binary;
    let label = job.label();
    eprintln!("$ [{label}] started: {}", binary.executable.display());
    let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone().context("duplicating the log's handle")?;
    let started = Instant::now();
    let mut child = Command::new(&binary.executable)
        .args(job.selection.args)
        .current_dir(&binary.manifest_dir)
        .env("CARGO_MANIFEST_DIR", &binary.manifest_dir)
        .env("CARGO_PKG_NAME", &binary.package)
        .envs(job.selection.envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("could not start {}", binary.executable.display()))?;
    let outcome = loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break Ok(()),
            Ok(Some(status)) => break Err(anyhow::anyhow!("{status}")),
            Ok(None) if started.elapsed() > BINARY_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(anyhow::anyhow!(
                    "killed after {} s without ending",
                    BINARY_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(200)),
            Err(err) => break Err(anyhow::Error::new(err).context("waiting for the binary")),
        }
    };
    let output = std::fs::read_to_string(log).unwrap_or_else(|e| format!("(no output: {e})\n"));
    let verdict = match &outcome {
        Ok(()) => "ok".to_owned(),
        Err(err) => format!("FAILED: {err:#}"),
    };
    eprintln!(
        "== [{label}] {verdict} in {:.0} s\n{output}== [{label}] end\n",
        started.elapsed().as_secs_f64()
    );
    outcome
}

/// The test binaries of `cargo test --workspace --no-run`, from its JSON messages.
fn workspace_binaries() -> Result<Vec<Binary>> {
    let packages = package_names()?;
    eprintln!("$ cargo test --workspace --no-run --message-format=json-render-diagnostics");
    let mut child = super::command("cargo")
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .context("could not start cargo")?;
    let stdout = child
        .stdout
        .take()
        .context("cargo's stdout was not captured")?;
    let mut binaries = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's messages")?;
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(binary) = test_binary(&message, &packages) {
            binaries.push(binary);
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        bail!("`cargo test --workspace --no-run` failed ({status})");
    }
    Ok(binaries)
}

/// A `compiler-artifact` message of a test-profile executable, as a [`Binary`].
fn test_binary(message: &Value, packages: &HashMap<PathBuf, String>) -> Option<Binary> {
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(message["executable"].as_str()?);
    let manifest = PathBuf::from(message["manifest_path"].as_str()?);
    let package = packages.get(&manifest)?.clone();
    let kind = message["target"]["kind"][0].as_str()?.to_owned();
    if kind == "example" || kind == "bench" {
        return None;
    }
    Some(Binary {
        package,
        target: message["target"]["name"].as_str()?.to_owned(),
        kind,
        executable,
        manifest_dir: manifest.parent().map(Path::to_path_buf)?,
    })
}

/// Workspace members by manifest path.
fn package_names() -> Result<HashMap<PathBuf, String>> {
    let output = super::command("cargo")
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stderr(Stdio::inherit())
        .output()
        .context("could not start cargo metadata")?;
    if !output.status.success() {
        bail!("`cargo metadata` failed ({})", output.status);
    }
    let metadata: Value =
        serde_json::from_slice(&output.stdout).context("cargo metadata printed no JSON")?;
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata has no packages")?;
    Ok(packages
        .iter()
        .filter_map(|p| {
            Some((
                PathBuf::from(p["manifest_path"].as_str()?),
                p["name"].as_str()?.to_owned(),
            ))
        })
        .collect())
}
