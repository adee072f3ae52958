//! The invariants, checked after every step (and, for reconciles, at every poll).
//!
//! Words used below:
//!
//! - A replica is **existing** from its start until it is killed or told to stop.
//! - An existing replica is **disrupted** while it is paused (SIGSTOP) or its host path is
//!   partitioned or answers errors; otherwise it is **healthy**. Watch faults, latency and
//!   stale lists do not disrupt: the protocol must see through them.
//! - The simulation is **excused** at a step when no replica is healthy, or when some
//!   replica's current disruption began less than [`Bounds::excuse`] (lease duration plus
//!   renew period) ago: long enough for the others to take a silent replica for gone. A
//!   longer disruption no longer excuses: the others must have taken over.
//! - The **model owner** of a member is the rendezvous-hash owner over the healthy replicas
//!   ([`crate::model`]).
//!
//! The invariants:
//!
//! 1. **Overlap**: no two replica processes run reconcile code for one member at the same
//!    moment. Each reconcile invocation is the span from its first to its last poll (virtual
//!    time, inclusive); spans of two processes for one member must not intersect.
//! 2. **Orphan**: while not excused, every wanted member (other than the one engaged by hand)
//!    is reconciled at least every [`Bounds::orphan`] (lease duration plus one sync, see
//!    [`Bounds`]), counted from the latest of: when it became wanted, its last reconcile, the
//!    last excused step.
//! 3. **Churn**: engagements of a member never exceed `1 +` its changes of model owner `+` the
//!    provider's re-adds and replacements of it `+` restarts of its owner `+` the changes to
//!    an owner that started less than [`Bounds::orphan`] ago (the model counts a replica
//!    from its start, its peers from its first claim: another may cover the member
//!    meanwhile). Engagements made
//!    while excused, or within [`Bounds::orphan`] after, are free (a disrupted replica may
//!    fence itself and come back more than once).
//! 4. **Removal**: a member removed from the provider's source is out of a replica's table
//!    (no phase) and runs no reconcile code there within [`Bounds::removal`] of the removal
//!    reaching that replica (the provider call; for the namespace provider, the namespace
//!    unlabelled, or the replica's host path clear of faults, whichever is later).
//! 5. **Table size**: a replica's table holds no more members than are wanted or still
//!    within their removal bound.
//! 6. **Convergence** (at the end of the quiet tail): every wanted member is engaged on its
//!    model owner and owned elsewhere on every other replica, and every replica's own answer
//!    to "who owns it" (`Fleet::owner`) agrees with the model.
//! 7. **Refusal**: a cluster engaged by hand (`Aware::engage`) on a sharded manager is
//!    refused, every time, whoever owns its name: the table could not stop it when another
//!    replica comes to own it.

use std::collections::{BTreeMap, BTreeSet};

use mcr_core::MemberState;

use crate::clock::{Ms, show};
use crate::wire::Sender;

/// The bounds the invariants use, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Longest time a wanted member may go unreconciled (not excused): the lease duration,
    /// plus one sync: a renew period (to see the change), the lists and the claim of a
    /// handoff, the member's informers listing, and one reconcile cycle (its work and its
    /// requeue), with the network's latency on each request.
    pub orphan: Ms,
    /// How long a replica's disruption excuses the orphan invariant.
    pub excuse: Ms,
    /// How long a removed member may stay after the removal reached a replica.
    pub removal: Ms,
    /// How much longer a replica whose peer-Lease watch hung may take to take a peer for
    /// gone when that peer's Lease was deleted meanwhile: its consistent list misses the
    /// Lease while its watch never showed the deletion, so the protocol restarts the peer's
    /// clock (a lease duration more).
    pub restart: Ms,
}

/// Which invariant broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Invariant {
    /// Two replicas ran reconcile code for one member at the same moment.
    Overlap,
    /// A member went unreconciled for too long.
    Orphan,
    /// A member was engaged more often than its owner changed.
    Churn,
    /// A removed member stayed.
    Removal,
    /// A table held more members than wanted.
    TableSize,
    /// The replicas did not converge on the model's assignment.
    Convergence,
    /// An engagement by hand on a sharded manager was accepted.
    Refusal,
}

impl std::fmt::Display for Invariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Invariant::Overlap => "overlap",
            Invariant::Orphan => "orphan",
            Invariant::Churn => "churn",
            Invariant::Removal => "removal",
            Invariant::TableSize => "table-size",
            Invariant::Convergence => "convergence",
            Invariant::Refusal => "refusal",
        })
    }
}

