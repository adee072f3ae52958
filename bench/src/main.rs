//! `mcr-bench`: measures mcr against kube-runtime and against its own goals.
//!
//! `mcr-bench all [--quick]` runs every scenario, each measurement in a child process
//! (`mcr-bench run-one <scenario> <side>`) so that peak RSS is per side, prints a Markdown
//! table and writes the same figures as JSON. Usually started by `cargo xtask bench`.

mod charts;
mod child;
mod load;
mod machine;
mod probe;
mod remote;
mod report;
mod scenarios;
mod sides;
mod stamp;
mod stats;

use std::{path::PathBuf, process::ExitCode, time::Instant};

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};

use crate::{machine::Machine, report::Report, scenarios::*};

#[derive(Parser)]
#[command(name = "mcr-bench", about = "Benchmarks of mcr (see bench/README.md)")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the suite (or `--only` some scenarios) and write the report.
    All {
        /// Smaller version of every scenario (smoke check).
        #[arg(long)]
        quick: bool,
        /// Where to write the JSON report.
        #[arg(long, default_value = "target/bench/report.json")]
        out: PathBuf,
        /// The `mcr-envtest` server binary (built with `--features cli`), for B2, B2m, B4, B5r.
        #[arg(long, default_value = "target/release/mcr-envtest")]
        envtest_bin: PathBuf,
        /// The Go peer (`bench/go-peer`, built by `cargo xtask bench`), for B8 and B12.
        #[arg(long, default_value = "target/release/mcr-bench-go-peer")]
        go_peer_bin: PathBuf,
        /// Only these scenario ids (e.g. `--only b1,b6`). B8 and B12 (the Go peer) and B9
        /// (valgrind) run in the full suite, and with `--quick` only when named here.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// B8 against real kube-apiserver + etcd control planes (`MCR_ENVTEST=real`, 3 control
        /// planes) instead of the emulator.
        #[arg(long)]
        real: bool,
        /// The chaos suite's JSON report (`cargo xtask chaos` writes one): its recovery times
        /// are charted with the suite's figures.
        #[arg(long)]
        chaos_report: Option<PathBuf>,
    },
    /// Redraw the SVG charts from a JSON report (and the chaos suite's) without running.
    Charts {
        /// The suite's JSON report.
        #[arg(long, default_value = "target/bench/report.json")]
        report: PathBuf,
        /// The chaos suite's JSON report, if any.
        #[arg(long)]
        chaos_report: Option<PathBuf>,
        /// Where the SVG files go.
        #[arg(long, default_value = "target/bench/charts")]
        out_dir: PathBuf,
    },
    /// Run one measurement in this process and print `RESULT <json>` (used by `all`).
    RunOne {
        /// b1, b2 (in-process emulator), b2r, b2m, b3, b3b, b4, b5, b5r, b6, b8:CLUSTERS:ROUNDS, b9:OBJECTS:ROUNDS, b10, b11 (side: replica identity), c1, e1, e2.
        scenario: String,
        /// mcr | kube-runtime | none (b1, b2, b2r, b2m); calm | flood (b5, b5r); raw | kube
        /// (e1); in-place | replace (c1); else ignored.
        side: String,
        /// Smaller sizes.
        #[arg(long)]
        quick: bool,
        /// b2r, b2m, b4, b5r: the directory of kubeconfigs written by the server.
        #[arg(long)]
        kubeconfig_dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let started = Instant::now();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Cmd::All {
            quick,
            out,
            envtest_bin,
            go_peer_bin,
            only,
            real,
            chaos_report,
        } => all(
            quick,
            out,
            go_peer::Bins {
                envtest: envtest_bin,
                go_peer: go_peer_bin,
                real,
            },
            only,
        )
        .and_then(|(out, failures)| {
            write_charts(&out, chaos_report.as_deref(), &charts_dir(&out))?;
            guarded(&failures)
        }),
        Cmd::Charts {
            report,
            chaos_report,
            out_dir,
        } => write_charts(&report, chaos_report.as_deref(), &out_dir),
        Cmd::RunOne {
            scenario,
            side,
            quick,
            kubeconfig_dir,
        } => run_one(&scenario, &side, quick, kubeconfig_dir, started),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("mcr-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_one(
    scenario: &str,
    side: &str,
    quick: bool,
    dir: Option<PathBuf>,
    started: Instant,
) -> Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    let value = rt.block_on(async {
        let dir = || {
            dir.as_deref()
                .ok_or_else(|| anyhow::anyhow!("{scenario} needs --kubeconfig-dir"))
        };
        match scenario {
            "b1" | "b2" => compare::child(scenario, side, quick).await,
            "b2r" => fleet_compare::child("b2", side, quick, dir()?).await,
            "b2m" => fleet_compare::child("b2m", side, quick, dir()?).await,
            "b3" => engage::child(quick).await,
            "b3b" => priority::child(side, quick).await,
            b4 if b4.starts_with("b4:") => {
                let clusters = b4[3..].parse().context("b4:<clusters>")?;
                https::child(dir()?, clusters, started).await
            }
            "b5" => fairness::child(side, quick).await,
            "b5r" => fairness_remote::child(side, quick, dir()?).await,
            "b6" => watches::child(quick).await,
            b8 if b8.starts_with("b8:") => {
                let (clusters, rounds) =
                    b8[3..].split_once(':').context("b8:<clusters>:<rounds>")?;
                let clusters = clusters.parse().context("b8:<clusters>:<rounds>")?;
                let rounds = rounds.parse().context("b8:<clusters>:<rounds>")?;
                go_peer::child(clusters, rounds, dir()?).await
            }
            "b10" => multicore::child(side, quick, dir()?).await,
            "b11" => shard::child(side, quick, dir()?).await,
            "c1" => credentials::child(side, quick).await,
            b9 if b9.starts_with("b9:") => instructions::child(&b9[3..], side, dir()?).await,
            "e1" => envtest::e1(side, quick).await,
            "e2" => envtest::e2(quick).await,
            other => bail!("unknown scenario {other:?}"),
        }
    })?;
    child::report(value);
    // Do not wait for the runtime to wind down background tasks: the figures are out.
    std::process::exit(0)
}

