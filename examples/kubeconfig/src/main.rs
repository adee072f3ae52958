//! mcr example: the **kubeconfig provider**. Every Secret labelled
//! `sigs.k8s.io/multicluster-runtime-kubeconfig=true` in a namespace of the host cluster holds
//! a member's kubeconfig; the member is named after the Secret.
//!
//! The controller stamps ConfigMaps labelled `mcr.example/demo=true` in every member with
//! `mcr.example/reconciled-by: <secret name>`.
//!
//! ```text
//! cargo run -p example-kubeconfig                                  # embedded fleet, scripted demo
//! cargo run -p example-kubeconfig -- --kubeconfig host.kubeconfig  # real host, until Ctrl-C
//! cargo run -p example-kubeconfig -- create-secret \
//!     --member-kubeconfig member.kubeconfig --host-kubeconfig host.kubeconfig --name member-1
//! ```

mod create_secret;
mod demo;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, Manager, WatchOptions};
use mcr_provider_kubeconfig::{KubeconfigProvider, Namespaces, Options};

/// One controller over every cluster whose kubeconfig is stored in a labelled Secret.
///
/// Without --kubeconfig (and without a subcommand), starts an embedded fleet of emulated
/// clusters, runs a short scripted demo and exits.
#[derive(Parser, Debug)]
#[command(name = "example-kubeconfig", version, about)]
struct Args {
    /// Kubeconfig of the host cluster holding the Secrets. Runs until Ctrl-C.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the Secrets in the host cluster.
    #[arg(long, default_value = "default")]
    namespace: String,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Give a member a least-privilege service account and store its kubeconfig in the host.
    CreateSecret(create_secret::Args),
}

/// The whole program: a kubeconfig-Secret provider on `host`, one controller.
pub fn manager(host: kube::Client, namespace: &str) -> Result<Manager> {
    let provider = KubeconfigProvider::new(
        host.clone(),
        Options {
            namespaces: Namespaces::One(namespace.to_owned()),
            ..Options::default()
        },
    );
    let mgr = Manager::new(host, Some(Arc::new(provider)));
    Controller::new(&mgr)
        .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=true")))
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
}

/// A client for a kubeconfig file (`None`: the usual kube-rs lookup) and context.
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None => kube::Config::from_kubeconfig(&options).await?,
    };
    Ok(kube::Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    match (args.command, args.kubeconfig) {
        (Some(Command::CreateSecret(cmd)), _) => create_secret::run(cmd).await,
        (None, Some(path)) => {
            let host = client(Some(&path), None).await?;
            println!(
                "watching kubeconfig Secrets in namespace {}; Ctrl-C to stop",
                args.namespace
            );
            manager(host, &args.namespace)?.run().await?;
            Ok(())
        }
        (None, None) => demo::run().await,
    }
}
