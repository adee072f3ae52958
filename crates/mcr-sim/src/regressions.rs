//! Seeds that found defects: run first by every `--seeds` run, so a fixed defect stays fixed.

use crate::plan::Scenario;

/// A seed that found a defect (with the scenario it ran under), and what it found.
pub const REGRESSIONS: &[(u64, Scenario, &str)] = &[];