/// `charts/` next to the JSON report.
fn charts_dir(report: &std::path::Path) -> PathBuf {
    report
        .parent()
        .map(|d| d.join("charts"))
        .unwrap_or_else(|| PathBuf::from("charts"))
}

fn write_charts(
    report: &std::path::Path,
    chaos: Option<&std::path::Path>,
    dir: &std::path::Path,
) -> Result<()> {
    for path in charts::write_all(report, chaos, dir)? {
        println!("chart: {}", path.display());
    }
    Ok(())
}

/// An error naming every scenario that did not run and every tripped regression guard (the
/// suite then exits with a failure, after the report and the charts are written).
fn guarded(failures: &[String]) -> Result<()> {
    if failures.is_empty() {
        return Ok(());
    }
    bail!(
        "{} failure(s) (scenarios that did not run, regression guards tripped):\n  {}",
        failures.len(),
        failures.join("\n  ")
    )
}

/// Runs the suite, writes the JSON report to `out` and returns its path with the suite's
/// failures ([`Report::failures`]).
fn all(
    quick: bool,
    out: PathBuf,
    bins: go_peer::Bins,
    only: Vec<String>,
) -> Result<(PathBuf, Vec<String>)> {
    let named = |id: &str| only.iter().any(|o| o.eq_ignore_ascii_case(id));
    // B8 and B12 need the Go peer built (minutes from a cold Go cache) and B9 valgrind: none
    // is part of the quick smoke unless named.
    let heavy = |id: &str| matches!(id, "b8" | "b9" | "b12");
    let wanted = |id: &str| named(id) || (only.is_empty() && !(quick && heavy(id)));
    let envtest_bin = bins.envtest.clone();
    let mut report = Report {
        date: jiff::Zoned::now()
            .strftime("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        quick,
        machine: Machine::current(),
        baseline: sides::BASELINE.to_string(),
        scenarios: Vec::new(),
    };
    let work = out
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let suite_start = Instant::now();
    let ids: Vec<&str> = [
        "b1", "b2", "b2m", "b3", "b3b", "b4", "b5", "b5r", "b6", "b8", "b9", "b10", "b11", "b12",
        "b13", "c1", "e1", "e2",
    ]
    .into_iter()
    .filter(|id| wanted(id))
    .collect();
    // A bar over the scenarios on a terminal; one line per start and end in CI logs.
    let progress = mcr_progress::Progress::steps("bench", ids.len() as u64);
    for id in ids {
        progress.start(&id.to_uppercase());
        match id {
            "b1" => report.scenarios.push(compare::run(id, quick)),
            "b2" => {
                let mut s = fleet_compare::run(id, quick, &envtest_bin, &work);
                s.absorb(
                    compare::run(id, quick),
                    "in-process emulator (earlier setup): ",
                );
                report.scenarios.push(s);
            }
            "b2m" => report
                .scenarios
                .push(fleet_compare::run(id, quick, &envtest_bin, &work)),
            "b3" => report.scenarios.push(engage::run(quick)),
            "b3b" => report.scenarios.push(priority::run(quick)),
            "b4" => report
                .scenarios
                .push(https::run(quick, &envtest_bin, &work)),
            "b5" => report.scenarios.push(fairness::run(quick)),
            "b5r" => report
                .scenarios
                .push(fairness_remote::run(quick, &envtest_bin, &work)),
            "b6" => report.scenarios.push(watches::run(quick)),
            "b8" => report.scenarios.push(go_peer::run(quick, &bins, &work)),
            "b9" => report
                .scenarios
                .push(instructions::run(quick, &envtest_bin, &work)),
            "b10" => report
                .scenarios
                .push(multicore::run(quick, &envtest_bin, &work)),
            "b11" => report
                .scenarios
                .push(shard::run(quick, &envtest_bin, &work)),
            "b12" => report.scenarios.push(shard_peer::run(quick, &bins, &work)),
            "b13" => report
                .scenarios
                .push(scale::run(quick, &envtest_bin, &work)),
            "c1" => report.scenarios.push(credentials::run(quick)),
            "e1" => report.scenarios.push(envtest::run_e1(quick)),
            _ => report.scenarios.push(envtest::run_e2(quick)),
        }
        progress.done();
    }
    progress.finish();
    eprintln!("suite took {:.1} s", suite_start.elapsed().as_secs_f64());
    println!("{}", report.table());
    report.write_json(&out)?;
    println!("JSON report: {}", out.display());
    Ok((out, report.failures()))
}
