//! `cargo xtask chaos`: builds the chaos suite (`chaos/`, binary `mcr-chaos`) in release mode
//! and runs it.
//!
//! - `cargo xtask chaos --clusters 100 --minutes 10`: the emulated fleet (what the figures in
//!   `chaos/README.md` come from); CI runs `--clusters 12 --minutes 1`, then the same with
//!   `--default-settings` (controllers without a reconcile timeout).
//! - `cargo xtask chaos --replicas 3`: the sharded suite, three manager replicas (child
//!   processes) in sharded mode under replica faults; 12 clusters by default (CI runs it
//!   for 2 minutes).
//! - `cargo xtask chaos --real`: real `kube-apiserver` + `etcd` control planes
//!   (`MCR_ENVTEST=real`, binaries from `cargo xtask assets`), 5 clusters by default, only
//!   stop/restart and the proxy's partitions (the emulator-only hooks are not used).
//!
//! The suite prints the seed of its fault plan (`--seed` repeats the plan), a summary, and
//! exits non-zero when an assertion fails. What it injects and asserts: the crate docs of
//! `mcr-chaos`, `chaos/README.md` and the guide's reliability chapter (`mcr-guide`).

use anyhow::Result;

/// Options of `cargo xtask chaos`.
pub struct Chaos {
    /// Member clusters (default 20; 5 with `--real`).
    pub clusters: Option<usize>,
    /// Minutes of fault rounds (default 2; 3 with `--real`).
    pub minutes: Option<f64>,
    /// Seed of the fault plan.
    pub seed: Option<u64>,
    /// Real control planes.
    pub real: bool,
    /// Controllers with default settings (no reconcile timeout).
    pub default_settings: bool,
    /// The sharded suite with this many replicas (child processes).
    pub replicas: Option<u16>,
}

/// Builds and runs `mcr-chaos`.
pub fn run(opts: Chaos) -> Result<()> {
    let root = super::workspace_root();
    let target = super::bench::target_dir(&root);
    let bin = super::bench::release_bins(&root)?.join("mcr-chaos");
    // The figures for `cargo xtask bench`'s recovery-time chart.
    let json = target
        .join("chaos")
        .join("report.json")
        .display()
        .to_string();
    let clusters = opts
        .clusters
        .unwrap_or(if opts.real {
            5
        } else if opts.replicas.is_some() {
            12
        } else {
            20
        })
        .to_string();
    let minutes = opts
        .minutes
        .unwrap_or(if opts.real { 3.0 } else { 2.0 })
        .to_string();
    let mut args = vec![
        "--clusters",
        &clusters,
        "--minutes",
        &minutes,
        "--json",
        &json,
    ];
    let seed = opts.seed.map(|s| s.to_string());
    if let Some(seed) = &seed {
        args.extend(["--seed", seed]);
    }
    if opts.default_settings {
        args.push("--default-settings");
    }
    let replicas = opts.replicas.map(|r| r.to_string());
    if let Some(replicas) = &replicas {
        args.extend(["--replicas", replicas]);
    }
    let mut envs = Vec::new();
    let assets;
    if opts.real {
        envs.push(("MCR_ENVTEST", "real"));
        if std::env::var_os("KUBEBUILDER_ASSETS").is_none() {
            assets = super::assets::build(false)?.display().to_string();
            envs.push(("KUBEBUILDER_ASSETS", assets.as_str()));
        }
    }
    super::run(&bin.display().to_string(), &args, &envs)
}
