//! `cargo xtask`: project automation for mcr.
//!
//! - `cargo xtask ci`: the full CI sequence, `.ci/run --full` (`.ci/run` is the one definition
//!   of CI; `--full` adds the steps outside its time budget, the verified packages).
//! - `cargo xtask assets`: builds `kube-apiserver`, `etcd` and `kubectl` from Go modules.
//! - `cargo xtask e2e`: the examples and cross-crate tests against real control planes
//!   (`--kind`: against kind clusters, needs `docker` and `kind`).
//! - `cargo xtask bench`: the benchmark suite (release build); report and SVG charts in
//!   `target/bench/`.
//! - `cargo xtask schemas`: regenerates mcr-envtest's schema table from the OpenAPI documents
//!   and Go types of the Kubernetes release the real backend runs (needs Go).
//! - `cargo xtask fidelity`: the emulator against a real kube-apiserver on seeded request
//!   sequences (codes, bodies, watch events).
//! - `cargo xtask corpus`: real-world manifests (public charts, bundles, examples; pinned Go
//!   modules) through kubectl on the emulator and on kube-apiserver, outputs compared.
//! - `cargo xtask kube-suite`: kube-rs's own cluster tests (kube, kube-client, kube-runtime of
//!   our Cargo.lock) on the emulator and on kube-apiserver; emulator failures must be a subset.
//! - `cargo xtask chaos`: the chaos suite (release build; `--real` on real control planes).
//! - `cargo xtask sim`: the deterministic simulation of sharding and the engagement table
//!   (release build; `--seeds N`, `--seed S --trace`).
//! - `cargo xtask image`: the example-kubeconfig image (`deploy/Dockerfile`, `FROM scratch`,
//!   static binary) with podman, saved as an OCI archive under `target/image/`.
//! - `cargo xtask package`: packages every published crate and builds each from its package
//!   (`cargo package` with verification), in dependency order.

use std::process::{Command, ExitCode};

mod assets;
mod bench;
mod chaos;
mod corpus;
mod e2e;
mod e2e_real;
mod fidelity;
mod fleet;
mod image;
mod kube_suite;
mod schemas;
mod sim;
mod tests;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

