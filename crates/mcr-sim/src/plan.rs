//! The fault plan of a seed: the world (provider, replicas, members) and what happens when.
//!
//! Everything is drawn from the seed: which provider, how many replicas and members, and a
//! list of timed events mixing joins, leaves, kill -9, restarts with the same identity,
//! pauses (some past the renew deadline, some past the lease duration), network faults per
//! replica and path, Leases deleted or relabelled by hand, and the provider's adds, removes
//! and credential renewals. Some events come in pairs that the protocol finds hardest (a
//! Lease deleted just before a replica joins; a peer-Lease watch hung while the peer set
//! changes; members added and removed right as ownership moves). After `faults_end` every
//! fault is lifted and the run goes on quietly until `end`, for the liveness checks.

use crate::clock::Ms;
use crate::net::{Partition, WatchFaults};
use crate::replica::Kind;
use crate::wire::Path;

/// A fault on one of a replica's paths, for a while.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// The path is partitioned.
    Partition(Partition),
    /// Per mille of requests fail.
    Errors(u32),
    /// Up to this latency each way.
    Latency(Ms),
    /// Open watches of a resource stop delivering (`"*"`: all).
    WatchHang(&'static str),
    /// Events delayed, cut, duplicated, reordered.
    WatchChaos(WatchFaults),
    /// Lists that may be stale come from an older snapshot.
    StaleLists,
}

/// One event of the plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Replica `r` starts (joins; or comes back, with the same identity).
    Start(u8),
    /// Replica `r` is killed (-9).
    Kill(u8),
    /// Replica `r` is killed and started again at once, with the same identity.
    Restart(u8),
    /// Replica `r` is told to stop (it leaves the group cleanly).
    Stop(u8),
    /// Replica `r` is paused (SIGSTOP) for a while.
    Pause(u8, Ms),
    /// A fault on replica `r`'s path, for a while.
    Fault(u8, Path, Fault, Ms),
    /// Replica `r`'s Lease is deleted by hand.
    DeleteLease(u8),
    /// Replica `r`'s Lease loses its group label, by hand.
    RelabelLease(u8),
    /// Member `m` is wanted (added to the provider's source).
    Want(u8),
    /// Member `m` is no longer wanted (removed from the source).
    Unwant(u8),
    /// Member `m` gets new credentials (a new instance replaces the running one).
    Renew(u8),
    /// The cluster engaged by hand is to be engaged (`true`) or let go.
    Hand(bool),
}

/// What a seed runs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The provider.
    pub kind: Kind,
    /// Replica identities `r1..=replicas`.
    pub replicas: u8,
    /// The replicas started at the beginning.
    pub initial: Vec<u8>,
    /// Members `m0..members`, all wanted at the beginning.
    pub members: u8,
    /// Whether one cluster (`h0`) is engaged by hand (clusters provider only).
    pub hand: bool,
    /// Per mille of steps at which a replica's drive is cut short (the simulator's next
    /// actions land between two of its tasks).
    pub cuts: u32,
    /// How many times the simulator may remove a member at the moment it sees one coming
    /// home on a replica (owned elsewhere at the last step, being brought up now), seen at a
    /// cut.
    pub ambushes: u32,
    /// Events, by time.
    pub events: Vec<(Ms, Event)>,
    /// When every fault is lifted.
    pub faults_end: Ms,
    /// When the run ends.
    pub end: Ms,
}

/// Targeted mixes of events, to look for one kind of defect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Everything (the default).
    Mixed,
    /// A peer-Lease watch hangs while the peer set changes.
    HungWatch,
    /// A replica joins while a live peer's Lease is missing (deleted by hand).
    LeaseMissing,
    /// Members removed and added again while ownership moves.
    RemoveWhileMoving,
    /// A cluster engaged by hand while ownership moves.
    Hand,
    /// The namespace provider while ownership moves.
    Namespaces,
}

struct Draw {
    rng: fastrand::Rng,
    plan: Plan,
    /// Which replicas are up, in the generator's own bookkeeping (events are drawn valid).
    up: Vec<bool>,
}

impl Draw {
    fn at(&mut self) -> Ms {
        self.rng.u64(1_000..self.plan.faults_end)
    }

