//! Three replicas of one controller sharing an embedded fleet (sharded mode), or one replica
//! per process, as deployed.
//!
//! ```text
//! cargo run -p example-sharded                    # 6 clusters, 3 replicas, one killed
//! cargo run -p example-sharded -- --clusters 9
//! RUST_LOG=info cargo run -p example-sharded      # the runtime's logs, handoffs included
//! ```
//!
//! `mcr-envtest` starts the clusters and writes one kubeconfig file per cluster; every
//! replica runs the **file provider** over that directory and the same controller, which
//! stamps each ConfigMap with `mcr.example/reconciled-by: <replica>`. The replicas announce
//! themselves with Leases on the host cluster and split the fleet by rendezvous hashing: the
//! example prints who owns what, kills one replica (its runtime is shut down: no goodbye, its
//! Lease just stops being renewed) and shows the other two take its clusters over once its
//! Lease has expired, and reconcile a ConfigMap written in every cluster afterwards.
//!
//! # One replica per process
//!
//! `example-sharded replica` runs one replica, the way it is deployed: start one per process
//! (or Pod), each with its own `--id`, the same `--group`, a host for the Leases and the same
//! fleet directory (one kubeconfig file per member):
//!
//! ```text
//! cargo run -p mcr-envtest --features cli -- --clusters 1 --name-prefix host --kubeconfig-dir ./host
//! cargo run -p mcr-envtest --features cli -- --clusters 6 --kubeconfig-dir ./fleet
//! example-sharded replica --id replica-1 --host-kubeconfig host/host-1.kubeconfig --fleet-dir ./fleet
//! example-sharded replica --id replica-2 --host-kubeconfig host/host-1.kubeconfig --fleet-dir ./fleet --weight 2
//! ```
//!
//! It runs until SIGTERM or Ctrl-C (or, with `--stop-on-stdin-close`, until its standard input
//! closes), then stops cleanly: it releases its clusters and deletes its Lease, so the others
//! take them over at once. A replica killed instead (`kill -9`) is taken over after the lease
//! duration (`--lease-duration`, default 15 s). `tests/processes.rs` runs three replica
//! processes this way, on the emulator and on real control planes (`MCR_ENVTEST=real`).

mod replica;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use example_support::stamp::{ANNOTATION, stamp};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use mcr_core::ClusterName;
use mcr_core::Ownership;
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::{Context, Controller, Manager, Sharding};
use mcr_provider_file::{FileProvider, Options};
use tokio_util::sync::CancellationToken;

