//! mcr example: the **cluster-inventory provider**. Every ready `ClusterProfile` on the hub is
//! a member cluster, reached with a credential plugin from an operator-supplied provider file
//! (KEP-5339) or with a kubeconfig Secret labelled for this consumer.
//!
//! The controller stamps ConfigMaps labelled `mcr.example/demo=true` in every member with
//! `mcr.example/reconciled-by: <cluster name>`.
//!
//! ```text
//! cargo run -p example-cluster-inventory                 # embedded hub + 2 members, scripted demo
//! cargo run -p example-cluster-inventory -- --kubeconfig hub.kubeconfig \
//!     --provider-file clusterprofile-provider-file.json \
//!     --allowed-server '*.fleet.example.com'            # real hub, until Ctrl-C
//! cargo run -p example-cluster-inventory -- --kubeconfig hub.kubeconfig --consumer my-controller
//! ```

mod demo;
mod plugin;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, Manager, WatchOptions};
use mcr_provider_cluster_inventory::{
    AccessProviders, ClusterInventoryProvider, Namespaces, Options, Strategy,
};

/// One controller over every cluster of a ClusterProfile inventory.
///
/// Without --kubeconfig, starts an embedded hub and two members, runs a short scripted demo
/// (credentials from this program's own `credential-plugin` mode) and exits.
#[derive(Parser, Debug)]
#[command(name = "example-cluster-inventory", version, about)]
struct Args {
    /// Kubeconfig of the hub cluster holding the ClusterProfiles. Runs until Ctrl-C.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Access-provider file (KEP-5339 JSON): which credential plugins may run.
    #[arg(long, value_name = "FILE", conflicts_with = "consumer")]
    provider_file: Option<PathBuf>,
    /// With --provider-file: a host pattern (`*.fleet.example.com`, `10.0.0.*`) of the API
    /// servers the plugins' credentials may be sent to; repeat for more. A profile naming
    /// another server is refused.
    #[arg(
        long = "allowed-server",
        value_name = "PATTERN",
        requires = "provider_file"
    )]
    allowed_servers: Vec<String>,
    /// Use the Secret strategy with this consumer name instead of a provider file.
    #[arg(long)]
    consumer: Option<String>,
    /// Only watch this namespace of the hub (default: all).
    #[arg(long)]
    namespace: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Act as a credential plugin (prints an ExecCredential; see src/plugin.rs). The demo's
    /// provider file runs this program this way.
    CredentialPlugin {
        /// `--token-file FILE`, `--token-dir DIR`, `--record FILE`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// The whole program: a cluster-inventory provider on `hub`, one controller.
pub fn manager(hub: kube::Client, opts: Options) -> Result<Manager> {
    let provider = ClusterInventoryProvider::new(hub.clone(), opts)?;
    let mgr = Manager::new(hub, Some(Arc::new(provider)));
    Controller::new(&mgr)
        .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=true")))
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
}

/// The strategy from the flags. The provider file is read and validated here, before anything
/// connects: a malformed file is a startup error naming the file and the problem.
fn strategy(
    provider_file: Option<&Path>,
    allowed_servers: Vec<String>,
    consumer: Option<String>,
) -> Result<Strategy> {
    match (provider_file, consumer) {
        (Some(path), None) => Ok(Strategy::AccessProviders(Arc::new(
            AccessProviders::from_file(path)?.servers(allowed_servers),
        ))),
        (None, Some(consumer)) => Ok(Strategy::Secret { consumer }),
        _ => bail!("give exactly one of --provider-file and --consumer"),
    }
}

async fn client(kubeconfig: &Path) -> Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kc, &options).await?;
    Ok(kube::Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> Result<std::process::ExitCode> {
    let args = Args::parse();
    if let Some(Command::CredentialPlugin { .. }) = args.command {
        // Plugins print only the ExecCredential on stdout: no logging set up here.
        return Ok(plugin::main());
    }
    example_support::logs::init("warn", example_support::logs::Output::Stdout);
    let Some(kubeconfig) = args.kubeconfig else {
        demo::run().await?;
        return Ok(std::process::ExitCode::SUCCESS);
    };
    let strategy = strategy(
        args.provider_file.as_deref(),
        args.allowed_servers,
        args.consumer,
    )?;
    let hub = client(&kubeconfig).await?;
    let namespaces = match args.namespace {
        Some(ns) => Namespaces::One(ns),
        None => Namespaces::default(),
    };
    println!("watching ClusterProfiles ({namespaces:?}); Ctrl-C to stop");
    let opts = Options {
        namespaces,
        ..Options::new(strategy)
    };
    manager(hub, opts)?.run().await?;
    Ok(std::process::ExitCode::SUCCESS)
}
