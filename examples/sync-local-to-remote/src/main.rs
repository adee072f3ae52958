//! mcr example: **sync local to remote**. ConfigMaps labelled `mcr.example/sync=true` in the
//! host cluster are copied to every member cluster (same namespace and name); a copy edited in
//! a member is restored; a copy whose source is deleted (or unlabelled) is deleted.
//!
//! ```text
//! cargo run -p example-sync-local-to-remote        # embedded host + 2 members, scripted demo
//! cargo run -p example-sync-local-to-remote -- --kubeconfig host.kubeconfig --kubeconfig-dir ./members
//! cargo run -p example-sync-local-to-remote -- --kubeconfig host.kubeconfig --kubeconfig-dir ./members \
//!     --namespace team-a   # only team-a's ConfigMaps: a Role there, in the host and the members
//! ```

mod demo;
mod sync;

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::Parser;

/// Copy labelled ConfigMaps from the host cluster to every member and keep them in sync.
///
/// Without --kubeconfig-dir, starts an embedded host and two members (emulated), runs a short
/// scripted demo and exits.
#[derive(Parser, Debug)]
#[command(name = "example-sync-local-to-remote", version, about)]
struct Args {
    /// Directory of member kubeconfigs (file provider). Runs until Ctrl-C.
    #[arg(long, value_name = "DIR")]
    kubeconfig_dir: Option<PathBuf>,
    /// Kubeconfig of the host cluster (the source of the ConfigMaps). Default: the usual
    /// kube-rs lookup.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Sync only the ConfigMaps of this namespace (repeat for several): every watch, in the
    /// host and in the members, is then namespaced, which a Role in each namespace allows.
    /// Default: every namespace, which needs ClusterRoles.
    #[arg(long = "namespace", value_name = "NS")]
    namespaces: Vec<String>,
}

async fn host_client(kubeconfig: Option<PathBuf>) -> Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        // Colour codes only on a terminal: a file, a pipe or `kubectl logs` gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let args = Args::parse();
    match args.kubeconfig_dir {
        Some(dir) => {
            let host = host_client(args.kubeconfig).await?;
            println!(
                "syncing ConfigMaps labelled {}=true to the clusters in {}; Ctrl-C to stop",
                sync::SYNC_LABEL,
                dir.display()
            );
            sync::manager(host, dir, args.namespaces)?.run().await?;
            Ok(())
        }
        None => demo::run().await,
    }
}
