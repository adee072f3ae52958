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
//! cargo run -p example-kubeconfig -- --kubeconfig host.kubeconfig --watch-namespace team-a
//!     # members that grant only a Role in team-a
//! example-kubeconfig --in-cluster --namespace mcr-system \
//!     --leader-election-id example-kubeconfig --metrics-bind-address 0.0.0.0:8080  # in a Pod (deploy/)
//! example-kubeconfig --in-cluster  # in a Pod of charts/mcr-controller: the rest from the
//!                                  # environment (mcr_manager::DeploymentEnv)
//! cargo run -p example-kubeconfig -- create-secret \
//!     --member-kubeconfig member.kubeconfig --host-kubeconfig host.kubeconfig --name member-1
//! ```

mod create_secret;
mod demo;

use std::path::{Path, PathBuf};
use std::{sync::Arc, time::Duration};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use example_support::stamp::{ANNOTATION, LABEL, error_policy, reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, DeploymentEnv, LeaderElection, Manager, Sharding, WatchOptions};
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
    /// Use the Pod's ServiceAccount (in-cluster config) for the host. Runs until stopped.
    #[arg(long, conflicts_with = "kubeconfig")]
    in_cluster: bool,
    /// Namespace of the Secrets in the host cluster (default: `$MCR_NAMESPACE`, else
    /// `default`).
    #[arg(long)]
    namespace: Option<String>,
    /// Lead through the Lease of this name (in --namespace) before running anything; replicas
    /// without the Lease wait.
    #[arg(long, value_name = "NAME")]
    leader_election_id: Option<String>,
    /// Shard the fleet with the other replicas of this group (peer Leases in --namespace):
    /// each member is engaged by one replica. See `deploy/components/sharding`.
    #[arg(long, value_name = "GROUP")]
    shard_group: Option<String>,
    /// This replica's identity in the shard group (default: `$POD_NAME` or `$HOSTNAME` plus a
    /// random suffix).
    #[arg(long, value_name = "ID", requires = "shard_group")]
    shard_identity: Option<String>,
    /// Lease duration in seconds, for leader election and sharding (renew deadline 2/3 of
    /// it, retry and renew period 1/5 of it).
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..))]
    lease_duration_seconds: u64,
    /// Serve `/metrics`, `/healthz`, `/readyz` and `/clusters` on this address.
    #[arg(long, value_name = "ADDR")]
    metrics_bind_address: Option<std::net::SocketAddr>,
    /// Watch ConfigMaps in the members only in this namespace (repeat for several): one
    /// namespaced watch each, which a Role there allows. Default: every namespace, which
    /// needs a ClusterRole in each member.
    #[arg(long = "watch-namespace", value_name = "NS")]
    watch_namespaces: Vec<String>,
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
    manager_with(host, namespace, Deployment::default())
}

/// How the program runs when deployed (see `deploy/`): leader election and the HTTP endpoints.
#[derive(Debug, Default)]
pub struct Deployment {
    /// Lead through this Lease (in the Secrets' namespace) before running anything.
    pub leader_election: Option<LeaderElection>,
    /// Shard the fleet with the other replicas of a group.
    pub sharding: Option<Sharding>,
    /// Serve `/metrics`, `/healthz`, `/readyz` and `/clusters` here.
    pub metrics_address: Option<std::net::SocketAddr>,
    /// Watch only these namespaces (empty: every namespace).
    pub watch_namespaces: Vec<String>,
}

/// [`manager`] with the deployment settings of `deploy`.
pub fn manager_with(host: kube::Client, namespace: &str, deploy: Deployment) -> Result<Manager> {
    let provider = KubeconfigProvider::new(
        host.clone(),
        Options {
            namespaces: Namespaces::One(namespace.to_owned()),
            ..Options::default()
        },
    );
    let mut builder = Manager::builder(host)
        .provider(Arc::new(provider))
        .default_namespaces(deploy.watch_namespaces);
    if let Some(le) = deploy.leader_election {
        builder = builder.leader_election(le);
    }
    if let Some(sharding) = deploy.sharding {
        builder = builder.sharding(sharding);
    }
    if let Some(addr) = deploy.metrics_address {
        builder = builder.metrics_address(addr);
    }
    let mgr = builder.build();
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

/// Runs the manager on `host` until Ctrl-C / SIGTERM. Flags win; without a mode flag
/// (`--leader-election-id`, `--shard-group`), the mode comes from the environment the chart
/// sets ([`DeploymentEnv`]), as do the namespace and metrics address when not given.
async fn serve(host: kube::Client, args: &Args) -> Result<()> {
    let env = DeploymentEnv::from_env()?;
    let namespace = args
        .namespace
        .clone()
        .or(env.namespace)
        .unwrap_or_else(|| "default".to_owned());
    let lease = Duration::from_secs(args.lease_duration_seconds);
    let leader_election = args.leader_election_id.as_ref().map(|id| {
        LeaderElection::new(id.clone(), namespace.clone())
            .lease_duration(lease)
            .renew_deadline(lease * 2 / 3)
            .retry_period(lease / 5)
    });
    let sharding = args.shard_group.as_ref().map(|group| {
        let sharding = Sharding::new(group.clone())
            .namespace(namespace.clone())
            .lease_duration(lease)
            .renew_deadline(lease * 2 / 3)
            .renew_period(lease / 5);
        match &args.shard_identity {
            Some(id) => sharding.identity(id.clone()),
            None => sharding,
        }
    });
    let (leader_election, sharding) = if leader_election.is_some() || sharding.is_some() {
        (leader_election, sharding)
    } else {
        (env.leader_election, env.sharding)
    };
    let deploy = Deployment {
        leader_election,
        sharding,
        metrics_address: args.metrics_bind_address.or(env.metrics_address),
        watch_namespaces: args.watch_namespaces.clone(),
    };
    println!("watching kubeconfig Secrets in namespace {namespace}; Ctrl-C to stop");
    manager_with(host, &namespace, deploy)?.run().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    example_support::logs::init("warn", example_support::logs::Output::Stdout);
    let mut args = Args::parse();
    match (args.command.take(), args.kubeconfig.clone()) {
        (Some(Command::CreateSecret(cmd)), _) => create_secret::run(cmd).await,
        (None, Some(path)) => serve(client(Some(&path), None).await?, &args).await,
        (None, None) if args.in_cluster => {
            let config = kube::Config::incluster().context("reading the in-cluster config")?;
            serve(kube::Client::try_from(config)?, &args).await
        }
        (None, None) => demo::run().await,
    }
}
