//! One round: inject a random plan, check that the members without a fault keep up while the
//! faults last, heal, and measure how long each faulted member takes to catch up.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use tokio::time::Instant;

use crate::check::{Waited, describe, names, wait_all};
use crate::faults;
use crate::report::Report;
use crate::run::Run;
use crate::{child, leaks};

/// Members without a fault must catch up with the loader within this, faults still on.
pub const ISOLATION_BOUND: Duration = Duration::from_secs(60);
/// After heal, every live member must catch up within this.
pub const RECOVER_BOUND: Duration = Duration::from_secs(120);
/// A departed member must vanish from every manager view within this.
pub const FORGET_BOUND: Duration = Duration::from_secs(60);

impl Run {
    /// Targets for `members`: what the loader has acknowledged so far.
    pub fn waited(&self, members: &[usize], settle: bool) -> Vec<Waited> {
        members
            .iter()
            .map(|&m| Waited {
                member: m,
                client: self.clients[m].clone(),
                targets: (!settle).then(|| self.load.acked(m)),
            })
            .collect()
    }

    /// Runs round `r` with faults lasting `window`.
    pub async fn round(&mut self, r: usize, window: Duration, report: &mut Report) -> Result<()> {
        let plan = faults::plan(&mut self.rng, &self.world, self.only.as_deref());
        let kinds: Vec<String> = plan.iter().map(|(m, k)| format!("{}:{k}", m + 1)).collect();
        println!("round {r}: {}", kinds.join(", "));
        let start = Instant::now();
        let mut storms = Vec::new();
        for (&m, &kind) in &plan {
            if let Some(storm) = faults::inject(&mut self.world, m, kind, &mut self.rng).await? {
                storms.push(storm);
            }
            *report.injected.entry(kind).or_default() += 1;
        }

        // Departed members vanish from every view (faults on elsewhere).
        let gone: BTreeSet<usize> = plan
            .iter()
            .filter(|(_, k)| faults::departs(**k))
            .map(|(m, _)| *m)
            .collect();
        self.forget(r, &gone, start, report).await?;

        // Fault isolation: half-way through, the members without a fault reconcile values
        // written from then on, while the faults stay.
        tokio::time::sleep_until(start + window / 2).await;
        let healthy: Vec<usize> = self
            .world
            .live()
            .into_iter()
            .filter(|m| !plan.contains_key(m))
            .collect();
        let (times, laggards) = wait_all(
            self.waited(&healthy, false),
            self.world.objects,
            Instant::now(),
            ISOLATION_BOUND,
        )
        .await;
        let slowest = |times: &[(usize, Option<Duration>)]| {
            let max = times.iter().filter_map(|(_, t)| *t).max();
            max.unwrap_or_default().as_secs_f64()
        };
        let isolation_max = slowest(&times);
        report
            .isolation
            .extend(times.iter().filter_map(|(_, t)| *t));
        if !laggards.is_empty() {
            report.fail(format!(
                "round {r}: members without a fault did not catch up within {} s while others were faulted: {}",
                ISOLATION_BOUND.as_secs(),
                describe(&laggards)
            ));
        }
        tokio::time::sleep_until(start + window).await;

        // Heal, then every live member reconciles values written after heal.
        for storm in storms {
            storm.cancel();
        }
        for (&m, &kind) in &plan {
            faults::heal(&self.world, m, kind).await?;
        }
        let healed = Instant::now();
        let live = self.world.live();
        let (times, laggards) = wait_all(
            self.waited(&live, false),
            self.world.objects,
            healed,
            RECOVER_BOUND,
        )
        .await;
        report.recover.extend(
            times
                .iter()
                .filter(|(m, _)| plan.contains_key(m))
                .filter_map(|(_, t)| *t),
        );
        println!(
            "round {r}: slowest healthy member {isolation_max:.1} s, slowest recovery {:.1} s",
            slowest(&times)
        );
        if !laggards.is_empty() {
            report.fail(format!(
                "round {r}: not caught up within {} s of heal: {}",
                RECOVER_BOUND.as_secs(),
                describe(&laggards)
            ));
        }

        self.sample(report, r).await?;
        Ok(())
    }

    /// Waits until no manager view shows a member of `gone`; records the time since `since`.
    pub async fn forget(
        &mut self,
        r: usize,
        gone: &BTreeSet<usize>,
        since: Instant,
        report: &mut Report,
    ) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        let deadline = Instant::now() + FORGET_BOUND;
        loop {
            let (seen, _) = leaks::seen(&mut self.mgr, &self.world).await?;
            let left: Vec<usize> = seen.any().intersection(gone).copied().collect();
            if left.is_empty() {
                let took = since.elapsed();
                report.forget.extend(gone.iter().map(|_| took));
                return Ok(());
            }
            if Instant::now() >= deadline {
                report.fail(format!(
                    "round {r}: departed members still shown after {} s: {} (engaged {:?}, statuses {:?}, /clusters {:?}, gauges {:?})",
                    FORGET_BOUND.as_secs(),
                    names(&left),
                    names_of(&seen.engaged, gone),
                    names_of(&seen.statuses, gone),
                    names_of(&seen.endpoint, gone),
                    names_of(&seen.gauges, gone),
                ));
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// End of a round: the emulator's watch history is compacted (bounding the emulator's
    /// memory), then the manager process's RSS and live tasks are sampled.
    async fn sample(&mut self, report: &mut Report, r: usize) -> Result<()> {
        if !self.world.real {
            for member in &self.world.members {
                member.tc.compact();
            }
        }
        // RSS as the allocator left it, then after it handed free pages back: the check uses
        // the latter, which follows the live heap (see trim.rs).
        let high_water = child::rss_of(self.mgr.pid());
        self.mgr.trim().await?;
        let rss = child::rss_of(self.mgr.pid());
        let stats = self.mgr.stats().await?;
        let (tasks, engaged) = (stats.tasks, stats.engaged.len());
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        println!(
            "round {r}: done at {:.0} s, manager RSS {:.1} MiB ({:.1} before malloc_trim), tasks {tasks} with {engaged} members",
            self.started.elapsed().as_secs_f64(),
            mib(rss),
            mib(high_water)
        );
        report.rss.push(rss);
        report.tasks_rounds.push((tasks, engaged));
        report.rounds = r;
        Ok(())
    }
}

fn names_of(set: &BTreeSet<usize>, gone: &BTreeSet<usize>) -> String {
    names(&set.intersection(gone).copied().collect::<Vec<_>>())
}
