//! The report: one [`Scenario`] per benchmark, printed as a table and written as JSON.

use std::{fmt::Write as _, path::Path};

use anyhow::{Context as _, Result};
use serde::Serialize;
use serde_json::Value;

use crate::machine::Machine;

/// One figure of a scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Metric {
    /// What was measured.
    pub name: String,
    /// The value (`None` when the scenario failed before measuring it).
    pub value: Option<f64>,
    /// Its unit.
    pub unit: String,
}

/// One benchmark's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    /// `B1` .. `B6`, `E1`, `E2`.
    pub id: String,
    /// What ran.
    pub title: String,
    /// The figures.
    pub metrics: Vec<Metric>,
    /// The goal, in words.
    pub goal: String,
    /// Whether the goal was met (`None`: not measured).
    pub goal_met: Option<bool>,
    /// Failure message, if the scenario failed.
    pub error: Option<String>,
    /// Regression guards that tripped: a figure worse than its recorded value by more than
    /// the guard's tolerance (see [`crate::scenarios::https::GUARD`]). Any entry makes
    /// `mcr-bench all` exit with a failure once the report is written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regressions: Vec<String>,
    /// Raw per-run results from the child processes.
    pub runs: Vec<Value>,
}

impl Scenario {
    /// An empty scenario.
    pub fn new(id: &str, title: impl Into<String>, goal: impl Into<String>) -> Scenario {
        Scenario {
            id: id.into(),
            title: title.into(),
            metrics: Vec::new(),
            goal: goal.into(),
            goal_met: None,
            error: None,
            regressions: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// Adds a figure.
    pub fn metric(&mut self, name: &str, value: Option<f64>, unit: &str) {
        self.metrics.push(Metric {
            name: name.into(),
            value,
            unit: unit.into(),
        });
    }
}

impl Scenario {
    /// Appends the figures and runs of `other` (another variant of the same scenario) with
    /// their names prefixed by `label`; `other`'s goal does not count, its error does.
    pub fn absorb(&mut self, other: Scenario, label: &str) {
        for m in other.metrics {
            self.metric(&format!("{label}{}", m.name), m.value, &m.unit);
        }
        self.runs.extend(other.runs);
        self.regressions.extend(other.regressions);
        if let Some(err) = other.error {
            let err = format!("{label}{err}");
            self.error = Some(match self.error.take() {
                Some(mine) => format!("{mine}; {err}"),
                None => err,
            });
        }
    }
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// When the run started (RFC 3339 with zone).
    pub date: String,
    /// `--quick` or the full sizes.
    pub quick: bool,
    /// The machine.
    pub machine: Machine,
    /// How the kube-runtime baseline is configured.
    pub baseline: String,
    /// Every scenario, in order.
    pub scenarios: Vec<Scenario>,
}

fn fmt_value(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.3}"),
    }
}

impl Report {
    /// The table as Markdown (also printed to the terminal).
    pub fn table(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(
            out,
            "mcr benchmarks{} - {} - {} cores, {:.1} GiB RAM{}\n",
            if self.quick { " (--quick)" } else { "" },
            self.date,
            m.cores,
            m.mem_total_kib as f64 / 1024.0 / 1024.0,
            m.cpu
                .as_deref()
                .map(|c| format!(", {c}"))
                .unwrap_or_default(),
        );
        out.push_str("| id | metric | value | goal | met |\n|---|---|---|---|---|\n");
        for s in &self.scenarios {
            let met = match (s.goal_met, &s.error) {
                (_, Some(_)) => "FAILED",
                (Some(true), _) => "yes",
                (Some(false), _) => "**no**",
                (None, _) => "-",
            };
            for (i, metric) in s.metrics.iter().enumerate() {
                let (goal, met) = if i == 0 {
                    (s.goal.as_str(), met)
                } else {
                    ("", "")
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} {} | {} | {} |",
                    if i == 0 { s.id.as_str() } else { "" },
                    metric.name,
                    fmt_value(metric.value),
                    metric.unit,
                    goal,
                    met
                );
            }
            if let Some(err) = &s.error {
                let _ = writeln!(out, "| {} | error: {} | | {} | FAILED |", s.id, err, s.goal);
            }
            for regression in &s.regressions {
                let _ = writeln!(
                    out,
                    "| {} | REGRESSION: {} | | | FAILED |",
                    s.id, regression
                );
            }
        }
        out
    }

    /// What makes the suite fail, each prefixed by its scenario's id: a scenario that did not
    /// run to the end (its error), and every tripped regression guard. A missed goal is a
    /// figure of the report, not a failure.
    pub fn failures(&self) -> Vec<String> {
        self.scenarios
            .iter()
            .flat_map(|s| {
                let error = s
                    .error
                    .iter()
                    .map(move |e| format!("{}: did not run: {e}", s.id));
                let guards = s.regressions.iter().map(move |r| format!("{}: {r}", s.id));
                error.chain(guards)
            })
            .collect()
    }

    /// Writes the JSON report, creating the directory.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(scenarios: Vec<Scenario>) -> Report {
        Report {
            date: String::new(),
            quick: true,
            machine: Machine::current(),
            baseline: String::new(),
            scenarios,
        }
    }

    #[test]
    fn a_scenario_that_failed_to_run_fails_the_suite() {
        let mut ran = Scenario::new("B1", "ran", "goal");
        ran.goal_met = Some(false);
        let mut broken = Scenario::new("C1", "broken", "goal");
        broken.error = Some("`mcr-bench run-one c1 replace --quick` failed".into());
        let mut guarded = Scenario::new("B4", "guarded", "goal");
        guarded.regressions.push("peak RSS per cluster grew".into());
        let failures = report(vec![ran, broken, guarded]).failures();
        // A missed goal is a figure, not a failure; an error or a tripped guard is.
        assert_eq!(
            failures,
            [
                "C1: did not run: `mcr-bench run-one c1 replace --quick` failed",
                "B4: peak RSS per cluster grew",
            ]
        );
    }
}
