//! `cargo xtask e2e --kind`: the examples' tests against real kind clusters, and the kind
//! provider over them.
//!
//! Needs Docker (a running engine) and `kind` on PATH; without them it prints exactly what is
//! missing and fails. Creates three kind clusters (`mcr-e2e-host`, `mcr-e2e-member-1`,
//! `mcr-e2e-member-2`), writes their kubeconfigs as
//!
//! ```text
//! target/e2e/host.kubeconfig
//! target/e2e/members/member-1.kubeconfig
//! target/e2e/members/member-2.kubeconfig
//! ```
//!
//! and runs the example packages' tests with `MCR_E2E_KUBECONFIG_DIR=target/e2e`, which makes
//! them use those clusters instead of starting emulated ones (see `examples/support`).
//! `example-kind` additionally gets `MCR_E2E_KIND_BIN=kind` and `MCR_E2E_KIND_PREFIX=mcr-e2e-`:
//! its test runs the example with the real `kind`, so the members are discovered by
//! `mcr-provider-kind` (`kind get clusters`, prefix `mcr-e2e-member-`) under their kind names.
//! The clusters are deleted at the end, also when a step fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Prefix of every cluster this task creates (and deletes).
const PREFIX: &str = "mcr-e2e";
/// The members, named `<PREFIX>-<member>` in kind.
const MEMBERS: &[&str] = &["member-1", "member-2"];
/// Example packages whose tests run against the clusters (kind or real control planes).
pub const PACKAGES: &[&str] = &[
    "example-kind",
    "example-file",
    "example-kubeconfig",
    "example-sync-local-to-remote",
    "example-kube-rs-port",
    "example-namespace",
    "example-multi",
    "example-capi",
    "example-cluster-inventory",
    "example-sharded",
];

/// What is missing to run kind clusters, in words (empty: nothing).
fn missing() -> Vec<String> {
    let mut why = Vec::new();
    if !super::on_path("docker") {
        why.push(
            "`docker` is not on PATH (install Docker: https://docs.docker.com/engine/install/)"
                .to_owned(),
        );
    } else if !succeeds(Command::new("docker").arg("info")) {
        why.push(
            "the Docker engine is not running (`docker info` failed; start it, e.g. \
             `sudo systemctl start docker`)"
                .to_owned(),
        );
    }
    if !succeeds(Command::new("kind").arg("version")) {
        why.push(
            "`kind` is not on PATH (install it: https://kind.sigs.k8s.io/docs/user/quick-start/#installation, \
             e.g. `go install sigs.k8s.io/kind@latest`)"
                .to_owned(),
        );
    }
    why
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.output().map(|o| o.status.success()).unwrap_or(false)
}

/// The message printed when Docker or kind is missing (`None`: nothing is missing).
fn missing_message() -> Option<String> {
    let why = missing();
    (!why.is_empty()).then(|| {
        format!(
            "`cargo xtask e2e --kind` needs Docker and kind, and cannot run here: {}",
            why.join("; ")
        )
    })
}

/// `cargo xtask e2e --kind`: creates kind clusters with the real kind, runs the examples
/// (`example-kind` through `mcr-provider-kind`) over them and deletes them. Fails with a
/// message naming exactly what is missing when Docker or kind is not available.
pub fn run_kind() -> Result<()> {
    if let Some(message) = missing_message() {
        bail!("{message}");
    }
    let dir = workspace_root().join("target").join("e2e");
    let clusters = KindClusters::create(&dir)?;
    let dir_str = dir.to_string_lossy().into_owned();
    let mut args = vec!["test"];
    for package in PACKAGES {
        args.extend(["-p", package]);
    }
    let kind_prefix = format!("{PREFIX}-");
    let envs = [
        ("MCR_E2E_KUBECONFIG_DIR", dir_str.as_str()),
        ("MCR_E2E_KIND_BIN", "kind"),
        ("MCR_E2E_KIND_PREFIX", kind_prefix.as_str()),
    ];
    let result = super::run("cargo", &args, &envs);
    drop(clusters);
    result.context("the examples failed against kind")
}

/// [`run_kind`], or, with `skip_missing`, a message and success when Docker or kind is missing.
pub fn run(skip_missing: bool) -> Result<()> {
    if skip_missing && let Some(message) = missing_message() {
        eprintln!("{message}: skipped (--skip-missing)");
        return Ok(());
    }
    run_kind()
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
