//! mcr example: the **namespace provider**. Every namespace of one cluster is a virtual
//! cluster named after the namespace, in which the namespace looks like `default`.
//!
//! The controller stamps ConfigMaps labelled `mcr.example/demo=true` with
//! `mcr.example/reconciled-by: <namespace>`. It is written as for any fleet: it only ever
//! sees "the `default` namespace of cluster `team-a`".
//!
//! ```text
//! cargo run -p example-namespace                                   # embedded cluster, demo
//! cargo run -p example-namespace -- --kubeconfig ~/.kube/config --selector tenant=true
//! ```

mod demo;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use clap::Parser;
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::Cluster;
use mcr_manager::{Controller, Manager, WatchOptions};
use mcr_provider_namespace::{NamespaceProvider, Options};

/// One controller over the namespaces of one cluster, each a virtual cluster.
///
/// Without --kubeconfig, starts an emulated cluster, runs a short scripted demo and exits.
#[derive(Parser, Debug)]
#[command(name = "example-namespace", version, about)]
struct Args {
    /// Kubeconfig of the cluster whose namespaces become clusters. Runs until Ctrl-C.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Only namespaces matching this label selector become clusters.
    #[arg(long)]
    selector: Option<String>,
}

/// The whole program: a namespace provider over `client`'s cluster, one controller.
pub fn manager(client: kube::Client, selector: Option<String>) -> Result<Manager> {
    // One host cluster shared by the manager and the provider: one set of host watches.
    let host = Cluster::new(mcr_core::ClusterName::host(), client);
    let provider = NamespaceProvider::new(
        host.clone(),
        Options {
            label_selector: selector,
            ..Options::default()
        },
    );
    let mgr = Manager::builder_with_host(host)
        .provider(Arc::new(provider))
        .build();
    Controller::new(&mgr)
        .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=true")))
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
}

#[tokio::main]
async fn main() -> Result<()> {
    example_support::logs::init("warn", example_support::logs::Output::Stdout);
    let args = Args::parse();
    match args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
            let client = kube::Client::try_from(config)?;
            println!("every namespace is a cluster; Ctrl-C to stop");
            manager(client, args.selector)?.run().await?;
            Ok(())
        }
        None => demo::run().await,
    }
}
