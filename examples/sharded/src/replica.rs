//! `example-sharded replica`: one replica in this process, as deployed (see the crate docs).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result};
use mcr_manager::Sharding;
use tokio_util::sync::CancellationToken;

/// One replica of the group over the kubeconfig files of a directory.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// This replica's identity, unique in the group (it names the Lease and is the stamp).
    #[arg(long)]
    id: String,
    /// Kubeconfig of the host cluster, where the replicas keep their Leases.
    #[arg(long, value_name = "FILE")]
    host_kubeconfig: PathBuf,
    /// The fleet: one kubeconfig file per member cluster (the file provider watches it).
    #[arg(long, value_name = "DIR")]
    fleet_dir: PathBuf,
    /// The group of replicas sharing the fleet (prefixes and labels the Leases).
    #[arg(long, default_value = "example")]
    group: String,
    /// Namespace of the Leases on the host (default: the host kubeconfig's namespace).
    #[arg(long)]
    namespace: Option<String>,
    /// This replica's share of the fleet, relative to the others' weights.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    weight: u32,
    /// Lease duration: a replica whose Lease stopped changing this long is taken for gone.
    #[arg(long, value_name = "SECONDS", default_value_t = 15)]
    lease_duration: u64,
    /// A replica that could not renew its Lease this long releases every cluster.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    renew_deadline: u64,
    /// How often the replica renews its Lease.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    renew_period: u64,
    /// Also stop cleanly when standard input closes (a parent process that dies takes its
    /// replicas with it). Not for a Pod, whose standard input is closed from the start.
    #[arg(long)]
    stop_on_stdin_close: bool,
}

/// Runs the replica until SIGTERM, Ctrl-C or (if asked) the end of standard input, then stops
/// cleanly: its clusters released, its Lease deleted.
pub async fn run(args: Args) -> Result<()> {
    let host = example_support::client(&args.host_kubeconfig)
        .await
        .with_context(|| format!("the host cluster of {}", args.host_kubeconfig.display()))?;
    let mut sharding = Sharding::new(&args.group)
        .identity(&args.id)
        .weight(args.weight)
        .lease_duration(Duration::from_secs(args.lease_duration))
        .renew_deadline(Duration::from_secs(args.renew_deadline))
        .renew_period(Duration::from_secs(args.renew_period));
    if let Some(ns) = &args.namespace {
        sharding = sharding.namespace(ns);
    }
    sharding
        .validate()
        .map_err(|reason| anyhow::anyhow!("replica {}: {reason}", args.id))?;
    let mgr = super::manager(host, args.fleet_dir.clone(), sharding)?;
    println!(
        "replica {} of group {} over {}: running until SIGTERM or Ctrl-C",
        args.id,
        args.group,
        args.fleet_dir.display()
    );
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            stopped(args.stop_on_stdin_close).await;
            stop.cancel();
        }
    });
    mgr.run_until(stop)
        .await
        .with_context(|| format!("replica {}", args.id))?;
    println!("replica {} stopped", args.id);
    Ok(())
}

/// Returns on SIGTERM, Ctrl-C or, with `stdin`, the end of standard input.
async fn stopped(stdin: bool) {
    let (closed, stdin_closed) = tokio::sync::oneshot::channel::<()>();
    if stdin {
        // A thread of its own, not the runtime's blocking pool: a read of stdin cannot be
        // cancelled, and the runtime would wait for it at exit.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            let _ = closed.send(());
        });
    }
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
        // Without `stdin` the sender is dropped: `Err`, and this branch is disabled.
        Ok(()) = stdin_closed => {}
    }
}