/// An invariant broken at a moment.
#[derive(Clone, Debug)]
pub struct Violation {
    /// When it was found.
    pub at: Ms,
    /// Which invariant.
    pub invariant: Invariant,
    /// What was seen.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at {}: {}",
            self.invariant,
            show(self.at),
            self.detail
        )
    }
}

/// One reconcile invocation: the span of its polls.
#[derive(Clone, Copy, Debug)]
struct Invocation {
    by: Sender,
    id: u64,
    first: Ms,
    last: Ms,
}

/// What the checker knows of a member.
#[derive(Debug, Default)]
struct Member {
    /// Engaged by hand (not the provider's): not held to the orphan and churn invariants.
    hand: bool,
    wanted: bool,
    /// When it became wanted, or was removed.
    since: Ms,
    last_reconcile: Option<Ms>,
    /// Its model owner at the last step.
    owner: Option<String>,
    /// When its model owner last changed: the new owner takes it over from then (a delay
    /// the old owner was allowed, such as a hung peer-Lease watch, is not carried over).
    owner_since: Ms,
    /// Engagements counted against the allowance.
    counted: u32,
    /// `1 +` changes of model owner `+` provider re-adds and replacements `+` owner restarts.
    allowance: u32,
    /// Every engagement: when, by whom, and whether it was free.
    history: Vec<(Ms, Sender, bool)>,
    /// An orphan episode already reported (reset by a reconcile).
    orphan_reported: bool,
    /// When the removal reached each replica.
    removal_reached: BTreeMap<u8, Ms>,
}

/// Where a member stands in a replica's table ([`MemberState`] without its details): an
/// entry of the table, whatever its state, is a member the table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Engaged, no newer instance on its way.
    Engaged,
    /// Being brought up (or a newer instance on its way).
    Pending,
    /// Its last attempt failed; retried later.
    Failed,
    /// Another replica owns it: only its name and desired state are kept.
    Elsewhere,
}

impl Phase {
    /// The phase of a member in `state`.
    pub(crate) fn of(state: &MemberState) -> Phase {
        match state {
            MemberState::Engaged => Phase::Engaged,
            MemberState::Failed { .. } => Phase::Failed,
            MemberState::Elsewhere { .. } => Phase::Elsewhere,
            // `Pending`, and whatever a later version adds: in the table, not settled.
            _ => Phase::Pending,
        }
    }

    /// One letter, for the trace.
    pub(crate) fn letter(self) -> char {
        match self {
            Phase::Engaged => 'E',
            Phase::Pending => 'P',
            Phase::Failed => 'F',
            Phase::Elsewhere => 'X',
        }
    }
}

/// One replica as the step's check sees it.
pub(crate) struct ReplicaView {
    pub(crate) who: Sender,
    /// The members in its table, with their phase.
    pub(crate) table: Vec<(String, Phase)>,
}

/// What the world tells the checker at the end of a step.
pub(crate) struct StepView {
    pub(crate) now: Ms,
    /// How many replicas are healthy.
    pub(crate) healthy: usize,
    /// Some replica's disruption began less than [`Bounds::excuse`] ago.
    pub(crate) disrupted_recently: bool,
    /// The healthy replicas (identity, weight), for the model.
    pub(crate) available: Vec<(String, u32)>,
    /// The running replicas whose host path fails some requests (or stopped doing so less
    /// than [`Bounds::orphan`] ago) but is not partitioned: not available to the model, yet
    /// live for their peers (they renew often enough), so no peer may take their share while
    /// their own takeovers stall on the failures (a swallowed renewal holds one up to the
    /// renew deadline). A member the live replicas, these included, give to one of them is
    /// excused from the orphan invariant.
    pub(crate) degraded: Vec<(String, u32)>,
    /// For each existing replica (by identity): when its process started, and how much
    /// longer than [`Bounds::orphan`] its members may wait now (see [`Bounds::restart`]).
    pub(crate) owners: BTreeMap<String, (Ms, Ms)>,
    /// The running replicas (paused ones included).
    pub(crate) replicas: Vec<ReplicaView>,
}

