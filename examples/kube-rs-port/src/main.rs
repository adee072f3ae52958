//! mcr example: **porting a kube-runtime controller**. `src/single.rs` is an ordinary
//! kube-runtime controller for one cluster; `src/multi.rs` is the same reconciler on mcr,
//! reconciling every cluster of a directory of kubeconfigs. `diff src/single.rs src/multi.rs`
//! shows everything that changes: `Data` is built per cluster (so its client is the object's
//! cluster) and the wiring takes a `Manager` (host client + provider, built in `main.rs` as the
//! single version's client is) instead of an `Api`.
//!
//! Both stamp ConfigMaps labelled `mcr.example/port=true` with `mcr.example/reconciled: "true"`.
//!
//! ```text
//! cargo run -p example-kube-rs-port -- single                       # embedded cluster, demo
//! cargo run -p example-kube-rs-port -- multi                        # embedded fleet, demo
//! cargo run -p example-kube-rs-port -- single --kubeconfig ~/.kube/config
//! cargo run -p example-kube-rs-port -- multi --kubeconfig host.kubeconfig --kubeconfig-dir ./members
//! ```

mod multi;
mod single;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, ValueEnum};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::Manager;
use mcr_provider_file::{FileProvider, Options};

/// The label selecting the ConfigMaps both controllers reconcile.
pub const SELECTOR: &str = "mcr.example/port=true";
/// The annotation both controllers write.
pub const ANNOTATION: &str = "mcr.example/reconciled";

/// The reconciler's error, shared by both versions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    /// The kube-runtime controller (src/single.rs), one cluster.
    Single,
    /// The same reconciler on mcr (src/multi.rs), every cluster of a kubeconfig directory.
    Multi,
}

/// One reconciler, two runtimes: kube-runtime for one cluster, mcr for a fleet.
///
/// Without --kubeconfig (single) or --kubeconfig-dir (multi), starts emulated clusters, checks
/// the controller's effect on them and exits.
#[derive(Parser, Debug)]
#[command(name = "example-kube-rs-port", version, about)]
struct Args {
    /// Which version to run.
    #[arg(value_enum)]
    mode: Mode,
    /// single: the cluster's kubeconfig. multi: the host cluster's kubeconfig.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// multi: directory of member kubeconfigs.
    #[arg(long, value_name = "DIR")]
    kubeconfig_dir: Option<PathBuf>,
}

async fn client(kubeconfig: Option<PathBuf>) -> Result<kube::Client> {
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

/// The fleet of the mcr version: the host cluster's client and a provider (here: every
/// kubeconfig file of `dir`), as the single version gets its one client.
fn fleet_manager(host: kube::Client, dir: PathBuf) -> Manager {
    let provider = FileProvider::new(Options {
        dirs: vec![dir],
        ..Options::default()
    });
    Manager::new(host, Some(Arc::new(provider)))
}

/// Creates a labelled ConfigMap and waits until the running controller stamped it.
async fn check(cluster: &TestCluster) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let mut cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("demo".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    cm.labels_mut()
        .insert("mcr.example/port".into(), "true".into());
    api.create(&PostParams::default(), &cm).await?;
    let start = tokio::time::Instant::now();
    while !api
        .get("demo")
        .await?
        .annotations()
        .contains_key(ANNOTATION)
    {
        if start.elapsed() > Duration::from_secs(30) {
            bail!(
                "default/demo in {} was not reconciled within 30s",
                cluster.name()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("{}: default/demo stamped {ANNOTATION}=true", cluster.name());
    Ok(())
}

async fn demo(mode: Mode) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (controller, clusters, _host) = match mode {
        Mode::Single => {
            let cluster = TestCluster::start("single").await?;
            (
                tokio::spawn(single::run(cluster.client())),
                vec![cluster],
                None,
            )
        }
        Mode::Multi => {
            let fleet = Fleet::builder()
                .clusters(2)
                .kubeconfig_dir(dir.path())
                .start()
                .await?;
            let host = TestCluster::start("host").await?;
            let run = multi::run(fleet_manager(host.client(), dir.path().to_path_buf()));
            (
                tokio::spawn(run),
                fleet.clusters().to_vec(),
                Some((host, fleet)),
            )
        }
    };
    let result = async {
        for cluster in &clusters {
            check(cluster).await?;
        }
        anyhow::Ok(())
    }
    .await;
    controller.abort();
    result?;
    println!("done ({mode:?})");
    Ok(())
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
    match (args.mode, args.kubeconfig, args.kubeconfig_dir) {
        (Mode::Single, Some(path), _) => single::run(client(Some(path)).await?).await,
        (Mode::Multi, host, Some(dir)) => multi::run(fleet_manager(client(host).await?, dir)).await,
        (mode, _, _) => demo(mode).await,
    }
}
