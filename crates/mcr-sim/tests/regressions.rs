//! Every seed that once found a defect (`REGRESSIONS`: the six of issue 46 and those found
//! since) passes: run by the workspace's tests, so a defect that comes back fails CI. The wide
//! run over 10,000 seeds is `cargo xtask sim --seeds 10000` (crates/mcr-sim/README.md).

use mcr_sim::{Options, REGRESSIONS};

#[test]
fn every_regression_seed_passes() {
    let mut failed = Vec::new();
    for (seed, scenario, found) in REGRESSIONS {
        let opts = Options {
            scenario: *scenario,
            ..Options::default()
        };
        let outcome = mcr_sim::run(*seed, &opts);
        if !outcome.violations.is_empty() {
            failed.push(format!(
                "seed {seed} ({scenario:?}; once found: {found}): {:?}\n{}",
                outcome.violations,
                outcome.trace.lines().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
