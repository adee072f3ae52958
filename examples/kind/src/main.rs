//! mcr example: the **kind provider**. Every local kind cluster whose name starts with a prefix
//! (`fleet-` by default) is a member; clusters created or deleted with `kind` join or leave
//! while it runs.
//!
//! The controller stamps ConfigMaps labelled `mcr.example/demo=true` with the annotation
//! `mcr.example/reconciled-by: <cluster>` (the kind cluster name).
//!
//! ```text
//! kind create cluster --name fleet-alpha; kind create cluster --name fleet-beta
//! cargo run -p example-kind                      # kind on PATH: its clusters, until Ctrl-C
//! cargo run -p example-kind -- --demo            # no kind needed: a stand-in kind over an embedded fleet
//! ```

mod demo;
mod fake_kind;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Parser;
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, Manager, WatchOptions};
use mcr_provider_kind::{DEFAULT_KIND_BIN, KindProvider, Options};

/// One controller over every local kind cluster named `<prefix>*`.
///
/// With `kind` on PATH (or --kind-bin), runs against those clusters until Ctrl-C. Without
/// kind, or with --demo, starts an embedded fleet of emulated clusters behind a stand-in
/// `kind`, runs a short scripted demo and exits.
#[derive(Parser, Debug)]
#[command(name = "example-kind", version, about)]
struct Args {
    /// The `kind` executable. Default: `kind` from PATH.
    #[arg(long, value_name = "PATH")]
    kind_bin: Option<PathBuf>,
    /// Only kind clusters whose name starts with this join.
    #[arg(long, default_value = "fleet-")]
    prefix: String,
    /// Kubeconfig of the manager's own (host) cluster. Default: the usual kube-rs lookup.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Run the embedded demo (no kind, no Docker) even when kind is installed.
    #[arg(long, conflicts_with = "kind_bin")]
    demo: bool,
}

/// The whole program: a kind provider with `opts`, one controller.
pub fn manager(host: kube::Client, opts: Options) -> Result<Manager> {
    let mgr = Manager::new(host, Some(Arc::new(KindProvider::new(opts))));
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
        None => kube::Config::infer()
            .await
            .context("no host cluster: pass --kubeconfig or set up ~/.kube/config")?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// Whether `kind` answers on PATH.
async fn kind_on_path() -> bool {
    let run = tokio::process::Command::new(DEFAULT_KIND_BIN)
        .arg("version")
        .kill_on_drop(true)
        .output();
    matches!(tokio::time::timeout(Duration::from_secs(10), run).await, Ok(Ok(out)) if out.status.success())
}

#[tokio::main]
async fn main() -> Result<()> {
    example_support::logs::init("warn", example_support::logs::Output::Stdout);
    let args = Args::parse();
    if args.demo {
        return demo::run().await;
    }
    if args.kind_bin.is_none() && !kind_on_path().await {
        println!(
            "`kind` is not on PATH: running the embedded demo instead (a stand-in kind over \
             emulated clusters). To use real clusters, {}.",
            mcr_provider_kind::INSTALL_HINT
        );
        return demo::run().await;
    }
    let host = host_client(args.kubeconfig).await?;
    let opts = Options {
        prefix: Some(args.prefix.clone()),
        kind_bin: args.kind_bin,
        ..Options::default()
    };
    println!(
        "watching kind clusters named {}* (create one with `kind create cluster --name {}alpha`); Ctrl-C to stop",
        args.prefix, args.prefix
    );
    manager(host, opts)?.run().await?;
    Ok(())
}
