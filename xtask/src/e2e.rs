//! `cargo xtask e2e`: the examples' tests against real kind clusters.
//!
//! Creates three kind clusters (a host and two members), writes their kubeconfigs as
//!
//! ```text
//! target/e2e/host.kubeconfig
//! target/e2e/members/member-1.kubeconfig
//! target/e2e/members/member-2.kubeconfig
//! ```
//!
//! and runs the example packages' tests with `MCR_E2E_KUBECONFIG_DIR=target/e2e`, which makes
//! them use those clusters instead of starting emulated ones (see `examples/support`). The
//! clusters are deleted at the end, also when a step fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Prefix of every cluster this task creates (and deletes).
const PREFIX: &str = "mcr-e2e";
/// The members, named `<PREFIX>-<member>` in kind.
const MEMBERS: &[&str] = &["member-1", "member-2"];
/// Example packages whose tests run against the clusters.
const PACKAGES: &[&str] = &[
    "example-file",
    "example-kubeconfig",
    "example-sync-local-to-remote",
    "example-kube-rs-port",
    "example-namespace",
    "example-multi",
    "example-capi",
];

/// What is missing to run kind clusters, in words (empty: nothing).
fn missing() -> Vec<String> {
    let mut why = Vec::new();
    if !super::on_path("docker") {
        why.push("`docker` is not on PATH".to_owned());
    } else if !succeeds(Command::new("docker").arg("info")) {
        why.push("the Docker engine is not running (`docker info` failed)".to_owned());
    }
    if !super::on_path("kind") {
        why.push("`kind` is not on PATH (https://kind.sigs.k8s.io)".to_owned());
    }
    why
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.output().map(|o| o.status.success()).unwrap_or(false)
}

/// Runs the e2e suite, or explains what is missing.
pub fn run(skip_missing: bool) -> Result<()> {
    let why = missing();
    if !why.is_empty() {
        let message = format!("e2e needs kind clusters: {}", why.join("; "));
        if skip_missing {
            eprintln!("{message}: skipped (--skip-missing)");
            return Ok(());
        }
        bail!("{message}. Install what is missing, or pass --skip-missing");
    }
    let dir = workspace_root().join("target").join("e2e");
    let clusters = KindClusters::create(&dir)?;
    let dir_str = dir.to_string_lossy().into_owned();
    let mut args = vec!["test"];
    for package in PACKAGES {
        args.extend(["-p", package]);
    }
    let result = super::run("cargo", &args, &[("MCR_E2E_KUBECONFIG_DIR", &dir_str)]);
    drop(clusters);
    result.context("the examples failed against kind")
}

fn workspace_root() -> PathBuf {
    // xtask lives one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The kind clusters of one run; deleted on drop (success, failure or panic).
struct KindClusters {
    created: Vec<String>,
}

impl KindClusters {
    fn create(dir: &Path) -> Result<KindClusters> {
        let members = dir.join("members");
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        std::fs::create_dir_all(&members)?;
        let mut clusters = KindClusters {
            created: Vec::new(),
        };
        let stale = existing()?;
        let wanted = std::iter::once(("host", dir.join("host.kubeconfig"))).chain(
            MEMBERS
                .iter()
                .map(|m| (*m, members.join(format!("{m}.kubeconfig")))),
        );
        for (role, path) in wanted {
            let name = format!("{PREFIX}-{role}");
            if stale.contains(&name) {
                eprintln!("deleting the leftover kind cluster {name}");
                super::run("kind", &["delete", "cluster", "--name", &name], &[])?;
            }
            super::run(
                "kind",
                &["create", "cluster", "--name", &name, "--wait", "120s"],
                &[],
            )?;
            clusters.created.push(name.clone());
            let out = Command::new("kind")
                .args(["get", "kubeconfig", "--name", &name])
                .output()
                .context("could not start kind")?;
            if !out.status.success() {
                bail!(
                    "`kind get kubeconfig --name {name}` failed ({})",
                    out.status
                );
            }
            write_private(&path, &out.stdout)?;
        }
        Ok(clusters)
    }
}

impl Drop for KindClusters {
    fn drop(&mut self) {
        for name in self.created.drain(..).rev() {
            if let Err(err) = super::run("kind", &["delete", "cluster", "--name", &name], &[]) {
                eprintln!("could not delete kind cluster {name}: {err:#}");
            }
        }
    }
}

/// Kind clusters that exist now.
fn existing() -> Result<Vec<String>> {
    let out = Command::new("kind")
        .args(["get", "clusters"])
        .output()
        .context("could not start kind")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// Writes a kubeconfig readable by the owner only (it holds credentials).
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)?;
    Ok(())
}
