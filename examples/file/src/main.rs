//! mcr example: the **file provider**. Every context of every kubeconfig file in a directory
//! is a cluster; files that appear or disappear add or remove clusters while it runs.
//!
//! The controller stamps ConfigMaps labelled `mcr.example/demo=true` with the annotation
//! `mcr.example/reconciled-by: <cluster>` (for this provider the cluster name is
//! `<file>+<context>`).
//!
//! ```text
//! cargo run -p example-file                                   # embedded fleet, scripted demo
//! cargo run -p example-file -- --kubeconfig-dir ~/fleet       # real clusters, until Ctrl-C
//! ```

mod demo;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use clap::Parser;
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, Manager, WatchOptions};
use mcr_provider_file::{FileProvider, Options};

/// One controller over every cluster of a directory of kubeconfig files.
///
/// Without --kubeconfig-dir, starts an embedded fleet of emulated clusters, runs a short
/// scripted demo against it and exits.
#[derive(Parser, Debug)]
#[command(name = "example-file", version, about)]
struct Args {
    /// Directory of member kubeconfigs (`*.kubeconfig`, `kubeconfig.yaml`, ...). Runs until Ctrl-C.
    #[arg(long, value_name = "DIR")]
    kubeconfig_dir: Option<PathBuf>,
    /// Kubeconfig of the manager's own (host) cluster. Default: the usual kube-rs lookup.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

/// The whole program against real clusters: a file provider over `dir`, one controller.
pub fn manager(host: kube::Client, dir: PathBuf) -> Result<Manager> {
    let provider = FileProvider::new(Options {
        dirs: vec![dir],
        ..Options::default()
    });
    let mgr = Manager::new(host, Some(Arc::new(provider)));
    Controller::new(&mgr)
        .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=true")))
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
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
    example_support::logs::init("warn", example_support::logs::Output::Stdout);
    let args = Args::parse();
    match args.kubeconfig_dir {
        Some(dir) => {
            let host = host_client(args.kubeconfig).await?;
            println!("watching {} for kubeconfigs; Ctrl-C to stop", dir.display());
            manager(host, dir)?.run().await?;
            Ok(())
        }
        None => demo::run().await,
    }
}
