//! B8: mcr against Go's multicluster-runtime (`bench/go-peer`) on the same fleet.
//!
//! For each fleet size (10, 100, 1,000 member clusters, 20,000 updates each time) and each
//! repetition, a fresh `mcr-envtest` server serves the fleet over HTTPS; the runner populates
//! it, starts one side as its own process, waits for `READY` (every object reconciled once),
//! runs the loader and times until `DONE` (every object seen at its last value). Sides
//! alternate (mcr, Go, mcr, ...). Both sides are a manager with a file provider over the same
//! kubeconfig files (the first cluster is the host, not a member) and one ConfigMap controller
//! with 16 concurrent reconciles that records the highest counter value per object. Each side
//! reports its own peak RSS (`VmHWM`) and CPU seconds (`/proc/self/stat`, user + system).
//!
//! With `--real` (`Bins::real`) the same comparison runs once against real control planes
//! (`MCR_ENVTEST=real`: the host and two members, 4,000 updates), as a check that the
//! emulator flatters neither side.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_manager::{Controller, Manager};
use mcr_provider_file::{FileProvider, Options};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{
    child::{self, Session, num},
    load,
    machine::own_cpu_seconds,
    probe::Probe,
    remote::{self, Server},
    report::Scenario,
    scenarios::compare::{median_of, ratio},
    sides::{self, CONCURRENCY},
};

/// Objects per member cluster.
const OBJECTS: usize = 10;
/// Updates per run, whatever the fleet size.
const UPDATES: usize = 20_000;
/// Concurrent writers per cluster in the loader.
const WRITERS: usize = 2;
/// The kubeconfig of the host cluster (not a fleet member) in the server's directory.
const HOST: &str = "member-1.kubeconfig";

/// Updates per run against real control planes (`--real`), where etcd makes writes slower.
const UPDATES_REAL: usize = 4_000;
/// Member clusters against real control planes: with the host, three control planes.
const MEMBERS_REAL: usize = 2;

/// `(member clusters, repetitions per side)` of the suite.
fn sizes(quick: bool, real: bool) -> &'static [(usize, usize)] {
    match (quick, real) {
        (_, true) => &[(MEMBERS_REAL, 2)],
        (true, false) => &[(10, 1)],
        (false, false) => &[(10, 3), (100, 3), (1000, 2)],
    }
}

/// The last value the loader writes at this fleet size (`UPDATES`, or `UPDATES_REAL`, in all).
fn rounds(clusters: usize, real: bool) -> u64 {
    let updates = if real { UPDATES_REAL } else { UPDATES };
    (updates / (clusters * OBJECTS)).max(1) as u64
}

/// The host kubeconfig and the members' kubeconfigs of `dir`.
fn host_and_members(dir: &Path) -> Result<(PathBuf, Vec<PathBuf>)> {
    let host = dir.join(HOST);
    let members: Vec<PathBuf> = remote::kubeconfigs(dir)?
        .into_iter()
        .filter(|p| *p != host)
        .collect();
    Ok((host, members))
}

/// Child (mcr side): a manager with the file provider over the members of `dir`, done when
/// every object was seen at `rounds`.
pub async fn child(clusters: usize, rounds: u64, dir: &Path) -> Result<Value> {
    let (host, members) = host_and_members(dir)?;
    if members.len() != clusters {
        bail!(
            "expected {clusters} member kubeconfigs, found {}",
            members.len()
        );
    }
    let total = clusters * OBJECTS;
    let probe = Probe::default();
    probe.expect(0, total);
    let provider = FileProvider::new(Options {
        files: members,
        ..Options::default()
    });
    let mgr = Manager::new(remote::client_for(&host).await?, Some(Arc::new(provider)));
    Controller::new(&mgr)
        .named(sides::mcr_controller_name(0))
        .for_::<ConfigMap>()
        .concurrency(CONCURRENCY.into())
        .register(
            sides::mcr_reconcile,
            sides::mcr_error_policy,
            Arc::new(probe.clone()),
        )?;
    let token = CancellationToken::new();
    let run = {
        let (mgr, token) = (mgr.clone(), token.clone());
        tokio::spawn(async move { mgr.run_until(token).await })
    };
    probe
        .wait_done("initial sync", Duration::from_secs(600))
        .await?;
    probe.record_rises();
    probe.expect(rounds, total);
    let (rss_ready, cpu_ready) = (crate::machine::own_memory().0, own_cpu_seconds());
    child::mark("READY");
    probe
        .wait_done("every last value", Duration::from_secs(600))
        .await?;
    child::mark("DONE");
    let (cpu_done, (rss_done, hwm)) = (own_cpu_seconds(), crate::machine::own_memory());
    token.cancel();
    run.abort();
    Ok(json!({
        "side": "mcr", "clusters": clusters, "objects": OBJECTS, "rounds": rounds,
        "rss_kib_ready": rss_ready, "rss_kib_done": rss_done,
        // Read before the rises are turned into JSON, as the Go peer does.
        "vm_rss_kib": rss_done, "vm_hwm_kib": hwm,
        "cpu_s_ready": cpu_ready, "cpu_s_done": cpu_done,
        "rises": probe.rises_json(),
    }))
}