    fn push(&mut self, t: Ms, event: Event) {
        self.plan.events.push((t, event));
    }

    fn any_replica(&mut self) -> u8 {
        self.rng.u8(1..=self.plan.replicas)
    }

    fn member(&mut self) -> u8 {
        self.rng.u8(0..self.plan.members)
    }

    /// A topology change at `t`: a join, a leave, a kill, or a restart.
    fn topology(&mut self, t: Ms) {
        let r = self.any_replica();
        let i = usize::from(r);
        let event = if self.up[i] {
            match self.rng.u8(0..3) {
                0 => Event::Kill(r),
                1 => Event::Stop(r),
                _ => Event::Restart(r),
            }
        } else {
            Event::Start(r)
        };
        self.up[i] = !matches!(event, Event::Kill(_) | Event::Stop(_));
        self.push(t, event);
    }

    fn pause(&mut self, t: Ms) {
        let r = self.any_replica();
        // Short ones (within the renew deadline), past it, and past the lease duration.
        let d = match self.rng.u8(0..3) {
            0 => self.rng.u64(200..1_800),
            1 => self.rng.u64(2_000..3_000),
            _ => self.rng.u64(3_000..9_000),
        };
        self.push(t, Event::Pause(r, d));
    }

    fn fault(&mut self, t: Ms) {
        let r = self.any_replica();
        let d = self.rng.u64(1_000..12_000);
        let kind = self.plan.kind;
        let (path, fault) = match self.rng.u8(0..9) {
            0 => (
                Path::Host,
                Fault::Partition(if self.rng.bool() {
                    Partition::Hang
                } else {
                    Partition::Refuse
                }),
            ),
            1 => (Path::Host, Fault::Errors(self.rng.u32(100..700))),
            // At most 150 ms each way on the host path: with a renew period of 1 s and a
            // renew deadline of 2 s a replica fences itself once a round trip (plus the wait
            // for the next step) exceeds 500 ms, which a network this slow is meant to cause
            // only through the errors and partitions that count as disruptions.
            2 => (Path::Host, Fault::Latency(self.rng.u64(20..150))),
            3 | 4 => (
                Path::Host,
                Fault::WatchHang(if self.rng.u8(0..4) == 0 {
                    "*"
                } else {
                    "leases"
                }),
            ),
            5 => (Path::Host, self.chaos()),
            6 if kind == Kind::Clusters => (Path::Members, self.chaos()),
            6 => (Path::Host, Fault::StaleLists),
            7 if kind == Kind::Clusters => (Path::Members, Fault::Latency(self.rng.u64(20..300))),
            _ => (
                if kind == Kind::Clusters && self.rng.bool() {
                    Path::Members
                } else {
                    Path::Host
                },
                Fault::StaleLists,
            ),
        };
        self.push(t, Event::Fault(r, path, fault, d));
    }

    fn chaos(&mut self) -> Fault {
        Fault::WatchChaos(WatchFaults {
            hang: None,
            delay: if self.rng.bool() {
                self.rng.u64(0..400)
            } else {
                0
            },
            cut: self.rng.u32(0..150),
            dup: self.rng.u32(0..200),
            reorder: self.rng.u32(0..300),
        })
    }

    fn lease_by_hand(&mut self, t: Ms) {
        let r = self.any_replica();
        let e = if self.rng.u8(0..3) == 0 {
            Event::RelabelLease(r)
        } else {
            Event::DeleteLease(r)
        };
        self.push(t, e);
    }

    fn provider(&mut self, t: Ms) {
        let m = self.member();
        let e = match self.rng.u8(0..5) {
            0 | 1 => Event::Unwant(m),
            2 | 3 => Event::Want(m),
            _ => Event::Renew(m),
        };
        self.push(t, e);
    }

    /// A Lease deleted by hand just before a replica joins.
    fn lease_missing_at_join(&mut self, t: Ms) {
        self.lease_by_hand(t);
        let join = t + self.rng.u64(0..900);
        self.topology(join);
    }

    /// A peer-Lease watch hung while the peer set changes.
    fn hung_watch_at_change(&mut self, t: Ms) {
        let r = self.any_replica();
        let d = self.rng.u64(4_000..20_000);
        self.push(
            t,
            Event::Fault(r, Path::Host, Fault::WatchHang("leases"), d),
        );
        let change = t + self.rng.u64(0..3_000);
        self.topology(change);
    }

