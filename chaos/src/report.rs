//! What a run measured, its assertions, and the summary it prints.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::faults::Kind;

/// RSS may grow this much between the first and the last third of the rounds (fraction)...
pub const RSS_TOLERANCE: f64 = 0.20;
/// ... plus this many bytes (allocator noise on small runs).
pub const RSS_SLACK: u64 = 16 << 20;
/// Once warmed up (connection pools filled to the fault load, caches listed), RSS is flat: the
/// last third of the rounds may exceed the middle third by this fraction...
pub const RSS_STEADY_TOLERANCE: f64 = 0.03;
/// ... plus this many bytes.
pub const RSS_STEADY_SLACK: u64 = 1 << 20;

/// Everything a run records.
#[derive(Default)]
pub struct Report {
    /// The seed of the fault plan.
    pub seed: u64,
    /// Member clusters.
    pub clusters: usize,
    /// Real control planes.
    pub real: bool,
    /// Rounds run.
    pub rounds: usize,
    /// Faults injected, by kind.
    pub injected: BTreeMap<Kind, u64>,
    /// Per faulted member and round: heal to caught up.
    pub recover: Vec<Duration>,
    /// Per healthy member and round: mid-window snapshot to caught up, faults still on.
    pub isolation: Vec<Duration>,
    /// Per departed member and round: leave to gone from every manager view.
    pub forget: Vec<Duration>,
    /// Faults stopped to every live member settled.
    pub settle: Option<Duration>,
    /// RSS of the manager process after each round (bytes).
    pub rss: Vec<u64>,
    /// Live tasks of the manager process: with no member, with all members at the start, at
    /// the end of each round (with the number of engaged members), after every member left.
    pub tasks_empty: usize,
    /// See [`Report::tasks_empty`].
    pub tasks_full: usize,
    /// See [`Report::tasks_empty`].
    pub tasks_rounds: Vec<(usize, usize)>,
    /// See [`Report::tasks_empty`].
    pub tasks_after: Option<usize>,
    /// Loader writes acknowledged / failed.
    pub writes: (u64, u64),
    /// Panics counted by the hook.
    pub panics: u64,
    /// Failed assertions.
    pub failures: Vec<String>,
}

/// The `q` quantile (nearest rank) of `samples`.
pub fn quantile(samples: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1u64 << 20) as f64)
}

fn dist(samples: &[Duration]) -> String {
    match (quantile(samples, 0.5), quantile(samples, 0.99)) {
        (Some(p50), Some(p99)) => format!(
            "p50 {:.2} s, p99 {:.2} s, max {:.2} s ({} samples)",
            p50.as_secs_f64(),
            p99.as_secs_f64(),
            samples
                .iter()
                .max()
                .copied()
                .unwrap_or_default()
                .as_secs_f64(),
            samples.len()
        ),
        _ => "no samples".into(),
    }
}

impl Report {
    /// Records a failed assertion (printed at once and in the summary).
    pub fn fail(&mut self, msg: String) {
        eprintln!("chaos: FAILED: {msg}");
        self.failures.push(msg);
    }

    /// Mean RSS of the first, the middle and the last third of the rounds; `None` below
    /// three rounds.
    pub fn rss_thirds(&self) -> Option<(f64, f64, f64)> {
        let third = self.rss.len() / 3;
        if third == 0 {
            return None;
        }
        let mean = |s: &[u64]| s.iter().sum::<u64>() as f64 / s.len() as f64;
        let n = self.rss.len();
        Some((
            mean(&self.rss[..third]),
            mean(&self.rss[third..n - third]),
            mean(&self.rss[n - third..]),
        ))
    }

    /// Asserts that RSS did not grow between the first and the last third, nor (once warmed
    /// up) between the middle and the last third.
    pub fn check_rss(&mut self) {
        let Some((first, middle, last)) = self.rss_thirds() else {
            let rounds = self.rss.len();
            return self.fail(format!("only {rounds} rounds: RSS needs at least 3"));
        };
        let checks = [
            ("RSS grew: first", first, RSS_TOLERANCE, RSS_SLACK),
            (
                "RSS still growing once warmed up: middle",
                middle,
                RSS_STEADY_TOLERANCE,
                RSS_STEADY_SLACK,
            ),
        ];
        for (what, base, tolerance, slack) in checks {
            let allowed = base * (1.0 + tolerance) + slack as f64;
            if last > allowed {
                self.fail(format!(
                    "{what} third {}, last third {} (allowed {})",
                    mib(base),
                    mib(last),
                    mib(allowed)
                ));
            }
        }
    }