/// Three replicas sharing an embedded fleet; one is killed. `replica`: one replica, in this
/// process.
#[derive(Parser, Debug)]
#[command(name = "example-sharded", version, about, long_about = None)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// How many member clusters.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u16).range(1..=30))]
    clusters: u16,
    /// How long each step may take before the example fails.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    step_timeout: u64,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one replica over a fleet directory until SIGTERM or Ctrl-C.
    Replica(replica::Args),
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    example_support::logs::init("error", example_support::logs::Output::Stderr);
    let result = match args.command {
        Some(Command::Replica(replica)) => replica::run(replica).await,
        None => run(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("example-sharded failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Stamps the ConfigMap with the name of the replica that reconciled it.
async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<String>) -> Result<Action, kube::Error> {
    stamp(&cm, &ctx, ctx.data()).await
}

fn error_policy(_: Arc<ConfigMap>, err: &kube::Error, ctx: Context<String>) -> Action {
    tracing::warn!(cluster = %ctx.cluster_name(), error = %err, "reconcile failed");
    Action::requeue(Duration::from_secs(1))
}

/// One replica: the file provider over the kubeconfig files in `dir`, and the controller that
/// stamps every ConfigMap with the replica's identity, sharded by `sharding`.
fn manager(host: kube::Client, dir: PathBuf, sharding: Sharding) -> Result<Manager> {
    let id = sharding.identity_str().to_owned();
    let provider = FileProvider::new(Options {
        dirs: vec![dir],
        ..Options::default()
    });
    let mgr = Manager::builder(host)
        .provider(Arc::new(provider))
        .sharding(sharding)
        .build();
    Controller::new(&mgr)
        .named("stamp")
        .for_::<ConfigMap>()
        .register(reconcile, error_policy, Arc::new(id))?;
    Ok(mgr)
}

/// One replica, on its own runtime (killing it shuts the runtime down).
struct Replica {
    id: String,
    mgr: Manager,
    token: CancellationToken,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Replica {
    async fn start(id: &str, host: &TestCluster, dir: &Path) -> Result<Replica> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(id)
            .enable_all()
            .build()?;
        let (host, dir, id2) = (host.clone(), dir.to_path_buf(), id.to_owned());
        // Built on the replica's runtime, so its clients' tasks die with it.
        let mgr = runtime
            .spawn(async move {
                let sharding = Sharding::new("example")
                    .identity(&id2)
                    .lease_duration(Duration::from_secs(4))
                    .renew_deadline(Duration::from_secs(3))
                    .renew_period(Duration::from_secs(1));
                manager(host.client(), dir, sharding)
            })
            .await??;
        let token = CancellationToken::new();
        runtime.spawn({
            let (mgr, token) = (mgr.clone(), token.clone());
            async move { mgr.run_until(token).await }
        });
        Ok(Replica {
            id: id.to_owned(),
            mgr,
            token,
            runtime: Some(runtime),
        })
    }

    /// Killed: everything it runs is dropped at once.
    fn kill(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.token.cancel();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Who engaged what, if each of the `n` members is engaged by exactly one replica. Keyed by
/// the name the provider engaged each member under: opaque (the file provider's is
/// `<path>+<context>`), compared whole and printed with [`ClusterName::key`].
fn ownership(replicas: &[&Replica], n: usize) -> Option<BTreeMap<ClusterName, String>> {
    let mut owners = BTreeMap::new();
    for r in replicas {
        for name in r.mgr.engaged_clusters() {
            if owners.insert(name, r.id.clone()).is_some() {
                return None;
            }
        }
    }
    (owners.len() == n).then_some(owners)
}

/// Waits until every member is engaged by exactly one replica and each replica knows all `n`
/// members, has engaged just what it owns and takes every other member for one of the
/// others' (so every replica sees all the others); returns who owns what.
async fn settled(
    replicas: &[&Replica],
    n: usize,
    deadline: Duration,
) -> Result<BTreeMap<ClusterName, String>> {
    let ids: Vec<&str> = replicas.iter().map(|r| r.id.as_str()).collect();
    let until = Instant::now() + deadline;
    loop {
        let agreed = replicas.iter().all(|r| {
            let engaged: BTreeSet<ClusterName> = r.mgr.engaged_clusters().into_iter().collect();
            // The members this replica knows: engaged here, or reported by its provider.
            let known: BTreeSet<ClusterName> = r
                .mgr
                .member_statuses()
                .into_iter()
                .map(|m| m.name)
                .chain(engaged.iter().cloned())
                .collect();
            known.len() == n
                && known.iter().all(|name| match r.mgr.fleet().owner(name) {
                    Ownership::Owned => engaged.contains(name),
                    Ownership::Elsewhere { owner } => {
                        !engaged.contains(name)
                            && owner.is_some_and(|o| o != r.id && ids.contains(&o.as_str()))
                    }
                })
        });
        if agreed && let Some(owners) = ownership(replicas, n) {
            return Ok(owners);
        }
        if Instant::now() > until {
            bail!("the replicas did not settle within {deadline:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn print_owners(owners: &BTreeMap<ClusterName, String>) {
    for (cluster, owner) in owners {
        println!("      {:<44} owned by {owner}", cluster.key());
    }
}

async fn run(args: Args) -> Result<()> {
    let n = usize::from(args.clusters);
    let deadline = Duration::from_secs(args.step_timeout);
    println!("mcr sharded: 3 replicas of one controller share {n} clusters");
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let fleet = Fleet::builder()
        .clusters(n)
        .kubeconfig_dir(dir.path())
        .start()
        .await
        .context("starting the fleet")?;
    let host = TestCluster::start("host").await?;
    println!("[1/4] started {n} clusters and a host cluster for the replicas' Leases");

    let mut replicas = Vec::new();
    for id in ["replica-1", "replica-2", "replica-3"] {
        replicas.push(Replica::start(id, &host, dir.path()).await?);
    }
    let owners = settled(&replicas.iter().collect::<Vec<_>>(), n, deadline).await?;
    println!("[2/4] every cluster is owned by exactly one replica:");
    print_owners(&owners);

    // The replica that owns the most clusters.
    let count = |id: &str| owners.values().filter(|o| *o == id).count();
    let victim = (0..replicas.len())
        .max_by_key(|&i| count(&replicas[i].id))
        .unwrap_or(0);
    let victim = replicas.remove(victim);
    let (lost, id) = (count(&victim.id), victim.id.clone());
    let killed = Instant::now();
    victim.kill();
    println!("[3/4] killed {id} (it owned {lost} clusters); waiting for its Lease to expire");
    let owners = settled(&replicas.iter().collect::<Vec<_>>(), n, deadline).await?;
    println!(
        "      {} and {} took over after {:.1}s:",
        replicas[0].id,
        replicas[1].id,
        killed.elapsed().as_secs_f64()
    );
    print_owners(&owners);

    println!("[4/4] a ConfigMap in every cluster, reconciled by its owner");
    for c in fleet.clusters() {
        let api: Api<ConfigMap> = Api::namespaced(c.client(), "default");
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some("after-the-kill".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm).await?;
    }
    // Read back through each member's owner: the manager hands out the clusters it engaged.
    let until = Instant::now() + deadline;
    for (name, want) in &owners {
        let owner = replicas
            .iter()
            .find(|r| &r.id == want)
            .context("an owner that is not running")?;
        let cluster = owner.mgr.cluster(name).await?;
        let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
        loop {
            let cm = api.get("after-the-kill").await?;
            if cm.annotations().get(ANNOTATION) == Some(want) {
                println!("      {:<44} reconciled by {want}", name.key());
                break;
            }
            if Instant::now() > until {
                bail!("{}: not reconciled by {want}", name.key());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    println!("example-sharded finished: no cluster left behind.");
    drop(replicas);
    Ok(())
}