    /// Members removed and added again in a burst while ownership moves.
    fn churn_at_change(&mut self, t: Ms) {
        self.topology(t);
        let m = self.member();
        let mut at = t + self.rng.u64(0..1_500);
        for _ in 0..self.rng.u8(2..8) {
            let e = if self.rng.bool() {
                Event::Unwant(m)
            } else {
                Event::Want(m)
            };
            self.push(at, e);
            at += self.rng.u64(0..400);
        }
        self.push(at, Event::Want(m));
    }

    fn hand_toggle(&mut self, t: Ms) {
        if self.plan.hand {
            let on = self.rng.u8(0..3) != 0;
            self.push(t, Event::Hand(on));
        }
    }
}

impl Plan {
    /// The plan of `seed` (for `scenario`).
    pub fn generate(seed: u64, scenario: Scenario) -> Plan {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x005e_ed0f_a1a7);
        let kind = match scenario {
            Scenario::Namespaces => Kind::Namespaces,
            Scenario::Hand | Scenario::RemoveWhileMoving => Kind::Clusters,
            _ if rng.bool() => Kind::Clusters,
            _ => Kind::Namespaces,
        };
        let replicas = rng.u8(2..=4);
        let initial_n = rng.u8(1..=replicas.min(3));
        let faults_end = rng.u64(30_000..=50_000);
        let plan = Plan {
            kind,
            replicas,
            initial: (1..=initial_n).collect(),
            members: rng.u8(3..=10),
            hand: kind == Kind::Clusters
                && scenario != Scenario::RemoveWhileMoving
                && (scenario == Scenario::Hand || rng.bool()),
            cuts: if scenario == Scenario::RemoveWhileMoving {
                rng.u32(200..=600)
            } else {
                rng.u32(0..=150)
            },
            ambushes: if scenario == Scenario::RemoveWhileMoving {
                rng.u32(1..=4)
            } else {
                rng.u32(0..=1)
            },
            events: Vec::new(),
            faults_end,
            end: faults_end + 20_000,
        };
        let mut up = vec![false; usize::from(replicas) + 1];
        for r in &plan.initial {
            up[usize::from(*r)] = true;
        }
        let mut d = Draw { rng, plan, up };
        if d.plan.hand {
            d.push(0, Event::Hand(true));
        }
        let n = d.rng.usize(4..=14);
        // Times are drawn in order so the generator's bookkeeping of who is up holds.
        let mut times: Vec<Ms> = (0..n).map(|_| d.at()).collect();
        times.sort_unstable();
        for t in times {
            let pick = d.rng.u32(0..100);
            match scenario {
                Scenario::HungWatch if pick < 60 => d.hung_watch_at_change(t),
                Scenario::LeaseMissing if pick < 60 => d.lease_missing_at_join(t),
                Scenario::RemoveWhileMoving if pick < 60 => d.churn_at_change(t),
                Scenario::Hand if pick < 40 => d.hand_toggle(t),
                Scenario::Hand | Scenario::Namespaces if pick < 70 => d.topology(t),
                _ => match pick {
                    0..18 => d.topology(t),
                    18..26 => d.pause(t),
                    26..48 => d.fault(t),
                    48..54 => d.lease_by_hand(t),
                    54..68 => d.provider(t),
                    68..75 => d.lease_missing_at_join(t),
                    75..82 => d.hung_watch_at_change(t),
                    82..92 => d.churn_at_change(t),
                    _ => d.hand_toggle(t),
                },
            }
        }
        d.plan.events.sort_by_key(|(t, _)| *t);
        d.plan
    }

    /// One line about the plan.
    pub fn summary(&self) -> String {
        format!(
            "{:?} provider, {} replicas ({} at start), {} members{}, {} events, faults until {} s, end {} s",
            self.kind,
            self.replicas,
            self.initial.len(),
            self.members,
            if self.hand {
                " + 1 engaged by hand"
            } else {
                ""
            },
            self.events.len(),
            self.faults_end / 1000,
            self.end / 1000
        )
    }
}