/// One run of one side at one size: a fresh server, populated, the side timed.
fn one_run(side: &str, clusters: usize, bins: &Bins, dir: &Path) -> Result<Value> {
    let rounds = rounds(clusters, bins.real);
    let server = Server::start_backend(&bins.envtest, clusters + 1, dir, "member", bins.real)?;
    let rt = tokio::runtime::Runtime::new()?;
    let (_, members) = rt.block_on(remote::host_and_fleet(server.dir()))?;
    let (names, loaders): (Vec<String>, Vec<kube::Client>) = members.into_iter().unzip();
    rt.block_on(remote::populate(&loaders, OBJECTS))?;
    let dir_arg = server.dir().display().to_string();
    let started = Instant::now();
    let mut session = match side {
        "mcr" => Session::start(&[
            format!("b8:{clusters}:{rounds}"),
            "mcr".into(),
            "--kubeconfig-dir".into(),
            dir_arg,
        ])?,
        _ => Session::start_program(
            &bins.go_peer,
            &[
                "-kubeconfig-dir".into(),
                dir_arg,
                "-host".into(),
                HOST.into(),
                "-objects".into(),
                OBJECTS.to_string(),
                "-rounds".into(),
                rounds.to_string(),
                "-concurrency".into(),
                CONCURRENCY.to_string(),
            ],
        )?,
    };
    let ready = session.wait_for("READY", Duration::from_secs(600))?;
    let start = Instant::now();
    let acks = rt.block_on(load::load_fleet_acked(loaders, OBJECTS, rounds, WRITERS))?;
    let writes: usize = acks.iter().map(Vec::len).sum();
    let load_seconds = start.elapsed().as_secs_f64();
    let done = session.wait_for("DONE", Duration::from_secs(600))?;
    let mut v = session.finish()?;
    if let Value::Object(map) = &mut v {
        let rises = map.remove("rises").unwrap_or_default();
        let (lat, unseen) = update_latencies(&names, &acks, &rises)?;
        let p = |q| crate::stats::percentile(&lat, q).map(crate::stats::ms);
        map.insert("latency_ms_p50".into(), p(50.0).into());
        map.insert("latency_ms_p99".into(), p(99.0).into());
        map.insert("updates_unseen".into(), unseen.into());
        if let (Some(a), Some(b)) = (map["cpu_s_done"].as_f64(), map["cpu_s_ready"].as_f64()) {
            let per = (a - b) * 1e6 / writes.max(1) as f64;
            map.insert("cpu_us_per_update".into(), per.into());
        }
        map.insert("scenario".into(), "b8".into());
        map.insert("size".into(), clusters.into());
        map.insert("writes".into(), writes.into());
        map.insert("load_seconds".into(), load_seconds.into());
        let seconds = done.saturating_duration_since(start).as_secs_f64();
        map.insert("seconds".into(), seconds.into());
        let startup = ready.saturating_duration_since(started).as_secs_f64();
        map.insert("startup_seconds".into(), startup.into());
    }
    Ok(v)
}

/// The `member-<n>` part of a cluster name (a kubeconfig's file stem, or a file provider's
/// `<path>+<context>` name on either side).
fn member_token(name: &str) -> Option<&str> {
    let start = name.rfind("member-")?;
    let rest = &name[start..];
    let digits = rest["member-".len()..]
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len() - "member-".len());
    (digits > 0).then(|| &rest[.."member-".len() + digits])
}