/// The invariants' state over one run.
pub struct Checker {
    bounds: Bounds,
    members: BTreeMap<String, Member>,
    invocations: BTreeMap<String, Vec<Invocation>>,
    /// Instances engaged so far (a subscriber may be told twice).
    engaged: BTreeSet<(Sender, String)>,
    /// The last step at which the run was excused.
    excused_at: Option<Ms>,
    /// The available replicas the model owners were last computed for.
    available: Vec<(String, u32)>,
    violations: Vec<Violation>,
}

impl Checker {
    /// A checker with `bounds`.
    pub(crate) fn new(bounds: Bounds) -> Checker {
        Checker {
            bounds,
            members: BTreeMap::new(),
            invocations: BTreeMap::new(),
            engaged: BTreeSet::new(),
            excused_at: None,
            available: Vec::new(),
            violations: Vec::new(),
        }
    }

    /// The violations found so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    fn violate(&mut self, at: Ms, invariant: Invariant, detail: String) {
        self.violations.push(Violation {
            at,
            invariant,
            detail,
        });
    }

    /// `by` engaged `member` by hand at `at` and its manager accepted it (`Ok`), or refused
    /// it for a reason other than sharding (`Err`: the reason).
    pub(crate) fn accepted_by_hand(
        &mut self,
        member: &str,
        by: Sender,
        at: Ms,
        outcome: Result<(), String>,
    ) {
        let detail = match outcome {
            Ok(()) => {
                format!("{by} engaged {member} by hand on a sharded manager, and it was accepted")
            }
            Err(reason) => format!(
                "{by} engaged {member} by hand, refused for another reason than sharding: {reason}"
            ),
        };
        self.violate(at, Invariant::Refusal, detail);
    }

    /// `name` is wanted from `at` (`hand`: engaged by hand, not by the provider). A member
    /// wanted again, or replaced (new credentials), may be engaged once more.
    pub(crate) fn wanted(&mut self, name: &str, hand: bool, at: Ms) {
        let m = self.members.entry(name.to_owned()).or_default();
        m.hand = hand;
        if m.allowance == 0 {
            m.allowance = 1;
        } else {
            m.allowance += 1;
        }
        if !m.wanted {
            m.wanted = true;
            m.since = at;
            m.orphan_reported = false;
            m.removal_reached.clear();
        }
    }

    /// `name` was replaced (new credentials) at `at`: one more engagement is allowed.
    pub(crate) fn replaced(&mut self, name: &str) {
        if let Some(m) = self.members.get_mut(name) {
            m.allowance += 1;
        }
    }

    /// `name` is no longer wanted, from `at`.
    pub(crate) fn unwanted(&mut self, name: &str, at: Ms) {
        if let Some(m) = self.members.get_mut(name)
            && m.wanted
        {
            m.wanted = false;
            m.since = at;
        }
    }

    /// The removal of `name` reached replica `replica` at `at`.
    pub(crate) fn removal_reached(&mut self, name: &str, replica: u8, at: Ms) {
        if let Some(m) = self.members.get_mut(name)
            && !m.wanted
        {
            m.removal_reached.insert(replica, at);
        }
    }

    /// The replica `id` restarted: the members it owned may be engaged once more.
    pub(crate) fn restarted(&mut self, id: &str) {
        for m in self.members.values_mut() {
            if m.owner.as_deref() == Some(id) {
                m.allowance += 1;
            }
        }
    }

    /// A poll of reconcile invocation `id` of `by` for `member` at `at`.
    pub(crate) fn polled(&mut self, member: &str, by: Sender, id: u64, at: Ms) {
        if let Some(m) = self.members.get_mut(member) {
            m.last_reconcile = Some(m.last_reconcile.map_or(at, |l| l.max(at)));
            m.orphan_reported = false;
            if !m.wanted
                && let Some(reached) = m.removal_reached.get(&by.replica).copied()
                && at > reached + self.bounds.removal
            {
                let detail = format!(
                    "{member} reconciled by {by} at {}, removed there at {}",
                    show(at),
                    show(reached)
                );
                self.violate(at, Invariant::Removal, detail);
            }
        }
        let spans = self.invocations.entry(member.to_owned()).or_default();
        let span = match spans.iter_mut().find(|s| s.by == by && s.id == id) {
            Some(span) => {
                span.first = span.first.min(at);
                span.last = span.last.max(at);
                *span
            }
            None => {
                let span = Invocation {
                    by,
                    id,
                    first: at,
                    last: at,
                };
                spans.push(span);
                span
            }
        };
        let clash = spans
            .iter()
            .find(|o| o.by != by && span.first <= o.last && o.first <= span.last)
            .copied();
        // Spans that ended long ago can no longer meet a new one.
        spans.retain(|s| s.last + 60_000 >= at);
        if let Some(o) = clash {
            let detail = format!(
                "{member} reconciled by {} [{}..{}] and by {} [{}..{}]",
                o.by,
                show(o.first),
                show(o.last),
                by,
                show(span.first),
                show(span.last)
            );
            self.violate(at, Invariant::Overlap, detail);
        }
    }

    /// `member` engaged (a new instance) by `by` at `at`.
    pub(crate) fn engaged(&mut self, member: &str, by: Sender, instance: String, at: Ms) {
        if !self.engaged.insert((by, instance)) {
            return;
        }
        let free_until = self.excused_at.map(|t| t + self.bounds.orphan);
        let Some(m) = self.members.get_mut(member) else {
            return;
        };
        let free = m.hand || free_until.is_some_and(|until| at <= until);
        m.history.push((at, by, free));
        if free {
            return;
        }
        m.counted += 1;
        if m.counted > m.allowance {
            let history: Vec<String> = m
                .history
                .iter()
                .map(|(t, who, free)| {
                    format!("{} {who}{}", show(*t), if *free { " (free)" } else { "" })
                })
                .collect();
            let detail = format!(
                "{member} engaged {} times, allowed {} (its model owner is {}): {}",
                m.counted,
                m.allowance,
                m.owner.as_deref().unwrap_or("none"),
                history.join(", ")
            );
            self.violate(at, Invariant::Churn, detail);
        }
    }

    /// The checks at the end of a step.
    pub(crate) fn step(&mut self, view: &StepView) {
        let now = view.now;
        if view.healthy == 0 || view.disrupted_recently {
            self.excused_at = Some(now);
        }
        // The model's owner of every member, and its changes (a member wanted since the last
        // change of the available replicas has none yet).
        let changed = self.available != view.available;
        if changed {
            self.available.clone_from(&view.available);
        }
        for (name, m) in &mut self.members {
            if !changed && m.owner.is_some() {
                continue;
            }
            let owner = crate::model::owner(&view.available, name);
            if m.owner.is_some() && owner.is_some() && m.owner.as_deref() != owner {
                m.allowance += 1;
                m.owner_since = now;
                // To a replica that is still listening before its first claim (the model
                // counts it from its start, its peers only from its first Lease): another
                // replica may cover the member until it claims.
                if owner
                    .and_then(|o| view.owners.get(o))
                    .is_some_and(|(start, _)| now < start + self.bounds.orphan)
                {
                    m.allowance += 1;
                }
            }
            if let Some(owner) = owner {
                m.owner = Some(owner.to_owned());
            }
        }
        // Orphans.
        if self.excused_at != Some(now) {
            let excused = self.excused_at.unwrap_or(0);
            let mut found = Vec::new();
            let mut live = view.available.clone();
            live.extend(view.degraded.iter().cloned());
            live.sort();
            for (name, m) in &mut self.members {
                if !m.wanted || m.hand || m.orphan_reported {
                    continue;
                }
                if crate::model::owner(&live, name)
                    .is_some_and(|o| view.degraded.iter().any(|(d, _)| d == o))
                {
                    continue;
                }
                // A replica sees every Lease for itself before it takes anyone for gone: the
                // members of one that just started are counted from its start.
                let (started, extra) = m
                    .owner
                    .as_ref()
                    .and_then(|o| view.owners.get(o))
                    .copied()
                    .unwrap_or((0, 0));
                let since = m
                    .since
                    .max(m.last_reconcile.unwrap_or(0))
                    .max(excused)
                    .max(started)
                    .max(m.owner_since);
                if now > since + self.bounds.orphan + extra {
                    m.orphan_reported = true;
                    found.push(format!(
                        "{name} reconciled by no replica since {} ({} s; model owner {})",
                        show(since),
                        show(now - since),
                        m.owner.as_deref().unwrap_or("none")
                    ));
                }
            }
            for detail in found {
                self.violate(now, Invariant::Orphan, detail);
            }
        }
        // Removals and table sizes.
        for r in &view.replicas {
            let mut allowed = 0;
            for m in self.members.values() {
                let in_grace = m
                    .removal_reached
                    .get(&r.who.replica)
                    .is_none_or(|at| now <= at + self.bounds.removal);
                if m.wanted || in_grace {
                    allowed += 1;
                }
            }
            let mut found = Vec::new();
            for (name, phase) in &r.table {
                let Some(m) = self.members.get(name) else {
                    continue;
                };
                if let Some(at) = m.removal_reached.get(&r.who.replica)
                    && !m.wanted
                    && now > at + self.bounds.removal
                {
                    found.push((
                        Invariant::Removal,
                        format!(
                            "{name} still {phase:?} on {} at {}, removed there at {}",
                            r.who,
                            show(now),
                            show(*at)
                        ),
                    ));
                }
            }
            if r.table.len() > allowed {
                found.push((
                    Invariant::TableSize,
                    format!(
                        "{} holds {} members ({:?}), {allowed} wanted or being removed",
                        r.who,
                        r.table.len(),
                        r.table
                    ),
                ));
            }
            for (invariant, detail) in found {
                self.violate(now, invariant, detail);
            }
        }
    }

    /// The checks at the end of the quiet tail: `owners[i]` is, for each member, whether
    /// replica `view.replicas[i]` says it owns it.
    pub(crate) fn converged(&mut self, view: &StepView, owners: &[Vec<(String, bool)>]) {
        let mut found = Vec::new();
        for (name, m) in &self.members {
            if !m.wanted || m.hand {
                continue;
            }
            let model = crate::model::owner(&view.available, name);
            let active: Vec<String> = view
                .replicas
                .iter()
                .filter(|r| {
                    r.table
                        .iter()
                        .any(|(n, p)| n == name && *p == Phase::Engaged)
                })
                .map(|r| format!("r{}", r.who.replica))
                .collect();
            let expected: Vec<String> = model.map(str::to_owned).into_iter().collect();
            if active != expected {
                found.push(format!(
                    "{name} active on {active:?}, its model owner is {}",
                    model.unwrap_or("none")
                ));
            }
            for r in &view.replicas {
                let own = model == Some(format!("r{}", r.who.replica).as_str());
                let phase = r.table.iter().find(|(n, _)| n == name).map(|(_, p)| *p);
                if !own && phase != Some(Phase::Elsewhere) {
                    found.push(format!(
                        "{name} is {phase:?} on {}, not owned elsewhere (its model owner is {})",
                        r.who,
                        model.unwrap_or("none")
                    ));
                }
            }
            for (r, answers) in view.replicas.iter().zip(owners) {
                let says = answers
                    .iter()
                    .find(|(n, _)| n == name)
                    .is_some_and(|(_, o)| *o);
                let should = model == Some(format!("r{}", r.who.replica).as_str());
                if says != should {
                    found.push(format!(
                        "{} says it {} {name}; the model owner is {} (is the model's hash still the sharder's?)",
                        r.who,
                        if says { "owns" } else { "does not own" },
                        model.unwrap_or("none")
                    ));
                }
            }
        }
        for detail in found {
            self.violate(view.now, Invariant::Convergence, detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        orphan: 7_000,
        excuse: 4_000,
        removal: 1_000,
        restart: 3_000,
    };

    fn who(replica: u8) -> Sender {
        Sender {
            replica,
            incarnation: 1,
        }
    }

    fn view(now: Ms, available: &[&str]) -> StepView {
        StepView {
            now,
            healthy: available.len(),
            disrupted_recently: false,
            available: available.iter().map(|id| (id.to_string(), 1)).collect(),
            degraded: Vec::new(),
            owners: BTreeMap::new(),
            replicas: Vec::new(),
        }
    }

    fn found(c: &Checker) -> Vec<Invariant> {
        c.violations().iter().map(|v| v.invariant).collect()
    }

    #[test]
    fn reconciles_of_one_member_by_two_processes_at_once_overlap() {
        let mut c = Checker::new(BOUNDS);
        c.wanted("m0", false, 0);
        // r1 reconciles m0 from 1.0 to 1.2; r2 from 1.3: apart.
        c.polled("m0", who(1), 0, 1_000);
        c.polled("m0", who(1), 0, 1_200);
        c.polled("m0", who(2), 0, 1_300);
        assert!(found(&c).is_empty());
        // r1's next invocation starts while r2's runs (r2 is polled again later: recorded in
        // another order than virtual time, as replicas are driven one after the other).
        c.polled("m0", who(1), 1, 1_350);
        c.polled("m0", who(2), 0, 1_500);
        assert_eq!(found(&c), [Invariant::Overlap]);
        // Another incarnation of one replica is another process.
        let mut c = Checker::new(BOUNDS);
        c.polled("m0", who(1), 0, 1_000);
        c.polled(
            "m0",
            Sender {
                replica: 1,
                incarnation: 2,
            },
            0,
            1_000,
        );
        assert_eq!(found(&c), [Invariant::Overlap]);
    }

    #[test]
    fn a_member_of_a_live_replica_whose_requests_fail_is_excused() {
        // Seed 6375: r1's host path fails some requests; r1 still renews, so nobody may take
        // its share, and its own takeover stalls. Members the live replicas give r1 wait for
        // it; the others are held to the bound.
        let members: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
        let live = [("r1".to_string(), 1), ("r3".to_string(), 1)];
        let mut c = Checker::new(BOUNDS);
        for m in &members {
            c.wanted(m, false, 0);
        }
        c.step(&StepView {
            degraded: vec![("r1".into(), 1)],
            ..view(7_600, &["r3"])
        });
        let expected = members
            .iter()
            .filter(|m| crate::model::owner(&live, m) == Some("r3"))
            .count();
        assert!(expected > 0 && expected < members.len());
        assert_eq!(found(&c).len(), expected, "only r3's members are orphans");
    }

    #[test]
    fn a_member_unreconciled_past_the_bound_is_an_orphan_unless_excused() {
        let mut c = Checker::new(BOUNDS);
        c.wanted("m0", false, 0);
        c.polled("m0", who(1), 0, 500);
        c.step(&view(7_500, &["r1"]));
        assert!(found(&c).is_empty(), "within the bound");
        c.step(&view(7_600, &["r1"]));
        assert_eq!(found(&c), [Invariant::Orphan]);
        // Excused (no healthy replica) until 9.0: counted from there.
        let mut c = Checker::new(BOUNDS);
        c.wanted("m0", false, 0);
        c.step(&StepView {
            healthy: 0,
            ..view(9_000, &[])
        });
        c.step(&view(16_000, &["r1"]));
        assert!(found(&c).is_empty());
        c.step(&view(16_100, &["r1"]));
        assert_eq!(found(&c), [Invariant::Orphan]);
    }

    #[test]
    fn engagements_beyond_changes_of_owner_are_churn() {
        let names: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
        // A member r1 owns whether r2 is there or not.
        let stays = names
            .iter()
            .find(|n| {
                crate::model::owner(&[("r1".into(), 1)], n) == Some("r1")
                    && crate::model::owner(&[("r1".into(), 1), ("r2".into(), 1)], n) == Some("r1")
            })
            .expect("some member stays with r1");
        let mut c = Checker::new(BOUNDS);
        c.wanted(stays, false, 0);
        c.step(&view(100, &["r1"]));
        c.engaged(stays, who(1), "a".into(), 200);
        c.step(&view(1_000, &["r1", "r2"]));
        c.engaged(stays, who(1), "a".into(), 1_100);
        assert!(found(&c).is_empty(), "the same instance told twice");
        c.engaged(stays, who(1), "b".into(), 1_200);
        assert_eq!(
            found(&c),
            [Invariant::Churn],
            "re-engaged, its owner unchanged"
        );
        // Replaced by the provider: one more is allowed.
        let mut c = Checker::new(BOUNDS);
        c.wanted(stays, false, 0);
        c.engaged(stays, who(1), "a".into(), 200);
        c.replaced(stays);
        c.engaged(stays, who(1), "b".into(), 1_200);
        assert!(found(&c).is_empty());
    }

    #[test]
    fn a_removed_member_must_leave_the_table_and_stop_reconciling() {
        let mut c = Checker::new(BOUNDS);
        c.wanted("m0", false, 0);
        c.unwanted("m0", 2_000);
        c.removal_reached("m0", 1, 2_000);
        let table = |now| StepView {
            replicas: vec![ReplicaView {
                who: who(1),
                table: vec![("m0".into(), Phase::Engaged)],
            }],
            ..view(now, &["r1"])
        };
        c.step(&table(3_000));
        c.polled("m0", who(1), 0, 3_000);
        assert!(found(&c).is_empty(), "within one converge step");
        c.step(&table(3_100));
        c.polled("m0", who(1), 0, 3_100);
        assert_eq!(
            found(&c),
            [Invariant::Removal, Invariant::TableSize, Invariant::Removal]
        );
    }
}
