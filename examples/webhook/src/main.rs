//! mcr webhooks: one HTTPS server validating ConfigMaps on the host and on every member of an
//! embedded fleet.
//!
//! ```text
//! cargo run -p example-webhook                    # emulated clusters: reviews sent by hand
//! MCR_ENVTEST=real KUBEBUILDER_ASSETS=... \
//!     cargo run -p example-webhook                # real kube-apiservers call the webhook
//! cargo run -p example-webhook -- --clusters 3
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
use mcr_manager::Manager;
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .with_writer(std::io::stderr)
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
    let provider = Arc::new(ClustersProvider::new());
    for member in fleet.clusters() {
        provider
            .add(Cluster::new(member.name(), member.client()))
            .await
            .with_context(|| format!("engaging {}", member.name()))?;
    }
    let mgr = Manager::new(host.client(), Some(provider));
    println!("[1/4] started the host and {}", fleet.names().join(", "));

    // [2] The webhook server: certificate files, the validator, HTTPS on 127.0.0.1.
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let ca_pem = review::write_certificate(dir.path())?;
    let webhooks = Webhooks::new(&mgr);
    register(&webhooks)?;
    let certs =
        CertificateReloader::from_files(dir.path().join("tls.crt"), dir.path().join("tls.key"))?;
    let server = Server::bind(
        ([127, 0, 0, 1], 0).into(),
        webhooks.clone(),
        certs,
        ServerOptions::default(),
    )
    .await?;
    let base = format!("https://{}", server.local_addr());
    mgr.add(Arc::new(server))?;
    let mut options = ConfigOptions::new(CONFIG_NAME);
    options.object_selector = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some(BTreeMap::from([(LABEL.to_string(), "yes".to_string())])),
            ..Default::default()
        },
    );
    if real {
        // Members get their configuration when engaged; the host's is applied here.
        mgr.add(Arc::new(MemberConfigurations::new(
            webhooks.clone(),
            base.clone(),
            ca_pem.clone().into_bytes(),
            options.clone(),
        )))?;
        let config =
            mcr_webhook::validating_configuration(&webhooks, &base, ca_pem.as_bytes(), &options)
                .context("a validator is registered")?;
        Api::<ValidatingWebhookConfiguration>::all(host.client())
            .create(&PostParams::default(), &config)
            .await
            .context("creating the host's ValidatingWebhookConfiguration")?;
    }
    let token = CancellationToken::new();
    let running = {
        let (mgr, token) = (mgr.clone(), token.clone());
        tokio::spawn(async move { mgr.run_until(token).await })
    };
    println!(
        "[2/4] webhook server on {base}, paths {}",
        webhooks.paths().join(", ")
    );

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
    running.await.context("the manager task")??;
    outcome?;
    println!("[3/4] every cluster refused the invalid ConfigMap through its own route");
    println!("[4/4] webhook example finished: every cluster refused the invalid ConfigMap.");
    Ok(())
}