/// Per-update latencies: for every acknowledged write (`acks[i]` in cluster `names[i]`), the
/// time from its acknowledgement to the first reconcile that saw its value or a later one
/// (`rises`, as [`crate::probe::Probe::rises_json`] prints it; 0 when the reconcile came before
/// the acknowledgement). Returns them and how many writes no reconcile saw.
fn update_latencies(
    names: &[String],
    acks: &[Vec<load::Ack>],
    rises: &Value,
) -> Result<(Vec<Duration>, usize)> {
    use std::collections::HashMap;
    let mut seen: HashMap<(String, String), Vec<(u64, u128)>> = HashMap::new();
    for entry in rises.as_array().map(Vec::as_slice).unwrap_or_default() {
        let (Some(cluster), Some(object), Some(list)) = (
            entry[0].as_str().and_then(member_token),
            entry[1].as_str(),
            entry[2].as_array(),
        ) else {
            bail!("malformed rises entry {entry}");
        };
        let mut list: Vec<(u64, u128)> = list
            .iter()
            .filter_map(|r| Some((r[0].as_u64()?, r[1].as_str()?.parse().ok()?)))
            .collect();
        list.sort_unstable();
        seen.insert((cluster.to_string(), object.to_string()), list);
    }
    let (mut out, mut unseen) = (Vec::new(), 0);
    for (name, acks) in names.iter().zip(acks) {
        let cluster = member_token(name).unwrap_or(name).to_string();
        for ack in acks {
            let list = seen.get(&(cluster.clone(), ack.object.clone()));
            let first = list.and_then(|l| l.get(l.partition_point(|(v, _)| *v < ack.value)));
            match first {
                Some(&(_, at)) => out.push(crate::stamp::since(ack.at, at)),
                None => unseen += 1,
            }
        }
    }
    Ok((out, unseen))
}

/// The binaries B8 runs.
pub struct Bins {
    /// The `mcr-envtest` server.
    pub envtest: PathBuf,
    /// The Go peer (`bench/go-peer`, built by `cargo xtask bench`).
    pub go_peer: PathBuf,
    /// Serve the fleet with real control planes (`MCR_ENVTEST=real`) instead of the emulator.
    pub real: bool,
}

/// Parent: every size, sides interleaved, and the summary.
pub fn run(quick: bool, bins: &Bins, work: &Path) -> Scenario {
    let mut s = if bins.real {
        Scenario::new(
            "B8real",
            format!(
                "mcr vs Go multicluster-runtime v0.24.1 (file provider) against 3 real \
                 kube-apiserver + etcd control planes (MCR_ENVTEST=real: the host and \
                 {MEMBERS_REAL} members), one ConfigMap controller, concurrency {CONCURRENCY}, \
                 {UPDATES_REAL} updates per run ({OBJECTS} objects per cluster), loader in the \
                 bench runner, sides interleaved"
            ),
            "sanity check of B8: the same verdicts as on the emulator (per-update latency \
             mcr <= Go at p50 and p99; peak RSS ratio <= 0.5)",
        )
    } else {
        Scenario::new(
            "B8",
            format!(
                "mcr vs Go multicluster-runtime v0.24.1 (file provider), one ConfigMap \
                 controller, concurrency {CONCURRENCY}, {UPDATES} updates per run ({OBJECTS} \
                 objects per cluster), emulator in a separate mcr-envtest process over HTTPS, \
                 loader in the bench runner, sides interleaved"
            ),
            "per-update latency (write acknowledged -> first reconcile that saw it) mcr <= Go \
             at p50 and p99; peak RSS ratio <= 0.5; every update seen (at every size)",
        )
    };
    if let Err(err) = summarize(quick, bins, work, &mut s) {
        s.error = Some(format!("{err:#}"));
    }
    s
}

fn summarize(quick: bool, bins: &Bins, work: &Path, s: &mut Scenario) -> Result<()> {
    if !bins.go_peer.exists() {
        bail!(
            "{} not found: `cargo xtask bench` builds it (needs Go)",
            bins.go_peer.display()
        );
    }
    let dir = work.join("b8-fleet");
    let mut met = true;
    for &(clusters, reps) in sizes(quick, bins.real) {
        let mut runs = Vec::new();
        for _ in 0..reps {
            for side in ["mcr", "go"] {
                runs.push(one_run(side, clusters, bins, &dir)?);
            }
        }
        met &= summarize_size(clusters, &runs, s)?;
        s.runs.extend(runs);
    }
    s.goal_met = Some(met);
    Ok(())
}

