//! mcr example: the **multi provider**. Two sources of clusters in one manager, each under a
//! prefix: `files#<file>+<context>` from a directory of kubeconfigs, and `secrets#<name>` from
//! labelled kubeconfig Secrets in the host cluster.
//!
//! The controller stamps ConfigMaps labelled `mcr.example/demo=true` with
//! `mcr.example/reconciled-by: <cluster>`.
//!
//! ```text
//! cargo run -p example-multi                    # embedded host + 2 members, scripted demo
//! cargo run -p example-multi -- --kubeconfig host.kubeconfig --kubeconfig-dir ./members
//! ```

mod demo;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use clap::Parser;
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, Manager, WatchOptions};
use mcr_provider_file::FileProvider;
use mcr_provider_kubeconfig::KubeconfigProvider;
use mcr_provider_multi::MultiProvider;

/// One controller over clusters from kubeconfig files and from kubeconfig Secrets.
///
/// Without --kubeconfig-dir, starts an emulated host and two members, runs a short scripted
/// demo and exits.
#[derive(Parser, Debug)]
#[command(name = "example-multi", version, about)]
struct Args {
    /// Directory of member kubeconfigs: clusters `files#...`. Runs until Ctrl-C.
    #[arg(long, value_name = "DIR")]
    kubeconfig_dir: Option<PathBuf>,
    /// Kubeconfig of the host, whose labelled Secrets in `default` are clusters `secrets#...`.
    /// Default: the usual kube-rs lookup.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

/// The whole program: files under `files#`, Secrets under `secrets#`, one controller.
pub async fn manager(host: kube::Client, dir: PathBuf) -> Result<Manager> {
    let files = FileProvider::new(mcr_provider_file::Options {
        dirs: vec![dir],
        ..Default::default()
    });
    let secrets = KubeconfigProvider::new(host.clone(), Default::default());
    let multi = MultiProvider::new();
    multi.add("files", Arc::new(files)).await?;
    multi.add("secrets", Arc::new(secrets)).await?;
    let mgr = Manager::new(host, Some(Arc::new(multi)));
    Controller::new(&mgr)
        .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=true")))
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
}

#[tokio::main]
async fn main() -> Result<()> {
    example_support::logs::init("warn", example_support::logs::Output::Stdout);
    let args = Args::parse();
    match args.kubeconfig_dir {
        Some(dir) => {
            let config = match args.kubeconfig {
                Some(path) => {
                    let kc = kube::config::Kubeconfig::read_from(&path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
                }
                None => kube::Config::infer().await?,
            };
            let host = kube::Client::try_from(config)?;
            println!(
                "clusters from {} and from Secrets; Ctrl-C to stop",
                dir.display()
            );
            manager(host, dir).await?.run().await?;
            Ok(())
        }
        None => demo::run().await,
    }
}
