//! A whole run: start the fleet and the manager, engage every member, run the rounds under
//! load, then stop the faults and the loader and check the end state.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use mcr_envtest::TestCluster;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::check::{describe, names, wait_all};
use crate::load::{self, Load};
use crate::report::Report;
use crate::rng::Rng;
use crate::world::World;
use crate::{Args, child, leaks};

/// Every member engaged and reconciled at the start, within this.
pub const ENGAGE_BOUND: Duration = Duration::from_secs(180);
/// After the faults and the loader stop, every live member settled within this.
pub const SETTLE_BOUND: Duration = Duration::from_secs(120);
/// After every member left, the manager's tasks are back to their count with no member
/// (plus [`TASKS_SLACK`]) within this.
pub const TASKS_BOUND: Duration = Duration::from_secs(60);
/// Tasks allowed above the no-member count once every member left.
pub const TASKS_SLACK: usize = 8;
/// Objects per member.
pub const OBJECTS: usize = 4;

/// The state of a run.
pub struct Run {
    /// The fault plan's generator.
    pub rng: Rng,
    /// The members.
    pub world: World,
    /// One in-process client per member (the loader's and the checks').
    pub clients: Vec<kube::Client>,
    /// The manager under test (a child process).
    pub mgr: child::Manager,
    /// The loader.
    pub load: Arc<Load>,
    /// Stops the loader.
    load_stop: CancellationToken,
    load_task: tokio::task::JoinHandle<()>,
    /// The fault kinds to pick from (`--faults`), all when `None`.
    pub only: Option<Vec<crate::faults::Kind>>,
    /// When the run started.
    pub started: Instant,
}

/// Samples the manager's live tasks until two readings a second apart agree (at most 10 s);
/// the smaller reading.
async fn quiet_tasks(mgr: &mut child::Manager) -> Result<usize> {
    let mut last = mgr.stats().await?.tasks;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = mgr.stats().await?.tasks;
        if now == last {
            break;
        }
        last = last.min(now);
    }
    Ok(last)
}

/// Runs the suite; assertion failures go into the report, errors of the harness itself are
/// returned.
pub async fn run(args: &Args, report: &mut Report) -> Result<()> {
    let started = Instant::now();
    let mut world = World::start(args.clusters, OBJECTS).await?;
    report.real = world.real;
    println!(
        "{} members started ({:.1} s)",
        args.clusters,
        started.elapsed().as_secs_f64()
    );
    let host = TestCluster::start_https("host")
        .await
        .context("starting the host")?;
    let host_kubeconfig = world.write_host(&host)?;
    let mut mgr = child::Manager::start(
        &world.members_dir(),
        &host_kubeconfig,
        args.default_settings,
    )
    .await?;
    report.tasks_empty = quiet_tasks(&mut mgr).await?;

    // Every member joins and is reconciled.
    let all: Vec<usize> = (0..args.clusters).collect();
    for &m in &all {
        world.join(m)?;
    }
    let clients: Vec<kube::Client> = world.members.iter().map(|m| m.tc.client()).collect();
    let since = Instant::now();
    let waited = all
        .iter()
        .map(|&m| crate::check::Waited {
            member: m,
            client: clients[m].clone(),
            targets: None,
        })
        .collect();
    let (_, laggards) = wait_all(waited, OBJECTS, since, ENGAGE_BOUND).await;
    if !laggards.is_empty() {
        bail!(
            "not every member was reconciled within {} s of joining: {}",
            ENGAGE_BOUND.as_secs(),
            describe(&laggards)
        );
    }
    println!(
        "{} members engaged and reconciled in {:.1} s",
        args.clusters,
        since.elapsed().as_secs_f64()
    );
    report.tasks_full = quiet_tasks(&mut mgr).await?;

    let load_stop = CancellationToken::new();
    let rate = args
        .rate
        .unwrap_or((args.clusters as u32 * 4).clamp(20, 400));
    let (load, load_task) = load::start(clients.clone(), OBJECTS, rate, load_stop.clone());
    let mut run = Run {
        rng: Rng::new(args.seed.unwrap_or_default()),
        world,
        clients,
        mgr,
        load,
        load_stop,
        load_task,
        started,
        only: args.faults.as_ref().map(|names| {
            names
                .iter()
                .filter_map(|n| crate::faults::parse(n))
                .flatten()
                .collect()
        }),
    };

    let total = Duration::from_secs_f64(args.minutes * 60.0);
    let window = (total / 6).clamp(Duration::from_secs(5), Duration::from_secs(20));
    println!(
        "loader at {rate} writes/s; fault windows of {} s for {:.1} min",
        window.as_secs(),
        args.minutes
    );
    let faults_start = Instant::now();
    // Rounds until the time is up: a spinner on a terminal, a line per round in CI logs.
    let progress = mcr_progress::Progress::spinner("chaos");
    let mut r = 0;
    while r < 3 || faults_start.elapsed() + window < total {
        r += 1;
        progress.start(&format!("round {r}"));
        run.round(r, window, report).await?;
        progress.done();
    }
    progress.finish();
    run.finish(report).await
}