/// The figures of one fleet size; returns whether both goals were met there.
fn summarize_size(clusters: usize, runs: &[Value], s: &mut Scenario) -> Result<bool> {
    let at = format!("{clusters} clusters: ");
    let m = |side: &str, key: &str| median_of(runs, side, key);
    let (t_mcr, t_go) = (m("mcr", "seconds")?, m("go", "seconds")?);
    s.metric(
        &format!("{at}time to all reconciled mcr (median)"),
        t_mcr,
        "s",
    );
    s.metric(
        &format!("{at}time to all reconciled Go (median)"),
        t_go,
        "s",
    );
    let t_ratio = ratio(t_mcr, t_go);
    let load = crate::stats::median(
        &runs
            .iter()
            .filter_map(|r| r["load_seconds"].as_f64())
            .collect::<Vec<_>>(),
    );
    s.metric(
        &format!("{at}  loader alone (writes returned, median of all runs)"),
        load,
        "s",
    );
    s.metric(&format!("{at}time ratio mcr / Go"), t_ratio, "");
    let lag = |side: &str| -> Result<Option<f64>> {
        let xs = runs
            .iter()
            .filter(|r| r["side"] == side)
            .map(|r| Ok(num(r, "seconds")? - num(r, "load_seconds")?))
            .collect::<Result<Vec<f64>>>()?;
        Ok(crate::stats::median(&xs))
    };
    let (lag_mcr, lag_go) = (lag("mcr")?, lag("go")?);
    s.metric(
        &format!("{at}lag after the last write returned, mcr (median)"),
        lag_mcr,
        "s",
    );
    s.metric(
        &format!("{at}lag after the last write returned, Go (median)"),
        lag_go,
        "s",
    );
    let (p50_mcr, p50_go) = (m("mcr", "latency_ms_p50")?, m("go", "latency_ms_p50")?);
    let (p99_mcr, p99_go) = (m("mcr", "latency_ms_p99")?, m("go", "latency_ms_p99")?);
    s.metric(
        &format!("{at}per-update latency p50 mcr (median)"),
        p50_mcr,
        "ms",
    );
    s.metric(
        &format!("{at}per-update latency p50 Go (median)"),
        p50_go,
        "ms",
    );
    s.metric(
        &format!("{at}per-update latency p99 mcr (median)"),
        p99_mcr,
        "ms",
    );
    s.metric(
        &format!("{at}per-update latency p99 Go (median)"),
        p99_go,
        "ms",
    );
    let (lp50, lp99) = (ratio(p50_mcr, p50_go), ratio(p99_mcr, p99_go));
    s.metric(&format!("{at}latency ratio mcr / Go, p50"), lp50, "");
    s.metric(&format!("{at}latency ratio mcr / Go, p99"), lp99, "");
    let (cpu_mcr, cpu_go) = (
        m("mcr", "cpu_us_per_update")?,
        m("go", "cpu_us_per_update")?,
    );
    s.metric(&format!("{at}CPU per update mcr (median)"), cpu_mcr, "us");
    s.metric(&format!("{at}CPU per update Go (median)"), cpu_go, "us");
    let unseen = runs
        .iter()
        .filter_map(|r| r["updates_unseen"].as_u64())
        .sum::<u64>();
    s.metric(
        &format!("{at}updates no reconcile saw (all runs)"),
        Some(unseen as f64),
        "",
    );
    let mib =
        |side: &str| -> Result<Option<f64>> { Ok(m(side, "vm_hwm_kib")?.map(|k| k / 1024.0)) };
    let (r_mcr, r_go) = (mib("mcr")?, mib("go")?);
    s.metric(&format!("{at}peak RSS mcr (median)"), r_mcr, "MiB");
    s.metric(&format!("{at}peak RSS Go (median)"), r_go, "MiB");
    let r_ratio = ratio(r_mcr, r_go);
    s.metric(&format!("{at}peak RSS ratio mcr / Go"), r_ratio, "");
    let per = |x: Option<f64>| x.map(|mib| mib * 1024.0 / clusters as f64);
    s.metric(&format!("{at}peak RSS per cluster mcr"), per(r_mcr), "KiB");
    s.metric(&format!("{at}peak RSS per cluster Go"), per(r_go), "KiB");
    let (c_mcr, c_go) = (m("mcr", "cpu_s_done")?, m("go", "cpu_s_done")?);
    s.metric(
        &format!("{at}CPU user+sys mcr, whole run (median)"),
        c_mcr,
        "s",
    );
    s.metric(
        &format!("{at}CPU user+sys Go, whole run (median)"),
        c_go,
        "s",
    );
    s.metric(&format!("{at}CPU ratio mcr / Go"), ratio(c_mcr, c_go), "");
    let load_cpu = |side: &str| -> Result<Option<f64>> {
        let xs = runs
            .iter()
            .filter(|r| r["side"] == side)
            .map(|r| Ok(num(r, "cpu_s_done")? - num(r, "cpu_s_ready")?))
            .collect::<Result<Vec<f64>>>()?;
        Ok(crate::stats::median(&xs))
    };
    let (l_mcr, l_go) = (load_cpu("mcr")?, load_cpu("go")?);
    s.metric(
        &format!("{at}CPU during the updates, ratio mcr / Go"),
        ratio(l_mcr, l_go),
        "",
    );
    let (st_mcr, st_go) = (m("mcr", "startup_seconds")?, m("go", "startup_seconds")?);
    s.metric(
        &format!("{at}process start to initial sync mcr"),
        st_mcr,
        "s",
    );
    s.metric(&format!("{at}process start to initial sync Go"), st_go, "s");
    let _ = t_ratio;
    Ok(goal_met(
        (p50_mcr, p50_go),
        (p99_mcr, p99_go),
        r_ratio,
        unseen,
    ))
}

