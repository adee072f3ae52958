//! `mcr-sim`: runs seeds of the deterministic simulation (see the crate README).
//!
//! - `mcr-sim --seeds N`: the regression seeds, then seeds `1..=N`, on every core; exits 1 if
//!   any breaks an invariant, printing each failing seed and the first one's trace.
//! - `mcr-sim --seed S [--trace]`: one seed (to the end of its plan); `--trace` prints the
//!   trace even when it passes.
//! - `--replays K`: runs each failing seed K more times and compares the traces' hashes.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use clap::Parser;
use mcr_sim::{Options, Outcome, REGRESSIONS, Scenario};

#[derive(Parser)]
#[command(
    name = "mcr-sim",
    about = "Deterministic simulation of mcr's sharding protocol"
)]
struct Cli {
    /// Run the regression seeds, then seeds 1..=N (or from --first).
    #[arg(long, conflicts_with = "seed")]
    seeds: Option<u64>,
    /// The first seed of --seeds.
    #[arg(long, default_value_t = 1)]
    first: u64,
    /// Run one seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Print the trace of the seed (with --seed), even if it passes.
    #[arg(long)]
    trace: bool,
    /// The mix of events.
    #[arg(long, value_enum, default_value_t = Scenario::Mixed)]
    scenario: Scenario,
    /// Worker threads for --seeds (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run each failing seed this many more times and compare the traces.
    #[arg(long, default_value_t = 0)]
    replays: u32,
    /// Skip the regression seeds.
    #[arg(long)]
    no_regressions: bool,
    /// Run every seed to the end of its plan, even past a violation (what a run that finds
    /// nothing costs).
    #[arg(long)]
    keep_going: bool,
    /// The step of virtual time, in milliseconds.
    #[arg(long, default_value_t = 100)]
    step: u64,
    /// Print the code's logs (a tracing filter, e.g. `info` or `mcr_manager=debug`) with
    /// virtual timestamps, for a --seed run.
    #[arg(long)]
    logs: Option<String>,
}

fn print_outcome(o: &Outcome, with_trace: bool) {
    let verdict = if o.violations.is_empty() {
        "ok"
    } else {
        "FAILED"
    };
    println!(
        "seed {} {verdict}: {} (virtual {} s in {:.0?}, trace {} lines, hash {:016x})",
        o.seed,
        o.plan.summary(),
        o.reached / 1000,
        o.took,
        o.trace.len(),
        o.trace.hash()
    );
    for v in o.violations.iter().take(8) {
        println!("  {v}");
    }
    if o.violations.len() > 8 {
        println!("  ... {} more", o.violations.len() - 8);
    }
    if with_trace {
        for line in o.trace.lines() {
            println!("  | {line}");
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let opts = Options {
        scenario: cli.scenario,
        step: cli.step,
        stop_at_first: cli.seed.is_none() && !cli.keep_going,
        sharded: true,
    };
    if let Some(filter) = &cli.logs {
        mcr_sim::logs(filter);
    }
    if let Some(seed) = cli.seed {
        let outcome = mcr_sim::run(seed, &opts);
        print_outcome(&outcome, cli.trace || !outcome.violations.is_empty());
        replays(seed, &opts, cli.replays);
        if !outcome.violations.is_empty() {
            println!(
                "replay: cargo xtask sim --seed {seed}{}",
                scenario_arg(cli.scenario)
            );
        }
        return if outcome.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let n = cli.seeds.unwrap_or(100);
    let jobs = cli
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut work: Vec<(u64, Scenario)> = Vec::new();
    if !cli.no_regressions {
        work.extend(
            REGRESSIONS
                .iter()
                .map(|(seed, scenario, _)| (*seed, *scenario)),
        );
    }
    let known = work.clone();
    work.extend(
        (cli.first..cli.first + n)
            .map(|s| (s, cli.scenario))
            .filter(|w| !known.contains(w)),
    );
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let done = AtomicU64::new(0);
    let failures: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    let total = work.len();
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((seed, scenario)) = work.get(i).copied() else {
                        return;
                    };
                    let opts = Options {
                        scenario,
                        ..opts.clone()
                    };
                    let outcome = mcr_sim::run(seed, &opts);
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if !outcome.violations.is_empty() {
                        println!(
                            "seed {seed} ({scenario:?}, {:?}) FAILED: {}",
                            outcome.plan.kind, outcome.violations[0]
                        );
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(outcome);
                    }
                    if d.is_multiple_of(500) {
                        eprintln!(
                            "{d}/{total} seeds, {:.1} s, {:.0} seeds/s",
                            started.elapsed().as_secs_f64(),
                            d as f64 / started.elapsed().as_secs_f64()
                        );
                    }
                }
            });
        }
    });
    let took = started.elapsed();
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    failures.sort_by_key(|o| o.seed);
    println!(
        "{total} seeds in {:.1} s ({:.0} seeds/s, {jobs} threads): {} failed",
        took.as_secs_f64(),
        total as f64 / took.as_secs_f64(),
        failures.len()
    );
    let _ = std::io::stdout().flush();
    if let Some(first) = failures.first() {
        print_outcome(first, true);
        for o in &failures {
            let scenario = work
                .iter()
                .find(|(s, _)| *s == o.seed)
                .map_or(Scenario::Mixed, |(_, sc)| *sc);
            println!(
                "FAILED seed {}: {} (replay: cargo xtask sim --seed {}{})",
                o.seed,
                o.violations[0],
                o.seed,
                scenario_arg(scenario)
            );
            let opts = Options {
                scenario,
                ..opts.clone()
            };
            replays(o.seed, &opts, cli.replays);
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn scenario_arg(s: Scenario) -> String {
    match s {
        Scenario::Mixed => String::new(),
        other => format!(
            " --scenario {}",
            clap::ValueEnum::to_possible_value(&other)
                .map_or_else(String::new, |v| v.get_name().to_owned())
        ),
    }
}

/// Runs `seed` `k` more times and says how many replays reproduced the trace of the first
/// run (its hash) and its first violation (the same invariant).
fn replays(seed: u64, opts: &Options, k: u32) {
    if k == 0 {
        return;
    }
    let opts = Options {
        stop_at_first: true,
        ..opts.clone()
    };
    let reference = mcr_sim::run(seed, &opts);
    let first = |o: &Outcome| o.violations.first().map(|v| v.invariant);
    let (mut same_trace, mut same_violation) = (0, 0);
    for _ in 0..k {
        let again = mcr_sim::run(seed, &opts);
        same_trace += u32::from(again.trace.hash() == reference.trace.hash());
        same_violation += u32::from(first(&again) == first(&reference));
    }
    println!(
        "  replays of seed {seed}: {same_trace}/{k} with the same trace ({:016x}), {same_violation}/{k} with the same first violation ({})",
        reference.trace.hash(),
        first(&reference).map_or_else(|| "none".to_owned(), |i| i.to_string())
    );
}