impl Run {
    /// Stops the loader, checks the end state, makes every member leave and checks that the
    /// manager forgets them, then stops the manager.
    async fn finish(mut self, report: &mut Report) -> Result<()> {
        self.load_stop.cancel();
        let _ = (&mut self.load_task).await;
        report.writes = (
            self.load.ok.load(Ordering::Relaxed),
            self.load.failed.load(Ordering::Relaxed),
        );

        // Every object's last written value reconciled by both controllers in every live member.
        let live = self.world.live();
        let since = Instant::now();
        let (_, laggards) = wait_all(self.waited(&live, true), OBJECTS, since, SETTLE_BOUND).await;
        if laggards.is_empty() {
            report.settle = Some(since.elapsed());
        } else {
            report.fail(format!(
                "not settled within {} s of the faults stopping: {}",
                SETTLE_BOUND.as_secs(),
                describe(&laggards)
            ));
        }

        // The manager's views match the live members; one informer per member.
        let (seen, stats) = leaks::seen(&mut self.mgr, &self.world).await?;
        let want: BTreeSet<usize> = live.iter().copied().collect();
        for (view, got) in [
            ("engaged_clusters", &seen.engaged),
            ("cluster_statuses", &seen.statuses),
            ("/clusters", &seen.endpoint),
        ] {
            if *got != want {
                let extra: Vec<usize> = got.difference(&want).copied().collect();
                let missing: Vec<usize> = want.difference(got).copied().collect();
                report.fail(format!(
                    "{view} differs from the live members: extra [{}], missing [{}]",
                    names(&extra),
                    names(&missing)
                ));
            }
        }
        if let Some(extra) = seen.gauges.difference(&want).next() {
            report.fail(format!(
                "/metrics has per-cluster gauges of departed member-{}",
                extra + 1
            ));
        }
        if seen.engaged_gauge.iter().any(|&n| n != want.len() as u64) {
            report.fail(format!(
                "mcr_engaged_clusters {:?}, live members {}",
                seen.engaged_gauge,
                want.len()
            ));
        }
        for (m, n) in leaks::informers(&stats, &self.world) {
            if n != 1 {
                report.fail(format!(
                    "member-{} runs {n} informers, expected 1 (shared by both controllers)",
                    m + 1
                ));
            }
        }

        // Every member leaves: no view shows any, and the per-member tasks are gone.
        let since = Instant::now();
        for m in &live {
            self.world.leave(*m)?;
        }
        let everyone: BTreeSet<usize> = (0..self.world.members.len()).collect();
        self.forget(report.rounds + 1, &everyone, since, report)
            .await?;
        let deadline = Instant::now() + TASKS_BOUND;
        let limit = report.tasks_empty + TASKS_SLACK;
        let mut tasks = self.mgr.stats().await?.tasks;
        while tasks > limit && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            tasks = self.mgr.stats().await?.tasks;
        }
        report.tasks_after = Some(tasks);
        if tasks > limit {
            report.fail(format!(
                "{tasks} manager tasks {} s after every member left; {} with no member before (allowed +{TASKS_SLACK})",
                TASKS_BOUND.as_secs(),
                report.tasks_empty
            ));
        }

        let panics = self.mgr.stats().await?.panics;
        if panics > 0 {
            report.fail(format!(
                "{panics} panics in the manager process (see its stderr above)"
            ));
        }
        if let Err(err) = self.mgr.stop().await {
            report.fail(format!("the manager did not stop cleanly: {err:#}"));
        }
        Ok(())
    }
}
