//! mcr example: the **Gardener provider**. Every ready Shoot of the garden's project
//! namespaces is a member, named `<namespace>/<name>`, reached with short-lived
//! `adminkubeconfig` credentials that are renewed in place before they expire.
//!
//! The controller stamps ConfigMaps labelled `mcr.example/demo=true` with the annotation
//! `mcr.example/reconciled-by: <cluster>`.
//!
//! ```text
//! cargo run -p example-gardener -- --garden-kubeconfig garden.yaml --namespace garden-dev
//! cargo run -p example-gardener                  # an embedded garden with 4-second credentials
//! ```

mod demo;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Parser;
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, Manager, WatchOptions};
use mcr_provider_gardener::{GardenerProvider, Namespaces, Options};

/// One controller over the Shoots of a Gardener garden.
///
/// With --garden-kubeconfig, runs against that garden until Ctrl-C. Without it, starts an
/// embedded garden whose Shoots hand out short-lived certificates, runs a scripted demo
/// through several renewals and exits.
#[derive(Parser, Debug)]
#[command(name = "example-gardener", version, about)]
struct Args {
    /// Kubeconfig of the garden cluster (the Gardener API).
    #[arg(long, value_name = "FILE")]
    garden_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the manager's own (host) cluster. Default: the garden's.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Only Shoots in this project namespace (repeatable). Default: every namespace.
    #[arg(long)]
    namespace: Vec<String>,
    /// Requested lifetime of the credentials, in seconds.
    #[arg(long, default_value_t = 3600)]
    expiration_seconds: u64,
}

/// The whole program: `provider` and one controller.
pub fn manager(host: kube::Client, provider: GardenerProvider) -> Result<Manager> {
    let mgr = Manager::new(host, Some(Arc::new(provider)));
    Controller::new(&mgr)
        .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=true")))
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
}

async fn client(path: &PathBuf) -> Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> Result<()> {
    example_support::logs::init("warn", example_support::logs::Output::Stdout);
    let args = Args::parse();
    let Some(garden_kubeconfig) = args.garden_kubeconfig else {
        return demo::run().await;
    };
    let garden = client(&garden_kubeconfig).await?;
    let host = match &args.kubeconfig {
        Some(path) => client(path).await?,
        None => garden.clone(),
    };
    let namespaces = match args.namespace.len() {
        0 => Namespaces::AllExcept(Vec::new()),
        1 => Namespaces::One(args.namespace[0].clone()),
        _ => Namespaces::List(args.namespace),
    };
    let provider = GardenerProvider::new(
        garden,
        Options {
            namespaces,
            expiration: Duration::from_secs(args.expiration_seconds),
            ..Options::default()
        },
    );
    println!("engaging the garden's Shoots; Ctrl-C to stop");
    manager(host, provider)?.run().await?;
    Ok(())
}
