//! `mcr-chaos`: the chaos suite of mcr (run it with `cargo xtask chaos`).
//!
//! One `mcr-manager` runs two controllers (A and B, both on labelled ConfigMaps, sharing one
//! informer per member; B also requeues every object every 15 s) over a fleet of HTTPS
//! member clusters found by the file provider in a directory of kubeconfig files. A loader
//! keeps writing a growing value into every object of every member; each controller copies
//! it into its own annotation. The manager runs in a child process (this binary with
//! `--serve-manager`), so its RSS and live tokio tasks are measured apart from the emulator's
//! and the loader's.
//!
//! The run is a series of rounds. Each round picks, from a seeded generator (the seed is
//! printed; `--seed` repeats the plan, not the timing), a fault for about a quarter of the
//! members: stop/restart, partition (refuse or hang), a 410 storm (history compacted every
//! 50 ms under writes), slow responses (100 ms to 1.5 s) or error responses (500/503/429, on
//! every request or on watch, list or patch only). On the emulator a few other members get
//! their kubeconfig rotated (bearer token <-> fresh client certificate) or leave, and absent
//! members rejoin. On the real backend (`--real`) only stop/restart and the proxy's
//! partitions are injected.
//!
//! Asserted (each failure is listed and the exit code is 1):
//! - no panic in either process (a panic hook counts them);
//! - isolation: half-way through a window, every member without a fault reconciles (both
//!   annotations of every object) a value written after that instant within 60 s, while the
//!   faults stay;
//! - recovery: after heal, every live member reconciles values written after heal within
//!   120 s (time to recover, p50 and p99, is reported for the faulted ones; it includes the
//!   loader's next write to each object, about a second at the default rate);
//! - a member that left vanishes from `engaged_clusters`, `cluster_statuses`, `/clusters`
//!   and the per-cluster gauges of `/metrics` within 60 s;
//! - after the faults and the loader stop, every object's last written value is in both
//!   annotations in every live member within 120 s; the manager's views list exactly the
//!   live members; each member runs one informer;
//! - the manager process's RSS after each round, sampled once glibc handed its free pages
//!   back (`malloc_trim`, see `trim.rs`; the RSS before is printed too): the mean of the last
//!   third of the rounds at most 20% + 16 MiB above the mean of the first third (which holds
//!   the warm-up: connection pools filling to the fault load), and at most 3% + 1 MiB above
//!   the mean of the middle third (flat once warmed up);
//! - after every member left, the manager process's live tasks return to their count with
//!   no member (+8) within 60 s, and the manager stops cleanly within 60 s.
//!
//! Not guaranteed by a pass: timing figures come from one run on a shared machine; faults
//! are per member, never on the host; a seed repeats the plan, not the interleavings.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Parser;

mod check;
mod child;
mod faults;
mod leaks;
mod load;
mod manager;
mod report;
mod rng;
mod round;
mod run;
mod sharded;
mod spans;
mod trim;
mod world;

/// Panics seen by the hook.
static PANICS: AtomicU64 = AtomicU64::new(0);

/// The chaos suite: one manager, two controllers, a fleet under random faults.
#[derive(Debug, Parser)]
#[command(name = "mcr-chaos", about)]
pub struct Args {
    /// Member clusters.
    #[arg(long, default_value_t = 20)]
    pub clusters: usize,
    /// Minutes of fault rounds (at least three rounds run).
    #[arg(long, default_value_t = 2.0)]
    pub minutes: f64,
    /// Seed of the fault plan (default: from the clock; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Loader writes per second (default: 4 per member, 20 to 400).
    #[arg(long)]
    pub rate: Option<u32>,
    /// Only these faults (comma-separated: stop, refuse, hang, storm, slow, errors, churn).
    #[arg(long, value_delimiter = ',', value_parser = ["stop", "refuse", "hang", "storm", "slow", "errors", "churn"])]
    pub faults: Option<Vec<String>>,
    /// The controllers run with default settings (no `reconcile_timeout`): hung members must
    /// not starve the others without one.
    #[arg(long)]
    pub default_settings: bool,
    /// Also write the report's figures as JSON here (`cargo xtask chaos` writes
    /// `<target>/chaos/report.json`, which `cargo xtask bench` charts).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Sharded suite: this many replicas of the manager in sharded mode, each a child
    /// process, under replica faults (kill -9, SIGSTOP/SIGCONT, partition from the host,
    /// added, removed, weight changed); checks overlaps and orphans (see `sharded.rs`).
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..=8))]
    pub replicas: Option<u16>,
    /// Internal: this manager is replica ID of the sharded suite.
    #[arg(long, hide = true, requires = "spans")]
    pub replica_id: Option<String>,
    /// Internal: the replica's weight.
    #[arg(long, hide = true, default_value_t = 1)]
    pub weight: u32,
    /// Internal: the replica's span file.
    #[arg(long, hide = true)]
    pub spans: Option<PathBuf>,
    /// Internal: the replica's host client refuses to list and watch Leases.
    #[arg(long, hide = true)]
    pub no_lease_lists: bool,
    /// Internal: be the manager process, over the kubeconfig files in this directory.
    #[arg(long, hide = true, requires = "host_kubeconfig")]
    pub serve_manager: Option<PathBuf>,
    /// Internal: the host cluster's kubeconfig (with --serve-manager).
    #[arg(long, hide = true)]
    pub host_kubeconfig: Option<PathBuf>,
}

