//! B1 (one cluster, 20,000 updates) and B2 (100 clusters x 200 updates): mcr against
//! kube-runtime on the same emulator, transport and loader, interleaved runs.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use mcr_envtest::{Fleet, TestCluster};
use serde_json::{Value, json};

use crate::{
    child::{self, num},
    load,
    probe::Probe,
    report::Scenario,
    sides::{self, Side},
    stats::median,
};

/// Sizes of one comparison.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Params {
    pub clusters: usize,
    pub objects: usize,
    pub rounds: u64,
    pub writers: usize,
    pub reps: usize,
}

/// Sizes of comparison `id` (`b1`, `b2`; `b2m` has the sizes of `b2`).
pub(crate) fn params(id: &str, quick: bool) -> Result<Params> {
    Ok(match (id, quick) {
        // 200 objects x 100 rounds = 20,000 updates.
        ("b1", false) => Params {
            clusters: 1,
            objects: 200,
            rounds: 100,
            writers: 8,
            reps: 5,
        },
        ("b1", true) => Params {
            clusters: 1,
            objects: 100,
            rounds: 20,
            writers: 8,
            reps: 3,
        },
        // 10 objects x 20 rounds = 200 updates per cluster.
        ("b2" | "b2m", false) => Params {
            clusters: 100,
            objects: 10,
            rounds: 20,
            writers: 2,
            reps: 5,
        },
        ("b2" | "b2m", true) => Params {
            clusters: 20,
            objects: 10,
            rounds: 20,
            writers: 2,
            reps: 3,
        },
        _ => bail!("unknown comparison {id}"),
    })
}

/// Child: one side of one comparison, in this process.
pub async fn child(id: &str, side: &str, quick: bool) -> Result<Value> {
    let p = params(id, quick)?;
    let side = Side::parse(side)?;
    let host = TestCluster::start("host").await?;
    let fleet = Fleet::builder()
        .clusters(p.clusters)
        .name_prefix("member")
        .start()
        .await?;
    for c in fleet.clusters() {
        load::create_objects(c.client(), p.objects).await?;
    }
    let total = p.clusters * p.objects;
    let probe = Probe::default();
    probe.expect(0, total);
    let members = fleet
        .clusters()
        .iter()
        .map(|c| (c.name().to_string(), c.client()))
        .collect();
    let running = sides::start(side, host.client(), members, vec![probe.clone()]).await?;
    if side != Side::None {
        probe
            .wait_done("initial sync", Duration::from_secs(120))
            .await?;
    }
    probe.expect(p.rounds, total);
    let loaders = fleet.clusters().iter().map(TestCluster::client).collect();
    let start = Instant::now();
    let writes = load::load_fleet(loaders, p.objects, p.rounds, p.writers).await?;
    let load_s = start.elapsed().as_secs_f64();
    if side != Side::None {
        probe
            .wait_done("every latest version", Duration::from_secs(600))
            .await?;
    }
    let seconds = start.elapsed().as_secs_f64();
    running.stop().await;
    Ok(json!({
        "scenario": id, "side": side.as_str(), "clusters": p.clusters, "objects": p.objects,
        "rounds": p.rounds, "writes": writes, "seconds": seconds, "load_seconds": load_s,
    }))
}

pub(crate) fn side_runs<'a>(runs: &'a [Value], side: &str) -> impl Iterator<Item = &'a Value> {
    runs.iter().filter(move |r| r["side"] == side)
}

pub(crate) fn median_of(runs: &[Value], side: &str, key: &str) -> Result<Option<f64>> {
    let xs = side_runs(runs, side)
        .map(|r| num(r, key))
        .collect::<Result<Vec<_>>>()?;
    Ok(median(&xs))
}

/// The median of `key` over the runs whose `field` equals `value`.
pub(crate) fn median_by(
    runs: &[Value],
    field: &str,
    value: &str,
    key: &str,
) -> Result<Option<f64>> {
    let xs = runs
        .iter()
        .filter(|r| r[field] == value)
        .map(|r| num(r, key))
        .collect::<Result<Vec<_>>>()?;
    Ok(median(&xs))
}

pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// Parent: interleaved runs (mcr, kube-runtime, mcr, ...) and the summary.
pub fn run(id: &str, quick: bool) -> Scenario {
    let (title, goal) = match id {
        "b1" => (
            "1 cluster, 20,000 ConfigMap updates: mcr controller vs kube-runtime Controller",
            "time ratio <= 1.05",
        ),
        _ => (
            "100 clusters x 200 updates: one mcr controller vs 100 kube-runtime Controllers",
            "time ratio <= 1.0; RSS ratio <= 0.5",
        ),
    };
    let mut s = Scenario::new(&id.to_uppercase(), title, goal);
    if let Err(err) = summarize(id, quick, &mut s) {
        s.error = Some(format!("{err:#}"));
    }
    s
}

fn summarize(id: &str, quick: bool, s: &mut Scenario) -> Result<()> {
    let p = params(id, quick)?;
    s.title = format!(
        "{} ({} cluster(s) x {} objects x {} rounds = {} updates, {} reps interleaved)",
        s.title,
        p.clusters,
        p.objects,
        p.rounds,
        p.clusters * p.objects * p.rounds as usize,
        p.reps
    );
    let args = |side: &str| {
        let mut a = vec![id.to_string(), side.to_string()];
        if quick {
            a.push("--quick".into());
        }
        a
    };
    for _ in 0..p.reps {
        for side in ["mcr", "kube-runtime"] {
            s.runs.push(child::run_one(&args(side))?);
        }
    }
    if id == "b2" {
        // The emulator and loader alone, to separate their memory from the controllers'.
        s.runs.push(child::run_one(&args("none"))?);
    }
    let t_mcr = median_of(&s.runs, "mcr", "seconds")?;
    let t_kr = median_of(&s.runs, "kube-runtime", "seconds")?;
    let t_ratio = ratio(t_mcr, t_kr);
    s.metric("time mcr (median)", t_mcr, "s");
    s.metric("time kube-runtime (median)", t_kr, "s");
    s.metric("time ratio mcr / kube-runtime", t_ratio, "");
    let mut met = t_ratio.map(|r| r <= if id == "b1" { 1.05 } else { 1.0 });
    if id == "b2" {
        let kib = 1.0 / 1024.0;
        let r_mcr = median_of(&s.runs, "mcr", "vm_hwm_kib")?.map(|v| v * kib);
        let r_kr = median_of(&s.runs, "kube-runtime", "vm_hwm_kib")?.map(|v| v * kib);
        let r_none = median_of(&s.runs, "none", "vm_hwm_kib")?.map(|v| v * kib);
        s.metric("peak RSS mcr process (median)", r_mcr, "MiB");
        s.metric("peak RSS kube-runtime process (median)", r_kr, "MiB");
        s.metric("peak RSS emulator + loader alone", r_none, "MiB");
        s.metric("RSS ratio, whole process", ratio(r_mcr, r_kr), "");
        let net = |x: Option<f64>| Some(x? - r_none?);
        let net_ratio = ratio(net(r_mcr), net(r_kr));
        s.metric(
            "RSS ratio, controllers only (minus emulator)",
            net_ratio,
            "",
        );
        met = match (met, net_ratio) {
            (Some(t), Some(r)) => Some(t && r <= 0.5),
            _ => None,
        };
    }
    s.goal_met = met;
    Ok(())
}
