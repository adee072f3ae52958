//! The Grafana dashboard shipped in `deploy/grafana/mcr-dashboard.json` queries only metrics a
//! running manager exports: a manager with the kubeconfig provider and one controller runs on
//! the emulator, reconciles in a member, and its `/metrics` is scraped; every `mcr_*` name in
//! the dashboard's queries must be there, as a sample or as a declared family (the
//! credential gauges have samples only for clusters with expiring credentials).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::{Context, Controller, Manager};
use mcr_provider_kubeconfig::{DEFAULT_LABEL, KubeconfigProvider, Options};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

async fn reconcile(_: Arc<ConfigMap>, _: Context<()>) -> Result<Action, kube::Error> {
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<()>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

async fn get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut body = String::new();
    s.read_to_string(&mut body).await?;
    Ok(body)
}

/// Every `mcr_*` metric name in the `expr` of the dashboard's targets.
fn dashboard_metrics(dashboard: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(expr)) = map.get("expr") {
                    for (i, _) in expr.match_indices("mcr_") {
                        let name: String = expr[i..]
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        out.insert(name);
                    }
                }
                map.values().for_each(|v| walk(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(dashboard, &mut out);
    out
}

/// The sample names and the declared families (`# TYPE name kind`) of a scrape.
fn exported(scrape: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let mut samples = BTreeSet::new();
    let mut families = BTreeMap::new();
    for line in scrape.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (words.next(), words.next()) {
                families.insert(name.to_owned(), kind.to_owned());
            }
        } else if line.starts_with("mcr_") {
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            samples.insert(name);
        }
    }
    (samples, families)
}

/// Whether `name` is exported: a sample, or the series name of a declared family.
fn is_exported(
    name: &str,
    samples: &BTreeSet<String>,
    families: &BTreeMap<String, String>,
) -> bool {
    if samples.contains(name) {
        return true;
    }
    let suffixes: &[&str] = &["", "_total", "_bucket", "_sum", "_count", "_created"];
    suffixes.iter().any(|suffix| {
        name.strip_suffix(suffix)
            .filter(|_| !suffix.is_empty() || families.contains_key(name))
            .and_then(|family| families.get(family))
            .is_some_and(|kind| match *suffix {
                "" => kind == "gauge",
                "_total" | "_created" => kind == "counter",
                _ => kind == "histogram",
            })
    })
}

#[tokio::test]
async fn every_metric_of_the_dashboard_is_exported() -> anyhow::Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/mcr-dashboard.json");
    let dashboard: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    let wanted = dashboard_metrics(&dashboard);
    assert!(wanted.len() >= 8, "the dashboard queries only {wanted:?}");

    let host = TestCluster::start("host").await?;
    let fleet = Fleet::builder()
        .clusters(1)
        .name_prefix("member")
        .https(true)
        .start()
        .await?;
    let member = &fleet.clusters()[0];
    Api::<ConfigMap>::namespaced(member.client(), "default")
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("one".into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            },
        )
        .await?;
    let provider = KubeconfigProvider::new(host.client(), Options::default());
    let mgr = Manager::builder(host.client())
        .provider(Arc::new(provider))
        .metrics_address(([127, 0, 0, 1], 0).into())
        .build();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .register(reconcile, error_policy, Arc::new(()))?;
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run_until(stop).await }
    });
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(member.name().to_owned()),
            labels: Some(BTreeMap::from([(DEFAULT_LABEL.into(), "true".into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "kubeconfig".into(),
            ByteString(member.kubeconfig_yaml().unwrap_or_default().into_bytes()),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(host.client(), "default")
        .create(&PostParams::default(), &secret)
        .await?;

    // Wait (bounded) until the member's reconcile shows in the scrape.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let scrape = loop {
        if let Some(addr) = mgr.http_addr()
            && let Ok(body) = get(addr, "/metrics").await
            && body.contains("mcr_reconcile_total{")
            && body.contains("mcr_queue_wait_seconds_bucket{")
        {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reconcile in /metrics within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.cancel();
    run.await??;

    let (samples, families) = exported(&scrape);
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|name| !is_exported(name, &samples, &families))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics /metrics does not export: {missing:?}\n{scrape}"
    );
    // The check can fail: a name the manager does not export is caught.
    assert!(!is_exported("mcr_no_such_metric", &samples, &families));
    assert!(!is_exported(
        "mcr_engaged_clusters_total",
        &samples,
        &families
    ));
    Ok(())
}
