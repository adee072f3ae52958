//! Seeds that found defects: run first by every `--seeds` run, so a fixed defect stays fixed.
//!
//! Each entry is the seed, the mix it ran under, and what it found on the code it was found
//! on (the "before": the first six on the code of 9936c37, before the engagement table was
//! reworked; issue 46 lists the first five). All pass on the reworked table; the sixth failed
//! on it too (the same churn) until the peer table ignored replayed Lease versions that a
//! consistent list already reflected. Seed 10's moment (a member between two phases of the
//! old table) does not exist on the reworked one, so the seventh entry lands the same removal
//! on a member coming home there. A change to the plan generator, the world's draws or the
//! invariants re-draws every seed: find the seeds again then (run the scenario's seeds and
//! read the traces) and replace them here.

use crate::plan::Scenario;

/// A seed that found a defect (with the scenario it ran under), and what it found.
pub const REGRESSIONS: &[(u64, Scenario, &str)] = &[
    (
        70,
        Scenario::Mixed,
        "orphan behind a hung watch: r2 joins with its peer-Lease watch hung; r1 releases r2's \
         share and claims both, but r2 learns of r1's new claim only by a list whose answer it \
         does not publish: m1, m2, m3 reconciled by no one",
    ),
    (
        248,
        Scenario::Mixed,
        "churn when a replica joins while a live peer's Lease is missing (relabelled by hand): \
         r2's first claim misses r1, r1 honours it, releases m0 and m5 and engages them again",
    ),
    (
        10,
        Scenario::Mixed,
        "a removal lost while a member comes home from parked: the provider's remove of m1 lands \
         between the table's sweep and the spawned add (`remove` finds nothing); m1 stays engaged",
    ),
    (
        9,
        Scenario::Mixed,
        "overlap for a cluster engaged by hand on a sharded manager: nothing stops h0 on r1 when \
         r3 comes to own it; the handoff hands it over anyway after the lease duration",
    ),
    (
        3,
        Scenario::Mixed,
        "overlap with the namespace provider: members given away are not stopped, the handoff \
         hands them over anyway, both replicas reconcile m4 and m8",
    ),
    (
        45,
        Scenario::Mixed,
        "churn after a hung peer-Lease watch resumes: the server replays the Lease writes of a \
         peer that left, whose entry the peer table had dropped; the replayed versions bring it \
         back for a lease duration, and r2 releases and re-engages m0 and m4",
    ),
    (
        1,
        Scenario::RemoveWhileMoving,
        "a removal landing as a member comes home (owned elsewhere at the last step, its first \
         attempt under way now): m1 removed on r2 at 7.7 s must be out of r2's table at once",
    ),
    (
        1670,
        Scenario::Mixed,
        "churn when two replicas start together: each listens before its first claim without a \
         Lease of its own, neither hears of the other, r1 claims everything, engages m1 at 2.4 s \
         and hands it to r2 at 2.8 s (fixed by announcing with an empty claim before listening)",
    ),
    (
        1000,
        Scenario::Mixed,
        "overlap after a pause: r2, paused with its peer-Lease watch hung, comes back to a \
         consistent list that misses r1's Lease (deleted by hand); r2 takes r1's last claim it \
         saw (from before r1 took r2 for gone and claimed everything) and engages m1, m2, m3, m6 \
         while r1 holds them",
    ),
    (
        825,
        Scenario::Mixed,
        "a removal never reaching a replica: its namespace watch request was swallowed by the \
         host path (never answered) and held the provider's watch for the rest of the run; m0, \
         unlabelled at 36 s, stays in r1's table (failed in 5 runs of 8: std's hash order)",
    ),
    (
        728,
        Scenario::Mixed,
        "churn after a hung peer-Lease watch resumes: it replays r3's older Lease, whose claim \
         still names r2, gone for two lease durations; r2 comes back as an indirect peer and r1 \
         releases m2, m3, m6, m9 and engages them again 0.7 s later",
    ),
    (
        7355,
        Scenario::Mixed,
        "no convergence: r2's peer-Lease watch request was swallowed while its host path failed \
         requests; r2 never heard of r1 joining after the faults (it lists only when a peer \
         expires) and kept m0 and m4 to the end (a watch that does not show this replica's own \
         renewals is now found deaf: peers listed, watch opened again)",
    ),
    (
        5116,
        Scenario::Mixed,
        "no convergence with the namespace provider: m1 unwanted then wanted again; the watch \
         then delivered the older (unwanted) version again, the host informer's store went back \
         to it, and r1 let m1 go for good",
    ),
    (
        6375,
        Scenario::Mixed,
        "orphan (a bound of the checker's model): r1's host path fails 28% of its requests, so \
         r1 stays live while its takeover of dead r2's members stalls; the model counted r1 \
         unavailable and held m2 to r3",
    ),
];
