//! mcr webhooks: one HTTPS server validating ConfigMaps on the host and on every member of an
//! embedded fleet.
//!
//! ```text
//! cargo run -p example-webhook                    # emulated clusters: reviews sent by hand
//! MCR_ENVTEST=real KUBEBUILDER_ASSETS=... \
//!     cargo run -p example-webhook                # real kube-apiservers call the webhook
//! cargo run -p example-webhook -- --clusters 3
//! cargo run -p example-webhook -- --clusters 4 --replicas 2   # a sharded fleet
//! ```
//!
//! What happens: `mcr-envtest` starts a host cluster and N members; a manager engages the
//! members. One validator (`data.replicas` must be a number from 0 to 10) is registered with
//! [`mcr_webhook::Webhooks`] and served over HTTPS by [`mcr_webhook::Server`], with a
//! certificate written to files (cert-manager's job in a real deployment; the server reloads
//! them when they change). The host answers on `/validate--v1-configmap`, member `m` on
//! `/clusters/m/validate--v1-configmap`, and the handler is handed that member's cluster.
//!
//! On real control planes, the host gets a `ValidatingWebhookConfiguration` pointing at the
//! server and [`mcr_webhook::MemberConfigurations`] writes one into each member as it is
//! engaged; then an invalid ConfigMap is created in every cluster and refused by its own
//! kube-apiserver. The emulator does not call webhooks, so there the example sends each
//! cluster's route the `AdmissionReview` kube-apiserver would send.
//!
//! With `--replicas R` (R > 1) the fleet is sharded across R managers, each with its own
//! server (its own URL, as a per-pod DNS name would be in a cluster): each replica writes its
//! own URL into the members it owns, so every member's apiserver calls the member's owner. On
//! the emulator the example reads the URL from each member's configuration and sends the review
//! there, as the apiserver would.

mod review;

use std::{collections::BTreeMap, process::ExitCode, sync::Arc, time::Duration};

use anyhow::{Context as _, Result, bail};
use clap::Parser;
use k8s_openapi::api::{
    admissionregistration::v1::ValidatingWebhookConfiguration, core::v1::ConfigMap,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::{Manager, Sharding};
use mcr_webhook::{
    CertificateReloader, ConfigOptions, Denied, MemberConfigurations, Server, ServerOptions,
    Webhooks,
};
use tokio_util::sync::CancellationToken;

/// One HTTPS webhook server validating ConfigMaps on the host and on every member.
#[derive(Parser, Debug)]
#[command(name = "example-webhook", version, about, long_about = None)]
struct Args {
    /// How many member clusters to start.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=10))]
    clusters: u16,
    /// How many replicas share the fleet (sharded when more than one).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=5))]
    replicas: u16,
    /// How long each step may take before the example fails.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    step_timeout: u64,
}

/// The name of the webhook configurations (and the suffix of each webhook's name).
const CONFIG_NAME: &str = "configmaps.example-webhook.mcr.rs";
/// Only ConfigMaps with this label are sent to the webhook, so the cluster's own are not.
const LABEL: &str = "example-webhook/validate";

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Quiet by default. kube's client logs every 5xx answer at ERROR, among them a write whose
    // webhook call failed while its member moved to another replica: the example retries
    // those itself and reports what still fails, so that log is left out.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error,kube_client::client::builder=off".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: a file, a pipe or `kubectl logs` gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("example-webhook failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The validator: `data.replicas`, when present, is a number from 0 to 10. The refusal names
/// the cluster the request came from (the handler gets it with the request).
fn register(webhooks: &Webhooks) -> Result<()> {
    webhooks
        .for_::<ConfigMap>()
        .with_validator(|req| async move {
            let replicas = req
                .object
                .as_ref()
                .and_then(|cm| cm.data.as_ref())
                .and_then(|d| d.get("replicas"));
            match replicas.map(|r| r.parse::<u8>()) {
                None | Some(Ok(0..=10)) => Ok(()),
                Some(_) => Err(Denied::new(format!(
                    "data.replicas must be a number from 0 to 10, not {:?} (cluster {})",
                    replicas.map(String::as_str).unwrap_or_default(),
                    req.cluster().name()
                ))),
            }
        })
        .register()?;
    Ok(())
}

fn config_map(name: &str, replicas: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some(BTreeMap::from([(LABEL.to_string(), "yes".to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "replicas".to_string(),
            replicas.to_string(),
        )])),
        ..Default::default()
    }
}

