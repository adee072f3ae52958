//! `cargo xtask sim`: builds the deterministic simulation (`crates/mcr-sim`, binary `mcr-sim`)
//! in release mode and runs it with the arguments given, for example:
//!
//! - `cargo xtask sim --seeds 10000`: the regression seeds, then seeds 1..=10000 on every
//!   core; a failure prints the seed, the invariant broken and the trace (`cargo xtask ci`
//!   runs this; `.ci/run` without `--full` runs `--seeds 5000`);
//! - `cargo xtask sim --seed 42 --trace`: one seed to the end of its plan, with its trace;
//! - `cargo xtask sim --seed 42 --logs mcr_manager=debug`: the same with the code's logs,
//!   stamped with virtual time and replica.
//!
//! `cargo xtask sim --help` lists every option (those of `mcr-sim`).

use anyhow::Result;

/// Builds `mcr-sim` and runs it with `args`.
pub fn run(args: &[String]) -> Result<()> {
    let root = super::workspace_root();
    super::cargo(&["build", "--release", "-p", "mcr-sim"])?;
    let bin = super::bench::target_dir(&root)
        .join("release")
        .join("mcr-sim");
    let bin = bin.to_str().map(str::to_owned).unwrap_or_default();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    super::run(&bin, &args, &[])
}
