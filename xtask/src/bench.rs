//! `cargo xtask bench [--quick]`: builds `mcr-bench` and the `mcr-envtest` server in release
//! mode and runs the suite; the report goes to `target/bench/report.json`.

use std::path::PathBuf;

use anyhow::Result;

/// The target directory cargo builds into (`CARGO_TARGET_DIR` or `<root>/target`).
fn target_dir(root: &std::path::Path) -> PathBuf {
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

/// Builds both binaries and runs `mcr-bench all`.
pub fn run(quick: bool) -> Result<()> {
    let root = super::workspace_root();
    let target = target_dir(&root);
    super::cargo(&["build", "--release", "-p", "mcr-bench"])?;
    super::cargo(&[
        "build",
        "--release",
        "-p",
        "mcr-envtest",
        "--features",
        "cli",
        "--bin",
        "mcr-envtest",
    ])?;
    let release = target.join("release");
    let bench = release.join("mcr-bench");
    let envtest = release.join("mcr-envtest");
    let out = target.join("bench").join("report.json");
    let (bench, envtest, out) = (
        bench.display().to_string(),
        envtest.display().to_string(),
        out.display().to_string(),
    );
    let mut args = vec!["all", "--out", &out, "--envtest-bin", &envtest];
    if quick {
        args.push("--quick");
    }
    super::run(&bench, &args, &[])
}
