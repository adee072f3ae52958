//! `mcr-envtest`: serve a fleet of emulated Kubernetes clusters over HTTPS until Ctrl-C.
//!
//! ```text
//! cargo run -p mcr-envtest --features cli -- --clusters 3 --kubeconfig-dir ./fleet
//! kubectl --kubeconfig ./fleet/cluster-1.kubeconfig get configmaps -w
//! cargo run -p mcr-envtest --features cli -- --clusters 10000 --shared-port --kubeconfig-dir ./big
//! ```

use std::path::PathBuf;

use clap::Parser;

/// Serve a fleet of emulated Kubernetes clusters over HTTPS on 127.0.0.1.
#[derive(Debug, Parser)]
#[command(name = "mcr-envtest", version, about)]
struct Args {
    /// Number of clusters.
    #[arg(long, default_value_t = 3)]
    clusters: usize,
    /// Directory for the `<name>.kubeconfig` files (created if missing).
    #[arg(long, default_value = "./fleet")]
    kubeconfig_dir: PathBuf,
    /// Cluster names are `<prefix>-1` .. `<prefix>-n`.
    #[arg(long, default_value = "cluster")]
    name_prefix: String,
    /// Serve every cluster on one port, told apart by the path prefix `/clusters/<name>` of
    /// its kubeconfig's server URL (for fleets too large for a port and a socket each).
    #[arg(long)]
    shared_port: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let fleet = mcr_envtest::Fleet::builder()
        .clusters(args.clusters)
        .name_prefix(args.name_prefix)
        .kubeconfig_dir(&args.kubeconfig_dir)
        .shared_port(args.shared_port)
        .start()
        .await?;
    for cluster in fleet.clusters() {
        let path = args
            .kubeconfig_dir
            .join(format!("{}.kubeconfig", cluster.name()));
        println!(
            "{}: {} kubeconfig {}",
            cluster.name(),
            cluster.url().unwrap_or_default(),
            path.display()
        );
    }
    if let Some(first) = fleet.clusters().first() {
        let path = args
            .kubeconfig_dir
            .join(format!("{}.kubeconfig", first.name()));
        println!(
            "try: kubectl --kubeconfig {} get configmaps -w",
            path.display()
        );
    }
    println!("serving until Ctrl-C");
    tokio::signal::ctrl_c().await?;
    for name in fleet.names() {
        let _ = std::fs::remove_file(args.kubeconfig_dir.join(format!("{name}.kubeconfig")));
    }
    Ok(())
}
