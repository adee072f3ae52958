//! `cargo xtask bench [--quick]`: builds `mcr-bench` and the `mcr-envtest` server in release
//! mode and runs the suite; the report goes to `target/bench/report.json`, SVG charts of it
//! (and of the last `cargo xtask chaos` run's recovery times) to `target/bench/charts/`.
//!
//! The full suite also builds the Go peer of B8 and B12 (`bench/go-peer`): its `go.mod` and `main.go`
//! are copied into `<target>/go-peer/build`, where `go mod tidy` writes the `go.sum` (nothing
//! generated lands in the repository) and `go build` (`GOTOOLCHAIN=local`, `CGO_ENABLED=0`)
//! writes `<target>/release/mcr-bench-go-peer`. Go's module and build caches stay where `go
//! env` puts them. `--quick` skips B8 and B12 (a cold Go build takes minutes) unless `--only`
//! names them. `--real` runs B8 against real control planes (`MCR_ENVTEST=real`).

use std::{path::Path, path::PathBuf, process::Command};

use anyhow::{Context as _, Result, bail};

/// The one module whose checksum the public checksum database does not answer for through
/// this machine's module proxy (`providers/file` v0.23.3, see `bench/go-peer/go.mod`).
const GONOSUMDB: &str = "sigs.k8s.io/multicluster-runtime/providers/file";

/// The target directory cargo builds into (`CARGO_TARGET_DIR` or `<root>/target`).
pub(super) fn target_dir(root: &std::path::Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        })
        .unwrap_or_else(|| root.join("target"))
}

/// Builds the release binaries of the suites that run here, `mcr-bench`, the `mcr-envtest`
/// server and `mcr-chaos`, in one cargo invocation, and returns their directory. Built apart,
/// each one's build recompiled the shared dependencies with its own feature set: about a minute
/// of a cold CI run each time (mcr-envtest with and without `cli`, then everything again for
/// `mcr-chaos`). The simulation stays apart: its tokio has `test-util` (paused clocks), which
/// the benchmarks must not measure.
pub(super) fn release_bins(root: &Path) -> Result<PathBuf> {
    super::cargo(&[
        "build",
        "--release",
        "-p",
        "mcr-bench",
        "-p",
        "mcr-envtest",
        "-p",
        "mcr-chaos",
        "--features",
        "mcr-envtest/cli",
        "--bins",
    ])?;
    Ok(target_dir(root).join("release"))
}

/// Builds the binaries and runs `mcr-bench all` (`--only` some scenarios; `--real`: B8
/// against real control planes).
pub fn run(quick: bool, only: &[String], real: bool) -> Result<()> {
    let root = super::workspace_root();
    let target = target_dir(&root);
    let release = release_bins(&root)?;
    let named = |id: &str| only.iter().any(|o| o.eq_ignore_ascii_case(id));
    let go = named("b8") || named("b12") || (only.is_empty() && !quick);
    if go && let Err(err) = build_go_peer(&root, &target, &release.join("mcr-bench-go-peer")) {
        eprintln!("xtask: B8 and B12 will fail, the Go peer was not built: {err:#}");
    }
    let bench = release.join("mcr-bench");
    let envtest = release.join("mcr-envtest");
    let out = target.join("bench").join("report.json");
    let (bench, envtest, out) = (
        bench.display().to_string(),
        envtest.display().to_string(),
        out.display().to_string(),
    );
    let go_peer = release.join("mcr-bench-go-peer").display().to_string();
    let mut args = vec![
        "all",
        "--out",
        &out,
        "--envtest-bin",
        &envtest,
        "--go-peer-bin",
        &go_peer,
    ];
    if quick {
        args.push("--quick");
    }
    let only = only.join(",");
    if !only.is_empty() {
        args.extend(["--only", &only]);
    }
    if real {
        args.push("--real");
    }
    // The chaos suite's last report (`cargo xtask chaos`), charted with the suite's figures.
    let chaos = target.join("chaos").join("report.json");
    let chaos = chaos.display().to_string();
    if Path::new(&chaos).is_file() {
        args.extend(["--chaos-report", &chaos]);
    }
    super::run(&bench, &args, &[])
}

/// Builds `bench/go-peer` into `out` (see the module docs).
fn build_go_peer(root: &Path, target: &Path, out: &Path) -> Result<()> {
    let src = root.join("bench").join("go-peer");
    let work = target.join("go-peer").join("build");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    for file in ["go.mod", "main.go"] {
        std::fs::copy(src.join(file), work.join(file))
            .with_context(|| format!("copying bench/go-peer/{file}"))?;
    }
    let go = |args: &[&str]| -> Result<()> {
        eprintln!("$ (cd {}; go {})", work.display(), args.join(" "));
        let status = Command::new("go")
            .args(args)
            .current_dir(&work)
            .env("GOTOOLCHAIN", "local")
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-mod=mod")
            .env("GONOSUMDB", GONOSUMDB)
            .status()
            .context("could not start `go` (install Go 1.26.3 or newer for B8)")?;
        if !status.success() {
            bail!("`go {}` failed ({status})", args.join(" "));
        }
        Ok(())
    };
    go(&["mod", "tidy"])?;
    let out = out.display().to_string();
    go(&["build", "-trimpath", "-o", &out, "."])
}