    /// Writes the figures (durations in seconds) as JSON to `path`, for the charts of
    /// `cargo xtask bench`.
    pub fn write_json(&self, path: &std::path::Path) -> std::io::Result<()> {
        let secs = |d: &[Duration]| d.iter().map(Duration::as_secs_f64).collect::<Vec<_>>();
        let json = serde_json::json!({
            "seed": self.seed,
            "clusters": self.clusters,
            "real": self.real,
            "rounds": self.rounds,
            "recover_seconds": secs(&self.recover),
            "isolation_seconds": secs(&self.isolation),
            "forget_seconds": secs(&self.forget),
            "settle_seconds": self.settle.map(|d| d.as_secs_f64()),
            "failures": self.failures,
        });
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)
    }

    /// Prints the summary.
    pub fn print(&self) {
        let backend = if self.real { "real" } else { "emulator" };
        println!("\n== mcr chaos summary");
        println!(
            "seed {} | {} clusters ({backend}) | {} rounds",
            self.seed, self.clusters, self.rounds
        );
        println!("faults injected:");
        for (kind, n) in &self.injected {
            println!("  {kind:<24} {n}");
        }
        println!(
            "loader writes: {} acknowledged, {} failed",
            self.writes.0, self.writes.1
        );
        println!(
            "time to recover (heal -> faulted member caught up): {}",
            dist(&self.recover)
        );
        println!(
            "healthy members during faults (snapshot -> caught up): {}",
            dist(&self.isolation)
        );
        println!("departed member forgotten: {}", dist(&self.forget));
        match self.settle {
            Some(d) => println!(
                "faults stopped -> every live member settled: {:.2} s",
                d.as_secs_f64()
            ),
            None => println!("faults stopped -> every live member settled: NOT within the bound"),
        }
        if let Some((first, middle, last)) = self.rss_thirds() {
            println!(
                "manager RSS first third {}, last third {} ({:+.1}%; allowed +{:.0}% + {})",
                mib(first),
                mib(last),
                (last / first - 1.0) * 100.0,
                RSS_TOLERANCE * 100.0,
                mib(RSS_SLACK as f64)
            );
            println!(
                "manager RSS warmed up: middle third {}, last third {} ({:+.1}%; allowed +{:.0}% + {})",
                mib(middle),
                mib(last),
                (last / middle - 1.0) * 100.0,
                RSS_STEADY_TOLERANCE * 100.0,
                mib(RSS_STEADY_SLACK as f64)
            );
        }
        let rounds: Vec<String> = self
            .tasks_rounds
            .iter()
            .map(|(t, m)| format!("{t}/{m}"))
            .collect();
        println!(
            "manager tasks: {} with no member, {} with {} members, per round (tasks/members) {}, {} after all left",
            self.tasks_empty,
            self.tasks_full,
            self.clusters,
            rounds.join(" "),
            self.tasks_after.map_or("?".into(), |t| t.to_string())
        );
        println!("panics: {}", self.panics);
        if self.failures.is_empty() {
            println!("RESULT: PASS");
        } else {
            println!("RESULT: FAIL ({} failed assertions)", self.failures.len());
            for f in &self.failures {
                println!("  - {f}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_rss(mib: &[u64]) -> Report {
        Report {
            rss: mib.iter().map(|m| m << 20).collect(),
            ..Report::default()
        }
    }

    #[test]
    fn warm_up_then_flat_passes() {
        // The 50-cluster run after the pool-timer fix (MiB, rounded).
        let mut report = with_rss(&[28, 30, 31, 33, 32, 32, 32, 32, 32]);
        report.check_rss();
        assert!(report.failures.is_empty(), "{:?}", report.failures);
    }

    #[test]
    fn steady_growth_fails_even_within_the_first_third_bound() {
        // Growing ~1 MiB a round: within +20 % + 16 MiB of the first third, not flat.
        let mut report = with_rss(&[46, 48, 51, 53, 55, 55, 55, 56, 57, 57, 58, 59, 61, 61, 62]);
        report.check_rss();
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        assert!(report.failures[0].contains("still growing"));
    }

    #[test]
    fn too_few_rounds_is_a_failure() {
        let mut report = with_rss(&[10, 10]);
        report.check_rss();
        assert_eq!(report.failures.len(), 1);
    }
}