/// B8's verdict for one size: mcr's per-update latency at most Go's at p50 and at p99 (both
/// medians of the runs, in ms), a peak RSS ratio of at most 0.5, and every update seen.
fn goal_met(
    p50: (Option<f64>, Option<f64>),
    p99: (Option<f64>, Option<f64>),
    rss_ratio: Option<f64>,
    unseen: u64,
) -> bool {
    // Compared as values, not as a ratio: a ratio of 0 to 0 is undefined, and 0 <= 0 holds.
    let at_most =
        |(mcr, go): (Option<f64>, Option<f64>)| matches!((mcr, go), (Some(m), Some(g)) if m <= g);
    at_most(p50) && at_most(p99) && rss_ratio.is_some_and(|r| r <= 0.5) && unseen == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_of_zero_on_both_sides_is_no_worse() {
        // Against real control planes most reconciles come before the write's answer on both
        // sides, so both p50s are 0 and their ratio is undefined: 0 <= 0 is still met.
        assert!(goal_met(
            (Some(0.0), Some(0.0)),
            (Some(3.1), Some(3.7)),
            Some(0.45),
            0
        ));
        assert!(!goal_met(
            (Some(0.1), Some(0.0)),
            (Some(3.1), Some(3.7)),
            Some(0.45),
            0
        ));
        assert!(!goal_met(
            (Some(0.0), Some(0.0)),
            (Some(3.8), Some(3.7)),
            Some(0.45),
            0
        ));
        assert!(!goal_met(
            (None, Some(1.0)),
            (Some(1.0), Some(2.0)),
            Some(0.4),
            0
        ));
        assert!(!goal_met(
            (Some(0.0), Some(0.0)),
            (Some(3.1), Some(3.7)),
            Some(0.45),
            1
        ));
    }

    #[test]
    fn every_size_loads_the_same_number_of_updates() {
        for &(clusters, _) in sizes(false, false) {
            assert_eq!(
                clusters * OBJECTS * rounds(clusters, false) as usize,
                UPDATES
            );
        }
        for &(clusters, _) in sizes(false, true) {
            assert_eq!(
                clusters * OBJECTS * rounds(clusters, true) as usize,
                UPDATES_REAL
            );
        }
    }

    #[test]
    fn latencies_join_acks_to_the_first_reconcile_that_saw_them() {
        assert_eq!(
            member_token("/d/member-12.kubeconfig+ctx"),
            Some("member-12")
        );
        assert_eq!(member_token("member-3"), Some("member-3"));
        assert_eq!(member_token("other"), None);
        let ack = |object: &str, value, at| load::Ack {
            object: object.into(),
            value,
            at,
        };
        let acks = vec![vec![
            ack("cm-0", 1, 100),
            ack("cm-0", 2, 200),
            ack("cm-1", 1, 150),
        ]];
        // Value 1 of cm-0 coalesced into the reconcile that saw 2; cm-1 never seen.
        let rises = json!([["/x/member-2.kubeconfig+member-2", "cm-0", [[2, "260"]]]]);
        let (lat, unseen) = update_latencies(&["member-2".into()], &acks, &rises).unwrap();
        assert_eq!(
            lat,
            vec![Duration::from_nanos(160), Duration::from_nanos(60)]
        );
        assert_eq!(unseen, 1);
    }

    #[test]
    fn the_host_is_not_a_member() {
        let dir = std::env::temp_dir().join(format!("mcr-bench-b8-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for n in 1..=3 {
            std::fs::write(dir.join(format!("member-{n}.kubeconfig")), "").unwrap();
        }
        let (host, members) = host_and_members(&dir).unwrap();
        assert_eq!(host, dir.join("member-1.kubeconfig"));
        assert_eq!(members.len(), 2);
        assert!(!members.contains(&host));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