fn panics() -> u64 {
    PANICS.load(Ordering::SeqCst)
}

/// The manager process (see `manager`); a replica of the sharded suite when `replica` is
/// given.
fn serve(
    dir: PathBuf,
    host: PathBuf,
    default_settings: bool,
    replica: Option<(String, u32, PathBuf)>,
    no_lease_lists: bool,
) -> ExitCode {
    let replica = match replica {
        None => None,
        Some((id, weight, path)) => match spans::Spans::create(&path) {
            Ok(spans) => Some(manager::Replica {
                sharding: sharded::sharding(&id, weight),
                spans,
                no_lease_lists,
            }),
            Err(err) => {
                eprintln!("chaos replica {id}: {}: {err}", path.display());
                return ExitCode::FAILURE;
            }
        },
    };
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    match rt.block_on(manager::serve(dir, host, default_settings, replica, panics)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("chaos manager: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The suite's runtime (two workers, as the machine has); `None` after saying why not.
fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(err) => {
            eprintln!("chaos: no tokio runtime: {err}");
            None
        }
    }
}

/// The sharded suite (`--replicas`).
fn sharded_main(args: &Args, replicas: usize, seed: u64) -> ExitCode {
    println!(
        "mcr chaos (sharded): {} clusters, {replicas} replicas, {} min, seed {seed} (repeat the plan with --seed {seed})",
        args.clusters, args.minutes
    );
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    let result = rt.block_on(sharded::run(args, replicas, seed));
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    let own = panics();
    match result {
        Ok(failures) if failures.is_empty() && own == 0 => ExitCode::SUCCESS,
        Ok(_) => {
            if own > 0 {
                println!("FAIL: {own} panics in the suite's process");
            }
            ExitCode::FAILURE
        }
        Err(err) => {
            println!("FAIL: the run could not complete: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("error,mcr_envtest=warn,kube_client=off")
            }),
        )
        // Logs go to stderr: the manager child's stdout carries its line protocol.
        .with_writer(std::io::stderr)
        // Stamped on the spans' clock, so a replica's log lines up with every span file.
        .with_timer(spans::Monotonic)
        .with_ansi(false)
        .init();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        spans::panicked();
        default_hook(info);
    }));
    if let (Some(dir), Some(host)) = (args.serve_manager.take(), args.host_kubeconfig.take()) {
        let replica = args
            .replica_id
            .take()
            .zip(args.spans.take())
            .map(|(id, spans)| (id, args.weight, spans));
        return serve(
            dir,
            host,
            args.default_settings,
            replica,
            args.no_lease_lists,
        );
    }
    let seed = *args.seed.get_or_insert_with(rng::clock_seed);
    if let Some(replicas) = args.replicas {
        return sharded_main(&args, usize::from(replicas), seed);
    }
    let settings = if args.default_settings {
        "default controller settings (no reconcile timeout)"
    } else {
        "reconcile timeout 10 s"
    };
    println!(
        "mcr chaos: {} clusters, {} min, {settings}, seed {seed} (repeat the plan with --seed {seed})",
        args.clusters, args.minutes
    );
    let Some(world_rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    let mut report = report::Report {
        seed,
        clusters: args.clusters,
        ..report::Report::default()
    };
    let result = world_rt.block_on(run::run(&args, &mut report));
    report.panics = panics();
    if report.panics > 0 {
        report.fail(format!(
            "{} panics in the suite's process (see above)",
            report.panics
        ));
    }
    if let Err(err) = &result {
        report.fail(format!("the run could not complete: {err:#}"));
    }
    report.check_rss();
    report.print();
    if let Some(path) = &args.json
        && let Err(err) = report.write_json(path)
    {
        eprintln!("chaos: writing {}: {err:#}", path.display());
    }
    world_rt.shutdown_timeout(std::time::Duration::from_secs(5));
    if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
