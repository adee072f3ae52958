//! mcr example: the **Cluster API provider**. Every ready `cluster.x-k8s.io` `Cluster` in the
//! management cluster becomes a member named `<namespace>/<name>`, reached through its
//! `<name>-kubeconfig` Secret.
//!
//! The controller stamps ConfigMaps labelled `mcr.example/demo=true` in every workload cluster
//! with `mcr.example/reconciled-by: <cluster name>`.
//!
//! ```text
//! cargo run -p example-capi                                  # embedded fleet, scripted demo
//! cargo run -p example-capi -- --kubeconfig mgmt.kubeconfig  # real management cluster
//! cargo run -p example-capi -- --kubeconfig mgmt.kubeconfig --namespace tenant-a --namespace tenant-b
//! cargo run -p example-capi -- --kubeconfig mgmt.kubeconfig --exclude-namespace tenant-a
//! ```

mod demo;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use clap::{Parser, ValueEnum};
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::scope::Namespaces;
use mcr_manager::{Controller, Manager, WatchOptions};
use mcr_provider_capi::{CapiProvider, CapiVersion, Options, WATCH_FILTER_LABEL};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Version {
    V1beta1,
    V1beta2,
}

/// One controller over the workload clusters of Cluster API `Cluster` objects.
///
/// Without --kubeconfig, starts an embedded management cluster and two workload clusters
/// (emulated), runs a short scripted demo and exits.
#[derive(Parser, Debug)]
#[command(name = "example-capi", version, about)]
struct Args {
    /// Kubeconfig of the management cluster. Runs until Ctrl-C.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Cluster API version of the Cluster objects.
    #[arg(long, value_enum, default_value = "v1beta2")]
    api_version: Version,
    /// Watch only this namespace (repeatable). Default: every namespace.
    #[arg(long = "namespace", value_name = "NS")]
    namespaces: Vec<String>,
    /// Do not watch this namespace (repeatable); wins over --namespace.
    #[arg(long = "exclude-namespace", value_name = "NS")]
    excluded: Vec<String>,
    /// Only Clusters labelled cluster.x-k8s.io/watch-filter=VALUE.
    #[arg(long, value_name = "VALUE")]
    watch_filter: Option<String>,
}

/// The whole program: a Cluster API provider on `host`, one controller.
pub fn manager(host: kube::Client, opts: Options) -> Result<Manager> {
    let provider = CapiProvider::new(host.clone(), opts);
    let mgr = Manager::new(host, Some(Arc::new(provider)));
    Controller::new(&mgr)
        .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{LABEL}=true")))
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
}

fn options(args: &Args) -> Result<Options> {
    let namespaces = Namespaces::from_lists(args.namespaces.clone(), args.excluded.clone())
        .context("--namespace / --exclude-namespace")?;
    Ok(Options {
        version: match args.api_version {
            Version::V1beta1 => CapiVersion::V1Beta1,
            Version::V1beta2 => CapiVersion::V1Beta2,
        },
        namespaces,
        label_selector: args
            .watch_filter
            .as_ref()
            .map(|v| format!("{WATCH_FILTER_LABEL}={v}")),
        ..Options::default()
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    example_support::logs::init("warn", example_support::logs::Output::Stdout);
    let args = Args::parse();
    let opts = options(&args)?;
    match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
            let host = kube::Client::try_from(config)?;
            println!(
                "watching Cluster API Clusters ({:?}); Ctrl-C to stop",
                opts.namespaces
            );
            manager(host, opts)?.run().await?;
            Ok(())
        }
        None => demo::run(opts).await,
    }
}