/// The published crates. `cargo package` puts them in dependency order itself; the list is
/// the set, written in that order for the reader.
const PUBLISHED: &[&str] = &[
    "mcr-envtest",
    "mcr-core",
    "mcr-manager",
    "mcr-provider-kubeconfig",
    "mcr-provider-file",
    "mcr-provider-namespace",
    "mcr-provider-multi",
    "mcr-provider-kind",
    "mcr-provider-capi",
    "mcr-provider-cluster-inventory",
    "mcr-provider-gardener",
    "mcr-webhook",
];

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Project automation for mcr")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The full CI sequence: runs `.ci/run --full` (fmt, clippy, cargo-deny, feature
    /// combinations, benchmark smoke run, tests, chaos suites, rustdoc, verified packages, real
    /// control planes when Go is installed).
    Ci {
        /// Run `.ci/run` without `--full`, as CI does within its time budget (no package
        /// verification).
        #[arg(long)]
        quick: bool,
    },
    /// Build kube-apiserver, etcd, kubectl and helm from Go modules (cached) and print their
    /// directory.
    Assets {
        /// Rebuild even when the cache is up to date.
        #[arg(long)]
        force: bool,
    },
    /// Run the examples and cross-crate tests against real control planes
    /// (`--kind`: against kind clusters instead).
    E2e {
        /// Use kind clusters (needs docker and kind) instead of kube-apiserver + etcd.
        #[arg(long)]
        kind: bool,
        /// Also run mcr-envtest's conformance suites against the real control planes.
        #[arg(long, conflicts_with = "kind")]
        conformance: bool,
        /// With --kind: exit 0 (with a message) instead of failing when docker or kind is missing.
        #[arg(long, requires = "kind")]
        skip_missing: bool,
    },
    /// Run the benchmark suite in release mode (report and SVG charts under target/bench).
    Bench {
        /// A smaller version of every scenario, for smoke checks.
        #[arg(long)]
        quick: bool,
        /// Only these scenario ids (e.g. `--only b1,b10`; see bench/README.md).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// B8 against real kube-apiserver + etcd control planes (`MCR_ENVTEST=real`; needs
        /// `cargo xtask assets` or `KUBEBUILDER_ASSETS`) instead of the emulator.
        #[arg(long)]
        real: bool,
    },
    /// Run the chaos suite: one manager, two controllers, a fleet under random faults.
    Chaos {
        /// Member clusters (default 20; 5 with --real).
        #[arg(long)]
        clusters: Option<usize>,
        /// Minutes of fault rounds (default 2; 3 with --real).
        #[arg(long)]
        minutes: Option<f64>,
        /// Seed of the fault plan (default: from the clock, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Real kube-apiserver + etcd (MCR_ENVTEST=real): stop/restart and partitions only.
        #[arg(long)]
        real: bool,
        /// Sharded suite: this many manager replicas (child processes) in sharded mode, under
        /// replica faults (kill -9, SIGSTOP, partition from the host, added/removed, weight).
        #[arg(long)]
        replicas: Option<u16>,
        /// Controllers with default settings (no reconcile timeout).
        #[arg(long)]
        default_settings: bool,
    },
    /// Compare the emulator with a real kube-apiserver on seeded request sequences (status
    /// codes, normalised bodies, watch events); fails on divergences outside
    /// crates/mcr-envtest/tests/fidelity-accepted.json.
    Fidelity {
        /// Seed of the request sequences (default: from the clock, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Number of sequences, one namespace each (the default makes about 10,000 requests
        /// per server).
        #[arg(long, default_value_t = 120)]
        sequences: usize,
        /// Random requests per sequence.
        #[arg(long, default_value_t = 80)]
        steps: usize,
    },
    /// Run the real-world corpus (xtask/corpus/sets.json) through kubectl on the emulator and
    /// on kube-apiserver (two runs), and compare the normalised outputs; fails on differences
    /// outside xtask/corpus/accepted.json. Report in target/corpus/report.txt.
    Corpus {
        /// The emulator alone: every step's exit code against the definition's, no
        /// kube-apiserver.
        #[arg(long)]
        emulator_only: bool,
        /// One kube-apiserver run instead of two: the emulator is compared with it, but
        /// kube-apiserver's own stability (two runs agreeing) is not checked (what CI runs, for
        /// time).
        #[arg(long, conflicts_with = "emulator_only")]
        one_apiserver_run: bool,
        /// Only this set (repeatable).
        #[arg(long = "set")]
        sets: Vec<String>,
    },
    /// Run the `#[ignore = "needs cluster"]` tests of kube, kube-client and kube-runtime (the
    /// versions of our Cargo.lock, their sources under target/kube-suite, built into our target
    /// folder) on the emulator and on kube-apiserver; fails when a test fails on the emulator
    /// only.
    KubeSuite {
        /// The emulator alone (no kube-apiserver): results only.
        #[arg(long)]
        emulator_only: bool,
        /// Build the test binaries only.
        #[arg(long, conflicts_with = "emulator_only")]
        build_only: bool,
    },
    /// Regenerate crates/mcr-envtest/src/engine/schema/kubernetes.json from the OpenAPI documents and
    /// Go types of the Kubernetes release in xtask/assets/kubernetes/go.mod (needs Go).
    Schemas,
    /// Package every published crate and build each from its package (verification on), in
    /// dependency order; unpublished workspace crates are resolved from the packages made
    /// before them, as crates.io would.
    Package,
    /// Build the example-kubeconfig image with podman (`deploy/Dockerfile`: `FROM scratch`, a
    /// static binary built on the host), smoke-run it as non-root with a read-only root and no
    /// capability, save it as an OCI archive under target/image, and print its size.
    Image,
    /// Run the deterministic simulation of sharding and the engagement table (release build
    /// of `mcr-sim`): `--seeds N` (what CI runs), `--seed S [--trace]` to replay one; every
    /// argument goes to `mcr-sim` (`cargo xtask sim --help` lists them).
    #[command(disable_help_flag = true)]
    Sim {
        /// Arguments of `mcr-sim`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Ci { quick } => ci(quick),
        Cmd::Assets { force } => assets::build(force).map(|dir| println!("{}", dir.display())),
        Cmd::E2e {
            kind,
            conformance,
            skip_missing,
        } => {
            if kind {
                e2e::run(skip_missing)
            } else {
                e2e_real::run(conformance)
            }
        }
        Cmd::Bench { quick, only, real } => bench::run(quick, &only, real),
        Cmd::Chaos {
            clusters,
            minutes,
            seed,
            real,
            replicas,
            default_settings,
        } => chaos::run(chaos::Chaos {
            clusters,
            minutes,
            seed,
            real,
            replicas,
            default_settings,
        }),
        Cmd::Fidelity {
            seed,
            sequences,
            steps,
        } => fidelity::run(fidelity::Fidelity {
            seed,
            sequences,
            steps,
        }),
        Cmd::Corpus {
            emulator_only,
            one_apiserver_run,
            sets,
        } => corpus::run(corpus::Corpus {
            emulator_only,
            one_apiserver_run,
            sets,
        }),
        Cmd::KubeSuite {
            emulator_only,
            build_only,
        } => kube_suite::run(emulator_only, build_only),
        Cmd::Schemas => schemas::run(),
        Cmd::Package => package(),
        Cmd::Image => image::run(),
        Cmd::Sim { args } => sim::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn cargo(args: &[&str]) -> Result<()> {
    run("cargo", args, &[])
}

/// A command for a tool xtask runs, without the variables `cargo run` set for xtask itself
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*` and the like). Build scripts that watch one of them
/// (ring's watches `CARGO_MANIFEST_DIR`) would see a change and rebuild, so a cargo started
/// here rebuilt ring, kube and every test binary that CI's `cargo test --workspace` had just
/// built (3 min 48 s of a cold CI run).
fn command(program: &str) -> Command {
    let mut command = Command::new(program);
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let set_by_cargo_run = matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
        ) || key.starts_with("CARGO_PKG_");
        if set_by_cargo_run {
            command.env_remove(key);
        }
    }
    command
}

fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = command(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .with_context(|| format!("could not start {program}"))?;
    if !status.success() {
        bail!("`{program} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

fn on_path(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .map(|out| out.status.success())
        .unwrap_or(false)
}

/// `.ci/run`, the one definition of CI, with `--full` unless `quick`.
fn ci(quick: bool) -> Result<()> {
    let script = workspace_root().join(".ci").join("run");
    let script = script.to_str().context("the workspace path is not UTF-8")?;
    let mut args = vec![script];
    if !quick {
        args.push("--full");
    }
    run("bash", &args, &[])
}

/// The workspace root (xtask lives one level below it).
fn workspace_root() -> std::path::PathBuf {
    let xtask = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    xtask
        .parent()
        .map(std::path::PathBuf::from)
        .unwrap_or(xtask)
}

fn package() -> Result<()> {
    // One invocation: cargo packages the crates in dependency order, and verifies each by
    // building it from its `.crate` file, resolving the workspace crates it depends on from
    // the packages made before it (a local overlay of crates.io). A missing file, a path-only
    // dependency or a feature that exists only in the workspace fails here. Library crates
    // enable no k8s-openapi version feature, so the build picks one, as `cargo doc` does.
    let mut args = vec!["package", "--allow-dirty"];
    for krate in PUBLISHED {
        args.extend(["-p", krate]);
    }
    run("cargo", &args, &[("K8S_OPENAPI_ENABLED_VERSION", "1.37")])
}
