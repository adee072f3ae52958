//! The workspace's test binaries, built once and run by package.
//!
//! `cargo test -p a -p b` resolves dependency features for the packages it names, so after
//! `cargo test --workspace` it builds a second copy of tokio, hyper, kube and the rest, and
//! links every test binary again: minutes of CPU and gigabytes of disk for each selection (a
//! CI run once ran out of disk in the third copy). The suites against real control planes
//! therefore run the binaries `cargo test --workspace --no-run` lists, which is the build the
//! emulator suite already made, each from its package's directory as `cargo test` does.
//! Doc-tests are not run here: none of them starts a control plane.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Which test binaries to run, with which arguments.
pub struct Selection<'a> {
    /// Packages whose test binaries run (unit tests of libraries and binaries, integration
    /// tests).
    pub packages: &'a [&'a str],
    /// Only the integration test target of this name (`cargo test --test <name>`).
    pub test: Option<&'a str>,
    /// Arguments for every binary (after `--` in `cargo test`).
    pub args: &'a [&'a str],
}

/// One test binary of the workspace build.
struct Binary {
    package: String,
    target: String,
    kind: String,
    executable: PathBuf,
    manifest_dir: PathBuf,
}

/// Builds the workspace's tests (nothing, when `cargo test --workspace` ran before with the
/// same settings) and runs the selected binaries with `envs`. Every selected binary runs; the
/// error names the ones that failed.
pub fn run(selection: &Selection<'_>, envs: &[(&str, &str)]) -> Result<()> {
    let binaries = workspace_binaries()?;
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
    let mut failed = Vec::new();
    for binary in chosen {
        let label = format!("{} ({} {})", binary.package, binary.kind, binary.target);
        eprintln!("$ [{label}] {}", binary.executable.display());
        let status = Command::new(&binary.executable)
            .args(selection.args)
            .current_dir(&binary.manifest_dir)
            .env("CARGO_MANIFEST_DIR", &binary.manifest_dir)
            .env("CARGO_PKG_NAME", &binary.package)
            .envs(envs.iter().copied())
            .status()
            .with_context(|| format!("could not start {}", binary.executable.display()))?;
        if !status.success() {
            failed.push(format!("{label}: {status}"));
        }
    }
    if !failed.is_empty() {
        bail!("test binaries failed:\n  {}", failed.join("\n  "));
    }
    Ok(())
}

/// The test binaries of `cargo test --workspace --no-run`, from its JSON messages.
fn workspace_binaries() -> Result<Vec<Binary>> {
    let packages = package_names()?;
    eprintln!("$ cargo test --workspace --no-run --message-format=json-render-diagnostics");
    let mut child = Command::new("cargo")
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
    let output = Command::new("cargo")
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
