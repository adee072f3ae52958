//! B4: 1,000 clusters served over HTTPS by a separate `mcr-envtest` process (so the manager's
//! RSS is its own), 10 ConfigMaps each; the manager discovers them with `mcr-provider-file`
//! from the kubeconfig directory the server writes.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, Manager};
use mcr_provider_file::{FileProvider, Options};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{
    child,
    probe::Probe,
    remote::{self, Server, client_for, kubeconfigs},
    report::Scenario,
    sides,
};

const OBJECTS: usize = 10;

fn clusters(quick: bool) -> usize {
    if quick { 100 } else { 1000 }
}

/// Child: the manager process. Timed from the start of `main` (`started`).
pub async fn child(dir: &Path, quick: bool, started: Instant) -> Result<Value> {
    let n = clusters(quick);
    let (rss_before, _) = crate::machine::own_memory();
    let files = kubeconfigs(dir)?;
    let host = client_for(files.first().context("no kubeconfig written")?).await?;
    let provider = FileProvider::new(Options {
        dirs: vec![dir.to_path_buf()],
        ..Options::default()
    });
    let mgr = Manager::new(host, Some(Arc::new(provider)));
    let probe = Probe::default();
    probe.expect(0, n * OBJECTS);
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .concurrency(sides::CONCURRENCY.into())
        .register(
            |cm: Arc<ConfigMap>, ctx: mcr_manager::Context<Probe>| async move {
                ctx.data().observe(ctx.cluster_name().as_str(), &cm);
                Ok::<_, std::convert::Infallible>(kube::runtime::controller::Action::await_change())
            },
            |_, _, _| kube::runtime::controller::Action::await_change(),
            Arc::new(probe.clone()),
        )?;
    let token = CancellationToken::new();
    let run = {
        let (mgr, token) = (mgr.clone(), token.clone());
        tokio::spawn(async move { mgr.run_until(token).await })
    };
    probe
        .wait_done("every object in every cluster", Duration::from_secs(600))
        .await?;
    let seconds = started.elapsed().as_secs_f64();
    let engaged = mgr.engaged_clusters().len();
    let (rss, hwm) = crate::machine::own_memory();
    token.cancel();
    run.abort();
    Ok(json!({
        "clusters": n, "engaged": engaged, "objects_per_cluster": OBJECTS, "seconds": seconds,
        "rss_kib_before": rss_before, "rss_kib_all_reconciled": rss,
        "hwm_kib_per_cluster": hwm as f64 / engaged.max(1) as f64,
        "hwm_growth_kib_per_cluster": hwm.saturating_sub(rss_before) as f64 / engaged.max(1) as f64,
    }))
}

/// Parent: starts the server, writes the objects, runs the manager child.
pub fn run(quick: bool, envtest_bin: &Path, work: &Path) -> Scenario {
    let n = clusters(quick);
    let mut s = Scenario::new(
        "B4",
        format!(
            "{n} clusters over HTTPS from a separate mcr-envtest process, {OBJECTS} ConfigMaps each, discovered by mcr-provider-file"
        ),
        "<= 10 s; <= 512 KiB RSS per cluster",
    );
    let dir = work.join("b4-fleet");
    let result = (|| -> Result<Value> {
        let _server = Server::start(envtest_bin, n, &dir)?;
        let rt = tokio::runtime::Runtime::new()?;
        let clients: Vec<kube::Client> = rt
            .block_on(remote::clients(&dir))?
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        if clients.len() != n {
            bail!("expected {n} kubeconfigs, found {}", clients.len());
        }
        rt.block_on(remote::populate(&clients, OBJECTS))?;
        drop(clients);
        let mut args = vec![
            "b4".to_string(),
            "mcr".to_string(),
            "--kubeconfig-dir".into(),
        ];
        args.push(dir.display().to_string());
        if quick {
            args.push("--quick".into());
        }
        child::run_one(&args)
    })();
    match result {
        Ok(v) => {
            let get = |k: &str| v.get(k).and_then(Value::as_f64);
            s.metric(
                "time from start to every object reconciled",
                get("seconds"),
                "s",
            );
            s.metric(
                "manager peak RSS per engaged cluster",
                get("hwm_kib_per_cluster"),
                "KiB",
            );
            s.metric(
                "  growth over the empty process",
                get("hwm_growth_kib_per_cluster"),
                "KiB",
            );
            s.metric(
                "manager peak RSS",
                get("vm_hwm_kib").map(|k| k / 1024.0),
                "MiB",
            );
            s.goal_met = match (get("seconds"), get("hwm_kib_per_cluster")) {
                (Some(t), Some(r)) => Some(t <= 10.0 && r <= 512.0),
                _ => None,
            };
            s.runs.push(v);
        }
        Err(err) => s.error = Some(format!("{err:#}")),
    }
    s
}
