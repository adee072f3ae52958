//! The checker can fail: replicas that do not shard (each owns every member) must be caught
//! reconciling one member at once, through the whole machinery (runtimes, wire, emulator,
//! controller, probes).

use mcr_sim::{Invariant, Options, Plan, Scenario};

#[test]
fn unsharded_replicas_are_caught_overlapping() {
    let seed = (1..)
        .find(|s| Plan::generate(*s, Scenario::Mixed).initial.len() >= 2)
        .expect("some plan starts two replicas");
    let opts = Options {
        sharded: false,
        stop_at_first: false,
        ..Options::default()
    };
    let outcome = mcr_sim::run(seed, &opts);
    // (Both engage every member at once: churn is reported first.)
    assert!(
        outcome
            .violations
            .iter()
            .any(|v| v.invariant == Invariant::Overlap),
        "seed {seed}: {:?}\n{}",
        outcome.violations,
        outcome.trace.lines().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_seed_draws_one_plan() {
    for seed in 1..50 {
        let a = Plan::generate(seed, Scenario::Mixed);
        let b = Plan::generate(seed, Scenario::Mixed);
        assert_eq!(a.events, b.events, "seed {seed}");
        assert_eq!(a.summary(), b.summary());
    }
}
