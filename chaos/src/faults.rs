//! The faults: what a round injects into which member, and how it is healed.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use anyhow::Result;
use mcr_envtest::{ErrorRule, Partition};
use tokio_util::sync::CancellationToken;

use crate::rng::Rng;
use crate::world::World;

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The API server stops (connections refused, watches cut), restarted at heal.
    Stop,
    /// Partition: connections refused.
    Refuse,
    /// Partition: requests accepted, never answered until heal.
    Hang,
    /// The watch history is compacted every 50 ms while writes go on: watches get 410.
    Storm,
    /// Every request is delayed (100 ms to 1.5 s).
    Slow,
    /// Requests answered with 500, 503 or 429 (all, or only watch, list or patch).
    Errors,
    /// The kubeconfig file is rewritten with a new credential.
    Rotate,
    /// The kubeconfig file is removed.
    Leave,
    /// The kubeconfig file is written back.
    Join,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Kind::Stop => "stop/restart",
            Kind::Refuse => "partition (refuse)",
            Kind::Hang => "partition (hang)",
            Kind::Storm => "410 storm (compaction)",
            Kind::Slow => "slow responses",
            Kind::Errors => "error responses",
            Kind::Rotate => "kubeconfig rotation",
            Kind::Leave => "cluster leaves",
            Kind::Join => "cluster joins",
        };
        f.write_str(name)
    }
}

/// Faults that need a healthy member to inject and are healed at the end of the window.
const EMULATED: &[Kind] = &[
    Kind::Stop,
    Kind::Refuse,
    Kind::Hang,
    Kind::Storm,
    Kind::Slow,
    Kind::Errors,
];
/// What the real backend supports (its loopback proxy partitions; the process stops).
const REAL: &[Kind] = &[Kind::Stop, Kind::Refuse, Kind::Hang];

/// One round's faults, by member.
pub type Plan = BTreeMap<usize, Kind>;

/// The kind named `name` (`stop`, `refuse`, `hang`, `storm`, `slow`, `errors`, `churn`:
/// rotation, leaving and joining).
pub fn parse(name: &str) -> Option<Vec<Kind>> {
    Some(match name {
        "stop" => vec![Kind::Stop],
        "refuse" => vec![Kind::Refuse],
        "hang" => vec![Kind::Hang],
        "storm" => vec![Kind::Storm],
        "slow" => vec![Kind::Slow],
        "errors" => vec![Kind::Errors],
        "churn" => vec![Kind::Rotate, Kind::Leave, Kind::Join],
        _ => return None,
    })
}

/// Picks a round's faults: about a quarter of the live members get a link fault; on the
/// emulator a few others rotate or leave, and absent members rejoin with even odds. Only
/// kinds in `only` (when given) are picked.
pub fn plan(rng: &mut Rng, world: &World, only: Option<&[Kind]>) -> Plan {
    let live = rng.shuffled(&world.live());
    let all = if world.real { REAL } else { EMULATED };
    let kinds: Vec<Kind> = all
        .iter()
        .copied()
        .filter(|k| only.is_none_or(|o| o.contains(k)))
        .collect();
    let faulted = (live.len() / 4).max(1).min(live.len());
    let mut plan = Plan::new();
    if !kinds.is_empty() {
        for &m in &live[..faulted] {
            plan.insert(m, kinds[rng.below(kinds.len() as u64) as usize]);
        }
    }
    if world.real || only.is_some_and(|o| !o.contains(&Kind::Rotate)) {
        return plan;
    }
    let rest = &live[faulted..];
    let churn = (world.members.len() / 20).max(1);
    for &m in rest.iter().take(churn) {
        plan.insert(m, Kind::Rotate);
    }
    // Keep at least half the fleet as members.
    let may_leave = rest.len().saturating_sub(world.members.len() / 2);
    for &m in rest.iter().skip(churn).take(churn.min(may_leave)) {
        if rng.chance(0.7) {
            plan.insert(m, Kind::Leave);
        }
    }
    for m in (0..world.members.len()).filter(|&m| !world.members[m].present) {
        if rng.chance(0.5) {
            plan.insert(m, Kind::Join);
        }
    }
    plan
}

/// Injects `kind` into member `m`; returns what must be cancelled at heal (storms).
pub async fn inject(
    world: &mut World,
    m: usize,
    kind: Kind,
    rng: &mut Rng,
) -> Result<Option<CancellationToken>> {
    let tc = world.members[m].tc.clone();
    match kind {
        Kind::Stop => tc.stop().await,
        Kind::Refuse => tc.partition(Partition::Refuse),
        Kind::Hang => tc.partition(Partition::Hang),
        Kind::Storm => {
            let stop = CancellationToken::new();
            tokio::spawn({
                let stop = stop.clone();
                async move {
                    while !stop.is_cancelled() {
                        tc.compact();
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            });
            return Ok(Some(stop));
        }
        Kind::Slow => tc.set_latency(Some(Duration::from_millis(100 + rng.below(1400)))),
        Kind::Errors => {
            let code = [500, 503, 429][rng.below(3) as usize];
            let rule = match rng.below(4) {
                0 => ErrorRule::new(code),
                1 => ErrorRule::new(code).verb("watch"),
                2 => ErrorRule::new(code).verb("list"),
                _ => ErrorRule::new(code).verb("patch"),
            };
            tc.inject_error(rule);
        }
        Kind::Rotate => world.rotate(m)?,
        Kind::Leave => world.leave(m)?,
        Kind::Join => world.join(m)?,
    }
    Ok(None)
}

/// Ends `kind` in member `m` (membership changes stay).
pub async fn heal(world: &World, m: usize, kind: Kind) -> Result<()> {
    let tc = &world.members[m].tc;
    match kind {
        Kind::Stop => tc.restart().await?,
        Kind::Refuse | Kind::Hang => tc.heal(),
        Kind::Slow | Kind::Errors => tc.clear_faults(),
        Kind::Storm | Kind::Rotate | Kind::Leave | Kind::Join => {}
    }
    Ok(())
}

/// Whether `kind` leaves the member out of the fleet.
pub fn departs(kind: Kind) -> bool {
    kind == Kind::Leave
}
