//! The mcr quickstart: one multi-cluster controller over an embedded fleet of emulated
//! Kubernetes clusters, narrated step by step.
//!
//! ```text
//! cargo run -p quickstart                       # 3 clusters, the tour, a summary, exit 0
//! cargo run -p quickstart -- --clusters 5
//! cargo run -p quickstart -- --serve            # then play with kubectl until Ctrl-C
//! RUST_LOG=info cargo run -p quickstart         # the runtime's own logs (stderr)
//! ```
//!
//! What happens: `mcr-envtest` starts N clusters that speak the real Kubernetes API over
//! HTTPS and writes one kubeconfig file per cluster into a temporary directory. The **file
//! provider** watches that directory and engages one cluster per file; a **controller**
//! stamps every ConfigMap with the annotation `mcr.example/reconciled-by: <cluster>`. The tour
//! then adds a cluster (its file appears), removes one (its file is deleted) and shows that
//! the removed cluster's new ConfigMaps are no longer reconciled.

mod controller;
mod scenario;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Parser;
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::Manager;
use mcr_provider_file::{FileProvider, Options};
use tokio_util::sync::CancellationToken;

use controller::Stats;
use scenario::Tour;

/// One multi-cluster controller over an embedded fleet of emulated clusters.
#[derive(Parser, Debug)]
#[command(name = "quickstart", version, about, long_about = None)]
struct Args {
    /// How many clusters to start with.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=50))]
    clusters: u16,
    /// After the tour, keep serving the fleet (and running the controller) for kubectl until
    /// Ctrl-C.
    #[arg(long, alias = "serve")]
    keep_running: bool,
    /// With --keep-running: stop after this many seconds instead of waiting for Ctrl-C.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<u64>,
    /// How long each step may take before the tour fails.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    step_timeout: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Narration goes to stdout; the runtime's logs are opt-in through RUST_LOG (stderr).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: a file, a pipe or `kubectl logs` gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("quickstart failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    let n = usize::from(args.clusters);
    println!("mcr quickstart: one controller reconciling ConfigMaps across {n} clusters");

    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let fleet = Fleet::builder()
        .clusters(n)
        .kubeconfig_dir(dir.path())
        .start()
        .await
        .context("step \"start the fleet\"")?;
    println!(
        "[1/6] started {n} emulated clusters over HTTPS; kubeconfigs in {}",
        dir.path().display()
    );
    for cluster in fleet.clusters() {
        let url = cluster.url().unwrap_or_default();
        println!(
            "      {}  {url}  ({}.kubeconfig)",
            cluster.name(),
            cluster.name()
        );
    }

    // The manager's own (host) cluster; the controller reconciles the provider's clusters.
    let host = TestCluster::start("host").await?;
    let provider = FileProvider::new(Options {
        dirs: vec![dir.path().to_path_buf()],
        ..Options::default()
    });
    let mgr = Manager::new(host.client(), Some(Arc::new(provider)));
    let stats = Arc::new(Stats::default());
    controller::register(&mgr, stats.clone())?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });

    let mut tour = Tour {
        fleet,
        dir: dir.path().to_path_buf(),
        mgr,
        stats,
        deadline: Duration::from_secs(args.step_timeout),
        removed: Vec::new(),
    };
    let result = tour_steps(&mut tour, n, &args).await;
    token.cancel();
    match running.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) if result.is_ok() => return Err(err).context("the manager failed"),
        Ok(Err(err)) => eprintln!("the manager also failed: {err}"),
        Err(err) => eprintln!("the manager task ended abnormally: {err}"),
    }
    result
}

async fn tour_steps(tour: &mut Tour, n: usize, args: &Args) -> Result<()> {
    for name in tour.fleet.names() {
        tour.wait_engaged(&name, true).await?;
    }
    println!(
        "[2/6] the file provider engaged {}",
        tour.fleet.names().join(", ")
    );

    println!("[3/6] a ConfigMap in every cluster");
    tour.configmaps_everywhere("hello").await?;

    let added = format!("cluster-{}", n + 1);
    println!("[4/6] a cluster joins");
    tour.add_cluster(&added).await?;

    println!("[5/6] a cluster leaves");
    tour.remove_cluster("cluster-1", &added).await?;

    println!("[6/6] summary");
    println!("{}", tour.summary());
    println!("quickstart finished: every step happened.");
    println!(
        "With kind installed, try `cargo run -p example-kind`: one controller over your local kind clusters."
    );

    if args.keep_running || args.duration.is_some() {
        println!();
        println!("Serving the fleet; the controller keeps stamping ConfigMaps. Try:");
        for line in tour.kubectl_lines() {
            println!("  {line}");
        }
        println!("Create ConfigMaps with `kubectl create -f <file>` (the emulator does not take");
        println!(
            "`kubectl create configmap`). Drop more kubeconfig files into the directory to add"
        );
        println!("clusters, delete one to remove its cluster.");
        match args.duration {
            Some(secs) => {
                println!("Stopping in {secs}s.");
                tokio::time::sleep(Duration::from_secs(secs)).await;
            }
            None => {
                println!("Ctrl-C to stop.");
                tokio::signal::ctrl_c()
                    .await
                    .context("waiting for Ctrl-C")?;
            }
        }
    }
    Ok(())
}