async fn run(args: Args) -> Result<()> {
    let n = usize::from(args.clusters);
    let step = Duration::from_secs(args.step_timeout);
    let real = mcr_envtest::backend().is_real();
    println!(
        "mcr webhook example: validating ConfigMaps on the host and {n} members ({} control planes)",
        if real { "real" } else { "emulated" }
    );

    // [1] The clusters and the manager.
    let host = TestCluster::start("host")
        .await
        .context("starting the host")?;
    let fleet = Fleet::builder()
        .clusters(n)
        .name_prefix("member")
        .start()
        .await
        .context("starting the members")?;
    let replicas = usize::from(args.replicas);
    let sharded = replicas > 1;
    println!("[1/4] started the host and {}", fleet.names().join(", "));

    // [2] The webhook servers: certificate files, the validator, HTTPS on 127.0.0.1; one per
    // replica.
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let ca_pem = review::write_certificate(dir.path())?;
    let mut options = ConfigOptions::new(CONFIG_NAME);
    options.object_selector = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some(BTreeMap::from([(LABEL.to_string(), "yes".to_string())])),
            ..Default::default()
        },
    );
    if sharded && !real {
        // The emulator has no admissionregistration.k8s.io: serve the two types as CRDs so
        // the configurations can be written and read back.
        for member in fleet.clusters() {
            mcr_webhook::testing::install_admission_types(&member.client())
                .await
                .context("serving the webhook configuration types as CRDs")?;
        }
    }
    let token = CancellationToken::new();
    let mut running = Vec::new();
    let mut bases = Vec::new();
    for i in 1..=replicas {
        let provider = Arc::new(ClustersProvider::new());
        for member in fleet.clusters() {
            provider
                .add(Cluster::new(member.name(), member.client()))
                .await
                .with_context(|| format!("engaging {}", member.name()))?;
        }
        let mut builder = Manager::builder(host.client()).provider(provider);
        if sharded {
            builder = builder.sharding(
                Sharding::new("example-webhook")
                    .identity(format!("replica-{i}"))
                    .lease_duration(Duration::from_secs(4))
                    .renew_deadline(Duration::from_secs(3))
                    .renew_period(Duration::from_secs(1)),
            );
        }
        let mgr = builder.build();
        let webhooks = Webhooks::new(&mgr);
        register(&webhooks)?;
        let certs = CertificateReloader::from_files(
            dir.path().join("tls.crt"),
            dir.path().join("tls.key"),
        )?;
        let server = Server::bind(
            ([127, 0, 0, 1], 0).into(),
            webhooks.clone(),
            certs,
            ServerOptions::default(),
        )
        .await?;
        // This replica's own URL: members it owns call it.
        let base = format!("https://{}", server.local_addr());
        mgr.add(Arc::new(server))?;
        if real || sharded {
            // Members get their configuration when engaged by their owner.
            mgr.add(Arc::new(MemberConfigurations::new(
                webhooks.clone(),
                base.clone(),
                ca_pem.clone().into_bytes(),
                options.clone(),
            )?))?;
        }
        if real && i == 1 {
            // The host's configuration (every replica serves the host): applied here.
            let config = mcr_webhook::validating_configuration(
                &webhooks,
                &base,
                ca_pem.as_bytes(),
                &options,
            )?
            .context("a validator is registered")?;
            Api::<ValidatingWebhookConfiguration>::all(host.client())
                .create(&PostParams::default(), &config)
                .await
                .context("creating the host's ValidatingWebhookConfiguration")?;
        }
        println!(
            "[2/4] replica-{i}: webhook server on {base}, paths {}",
            webhooks.paths().join(", ")
        );
        let (mgr, token) = (mgr.clone(), token.clone());
        running.push(tokio::spawn(async move { mgr.run_until(token).await }));
        bases.push(base);
    }
    let base = bases[0].clone();

    // [3] Every cluster, one by one: an invalid ConfigMap is refused, a valid one accepted.
    let mut clusters: Vec<(String, Client)> = vec![("<host>".into(), host.client())];
    clusters.extend(
        fleet
            .clusters()
            .iter()
            .map(|c| (c.name().to_string(), c.client())),
    );
    let outcome = async {
        for (name, client) in &clusters {
            let path = if name == "<host>" {
                "/validate--v1-configmap".to_string()
            } else {
                mcr_webhook::member_path(&name.as_str().into(), "/validate--v1-configmap")
            };
            let (refused, allowed) = if real {
                review::through_apiserver(client, step, config_map).await?
            } else if sharded && name != "<host>" {
                // Where the member's apiserver would send the review: the URL its owner wrote.
                // While the replicas share the members out, a call can land on a replica that
                // just handed the member over: it fails (503), and is tried again at the URL
                // the new owner writes, as a client retries a write refused under `Fail`.
                let deadline = tokio::time::Instant::now() + step;
                loop {
                    let url = review::configured_url(client, CONFIG_NAME, step).await?;
                    let (owner, path) = review::split_url(&url)?;
                    match review::by_hand(&owner, &ca_pem, &path, config_map).await {
                        Ok(answer) => {
                            let replica =
                                bases.iter().position(|b| *b == owner).map_or(0, |i| i + 1);
                            println!("{name}: configured to call replica-{replica} ({url})");
                            break answer;
                        }
                        Err(err) if tokio::time::Instant::now() < deadline => {
                            tracing::info!(cluster = %name, error = %err, "retrying the call");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(err) => return Err(err.context(format!("{name}: calling {url}"))),
                    }
                }
            } else {
                review::by_hand(&base, &ca_pem, &path, config_map).await?
            };
            let Some(message) = refused else {
                bail!("{name}: the invalid ConfigMap was accepted");
            };
            if !allowed {
                bail!("{name}: the valid ConfigMap was refused");
            }
            println!("{name}: replicas=\"eleven\" refused: {message}");
            println!("{name}: replicas=\"3\" accepted");
        }
        Ok(())
    }
    .await;

    // [4] Shut down.
    token.cancel();
    for run in running {
        run.await.context("a manager task")??;
    }
    outcome?;
    println!("[3/4] every cluster refused the invalid ConfigMap through its own route");
    println!("[4/4] webhook example finished: every cluster refused the invalid ConfigMap.");
    Ok(())
}
