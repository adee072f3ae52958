//! One run of a seed: the host and member clusters (the emulator, in process), the network,
//! the replica processes, and the loop that steps virtual time, applies the plan, delivers
//! the wire and checks the invariants after every step.
//!
//! A step of `step` milliseconds at boundary `T`:
//!
//! 1. the network delivers what is due on the wire (requests reach the servers at `T`, in an
//!    order drawn from the seed; the plan's writes "by hand" land here too);
//! 2. some replicas (drawn from the seed) run a few of their ready tasks and are cut short;
//! 3. the plan's events due at `T` happen (kills, pauses, faults, provider changes, ...): they
//!    land between two tasks of the replicas cut short;
//! 4. every running replica is driven from `T` to `T + step`, in an order drawn from the seed;
//! 5. the invariants are checked.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use mcr_envtest::{Backend, TestCluster};
use parking_lot::Mutex;

use crate::check::{Bounds, Checker, Phase, ReplicaView, StepView, Violation};
use crate::clock::{Ms, show};
use crate::net::{Faults, Net};
use crate::plan::{Event, Fault, Plan, Scenario};
use crate::replica::{Kind, MEMBER_LABEL, Process, Shared, State, Timings};
use crate::trace::Trace;
use crate::wire::{Path, Sender, Target};

/// The timings of every run.
pub const TIMINGS: Timings = Timings {
    lease: 3_000,
    renew_deadline: 2_000,
    renew_period: 1_000,
    sync_timeout: 5_000,
    work: 200,
    requeue: 500,
    retry: 1_000,
};

/// The bounds of the invariants (see [`Bounds`]).
pub const BOUNDS: Bounds = Bounds {
    orphan: TIMINGS.lease + 4_000,
    excuse: TIMINGS.lease + TIMINGS.renew_period,
    removal: 1_000,
    restart: TIMINGS.lease,
};

/// How long a replica's informers over the host path may take to recover after its host path
/// stopped erroring: a request the path swallowed (never answered) is given up after mcr-core's
/// request bound (65 s: kube-apiserver's request timeout and a margin), and the watch client
/// then backs off up to 30 s (kube-runtime's default backoff). With the namespace provider,
/// every member's informer runs over the host path too, so a replica's members may stay unsynced
/// this long, and a namespace's change may reach its provider this late.
const HOST_RECOVERY: Ms = 65_000 + 30_000;

/// How a run goes.
#[derive(Clone, Debug)]
pub struct Options {
    /// The mix of events.
    pub scenario: Scenario,
    /// The step of virtual time, in milliseconds.
    pub step: Ms,
    /// Stop at the first violation (what `--seeds` does; a replay runs to the end).
    pub stop_at_first: bool,
    /// Replicas run in sharded mode (the point); `false` runs them unsharded, each owning
    /// every member, which the checker must flag (the canary of `tests/canary.rs`).
    pub sharded: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            scenario: Scenario::Mixed,
            step: 100,
            stop_at_first: true,
            sharded: true,
        }
    }
}

/// What a run found.
#[derive(Debug)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Its plan.
    pub plan: Plan,
    /// The invariants broken (the first one, when stopping at the first).
    pub violations: Vec<Violation>,
    /// Everything that happened.
    pub trace: Trace,
    /// Virtual time reached.
    pub reached: Ms,
    /// Wall-clock time the run took.
    pub took: std::time::Duration,
}

/// What the provider's source says to one replica, delivered a little late.
#[derive(Clone, Copy, Debug)]
enum SourceOp {
    Want(u8),
    Unwant(u8),
    Renew(u8),
    Hand(bool),
}

/// A scheduled end of something the plan started.
#[derive(Clone, Debug)]
enum End {
    Resume(u8),
    Clear(u8, Path, Fault),
}

/// One replica identity and its current process.
#[derive(Default)]
struct Slot {
    incarnations: u32,
    process: Option<Process>,
    /// When its process started.
    running_since_start: Ms,
    /// When its process started or last resumed.
    running_since: Ms,
    disrupted_since: Option<Ms>,
    /// When its host path was last free of every fault.
    host_clean_since: Ms,
    /// When its host path last stopped failing requests.
    errors_cleared: Option<Ms>,
    /// With the namespace provider: when its host watch of namespaces (the provider's source
    /// of truth) last hung. While it hangs, the replica learns of no member wanted or
    /// unwanted, and no other replica takes its share over (it renews its Lease all along).
    source_hung: Option<Ms>,
    /// The members the process's table held at the last step (for the trace).
    last_table: String,
    /// Until when its members may take [`Bounds::restart`] longer (a peer's Lease was
    /// deleted while its peer-Lease watch hung).
    restart_until: Ms,
    /// The phase of each member in its table at the last step.
    last_phases: BTreeMap<String, Phase>,
}

struct World {
    plan: Plan,
    opts: Options,
    rng: fastrand::Rng,
    rt: tokio::runtime::Runtime,
    host: kube::Client,
    net: Net,
    shared: Shared,
    slots: Vec<Slot>,
    /// Every member name: `m0..`, then `h0` when one is engaged by hand.
    names: Vec<String>,
    wanted: BTreeMap<String, bool>,
    ends: Vec<(Ms, End)>,
    /// Events the world itself scheduled (after an ambush).
    later: Vec<(Ms, Event)>,
    source: Vec<(Ms, u8, SourceOp)>,
    /// When a removal reached each replica's provider (clusters provider, hand).
    removals: BTreeMap<(u8, String), Ms>,
    /// When each namespace stopped being a member (namespace provider).
    unlabelled: BTreeMap<String, Ms>,
    /// Removals left to land on a member seen coming home (see [`Plan::ambushes`]).
    ambushes: u32,
    now: Ms,
}

/// Runs `seed`.
pub fn run(seed: u64, opts: &Options) -> Outcome {
    let started = Instant::now();
    // kube-runtime's watch backoff draws its jitter from the thread-local generator.
    fastrand::seed(seed);
    let plan = Plan::generate(seed, opts.scenario);
    let mut world = World::new(seed, plan.clone(), opts.clone());
    let reached = world.run();
    let violations = world.shared.checker.lock().violations().to_vec();
    world.shutdown();
    let trace = std::mem::take(&mut *world.shared.trace.lock());
    Outcome {
        seed,
        plan,
        violations,
        trace,
        reached,
        took: started.elapsed(),
    }
}

fn member_name(m: u8) -> String {
    format!("m{m}")
}

const HAND: &str = "h0";

impl World {
    fn new(seed: u64, plan: Plan, opts: Options) -> World {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        builder.enable_time().start_paused(true);
        #[cfg(tokio_unstable)]
        builder.rng_seed(tokio::runtime::RngSeed::from_bytes(&seed.to_le_bytes()));
        let rt = builder.build().expect("a current-thread runtime builds");
        let mut names: Vec<String> = (0..plan.members).map(member_name).collect();
        if plan.hand {
            names.push(HAND.to_owned());
        }
        let kind = plan.kind;
        let (host, servers) = rt.block_on(async {
            let host = TestCluster::start_on(Backend::Emulator, "host")
                .await
                .expect("the emulator starts");
            let client = host.client();
            let mut servers = BTreeMap::from([(Target::Host, client.clone())]);
            for (i, name) in names.iter().enumerate() {
                let (client, ns) = match kind {
                    Kind::Clusters => {
                        let member = TestCluster::start_on(Backend::Emulator, name.as_str())
                            .await
                            .expect("the emulator starts");
                        let client = member.client();
                        servers.insert(Target::Member(i as u8), client.clone());
                        (client, "default".to_owned())
                    }
                    Kind::Namespaces => {
                        let ns = Namespace {
                            metadata: kube::api::ObjectMeta {
                                name: Some(name.clone()),
                                labels: Some([(MEMBER_LABEL.to_owned(), "true".to_owned())].into()),
                                ..Default::default()
                            },
                            ..Default::default()
                        };
                        Api::<Namespace>::all(client.clone())
                            .create(&PostParams::default(), &ns)
                            .await
                            .expect("a namespace is created");
                        (client.clone(), name.clone())
                    }
                };
                let cm = ConfigMap {
                    metadata: kube::api::ObjectMeta {
                        name: Some("work".into()),
                        ..Default::default()
                    },
                    data: Some([("v".to_owned(), "1".to_owned())].into()),
                    ..Default::default()
                };
                Api::<ConfigMap>::namespaced(client, &ns)
                    .create(&PostParams::default(), &cm)
                    .await
                    .expect("a ConfigMap is created");
            }
            (client, servers)
        });
        let net = Net::new(servers, seed.rotate_left(17) ^ 0x0e7);
        let checker = Arc::new(Mutex::new(Checker::new(BOUNDS)));
        let shared = Shared {
            wire: net.wire.clone(),
            now: Arc::new(AtomicU64::new(0)),
            checker: checker.clone(),
            trace: Arc::new(Mutex::new(Trace::default())),
            timings: TIMINGS,
            kind,
            sharded: opts.sharded,
        };
        let mut wanted = BTreeMap::new();
        for name in &names {
            let hand = name == HAND;
            // The hand member is wanted when the plan says so (its first event, at 0).
            wanted.insert(name.clone(), !hand);
            if !hand {
                checker.lock().wanted(name, false, 0);
            }
        }
        let slots = (0..=plan.replicas).map(|_| Slot::default()).collect();
        World {
            rng: fastrand::Rng::with_seed(seed.rotate_left(41) ^ 0x5e9),
            plan,
            opts,
            rt,
            host,
            net,
            shared,
            slots,
            names,
            wanted,
            ends: Vec::new(),
            later: Vec::new(),
            source: Vec::new(),
            removals: BTreeMap::new(),
            unlabelled: BTreeMap::new(),
            ambushes: 0,
            now: 0,
        }
    }

    fn trace(&self, who: &str, what: impl std::fmt::Display) {
        self.shared.trace.lock().add(self.now, who, what);
    }

    fn target(&self, name: &str) -> Target {
        match self.plan.kind {
            Kind::Clusters => {
                let i = self.names.iter().position(|n| n == name).unwrap_or(0);
                Target::Member(i as u8)
            }
            Kind::Namespaces => Target::Host,
        }
    }

    /// Runs the plan to its end (or the first violation); returns the virtual time reached.
    fn run(&mut self) -> Ms {
        let step = self.opts.step.max(10);
        self.trace("sim", format_args!("seed plan: {}", self.plan.summary()));
        self.ambushes = self.plan.ambushes;
        let initial = self.plan.initial.clone();
        for r in initial {
            self.start(r);
        }
        let mut events = std::mem::take(&mut self.plan.events).into_iter().peekable();
        let mut faults_lifted = false;
        while self.now <= self.plan.end {
            let now = self.now;
            self.shared.now.store(now, Ordering::Relaxed);
            // 1. The network.
            {
                let (rt, net, trace) = (&self.rt, &mut self.net, &self.shared.trace);
                rt.block_on(net.exchange(now, trace));
            }
            // 2. Some replicas cut short.
            for r in self.order() {
                if self.rng.u32(0..1000) < self.plan.cuts
                    && let Some(p) = self.slots[usize::from(r)].process.as_mut()
                    && p.state == State::Running
                {
                    p.cut(self.rng.u32(1..=4));
                    self.ambush(r);
                }
            }
            // 3. The plan.
            while let Some((_, event)) = events.next_if(|(t, _)| *t <= now) {
                self.apply(event);
            }
            let due: Vec<Event> = self
                .later
                .iter()
                .filter(|(t, _)| *t <= now)
                .map(|(_, e)| e.clone())
                .collect();
            self.later.retain(|(t, _)| *t > now);
            for event in due {
                self.apply(event);
            }
            if !faults_lifted && now >= self.plan.faults_end {
                faults_lifted = true;
                self.lift_faults();
            }
            self.ends.sort_by_key(|(t, _)| *t);
            while self.ends.first().is_some_and(|(t, _)| *t <= now) {
                let (_, end) = self.ends.remove(0);
                self.end(end);
            }
            self.deliver_source();
            self.watch_health();
            self.leases_gone();
            // 4. Drive.
            for r in self.order() {
                let slot = &mut self.slots[usize::from(r)];
                let Some(p) = slot.process.as_mut() else {
                    continue;
                };
                match p.state {
                    State::Paused => continue,
                    State::Running => p.drive(now, now + step),
                    State::Stopping(deadline) => {
                        p.drive(now, now + step);
                        if p.finished() || now >= deadline {
                            let p = slot.process.take().expect("checked above");
                            let who = p.who;
                            let clean = p.finished();
                            p.kill();
                            self.trace(
                                &who.to_string(),
                                if clean {
                                    "stopped"
                                } else {
                                    "stop timed out: killed"
                                },
                            );
                        }
                    }
                }
            }
            self.now = now + step;
            // 5. Check.
            let view = self.view();
            self.shared.checker.lock().step(&view);
            if self.plan.end <= self.now {
                let owners: Vec<Vec<(String, bool)>> = view
                    .replicas
                    .iter()
                    .map(|r| {
                        self.slots[usize::from(r.who.replica)]
                            .process
                            .as_ref()
                            .map(|p| p.owners(&self.names))
                            .unwrap_or_default()
                    })
                    .collect();
                self.shared.checker.lock().converged(&view, &owners);
                break;
            }
            if self.opts.stop_at_first && !self.shared.checker.lock().violations().is_empty() {
                break;
            }
        }
        self.now
    }

    /// The replica identities in an order drawn from the seed.
    fn order(&mut self) -> Vec<u8> {
        let mut ids: Vec<u8> = (1..=self.plan.replicas).collect();
        self.rng.shuffle(&mut ids);
        ids
    }

    fn start(&mut self, r: u8) {
        let i = usize::from(r);
        if self.slots[i].process.is_some() {
            return;
        }
        if self.slots[i].incarnations > 0 {
            // This identity ran before (killed, or stopped): the members it still owns in the
            // model (no other replica took them meanwhile) are engaged once more.
            self.shared.checker.lock().restarted(&format!("r{r}"));
        }
        self.slots[i].incarnations += 1;
        let who = Sender {
            replica: r,
            incarnation: self.slots[i].incarnations,
        };
        let event_interval = self.rng.u32(1..=16);
        let rng_seed = self.rng.u64(..);
        let process = Process::start(&self.shared, who, self.now, event_interval, rng_seed);
        self.trace(&who.to_string(), "started");
        if self.plan.kind == Kind::Clusters {
            for (name, wanted) in &self.wanted {
                if *wanted && name != HAND {
                    process.want(&self.shared, name, self.target(name));
                }
            }
        }
        if self.plan.hand && self.wanted.get(HAND).copied().unwrap_or(false) {
            process.hand(HAND, self.target(HAND), true);
        }
        let slot = &mut self.slots[i];
        slot.process = Some(process);
        slot.running_since = self.now;
        slot.running_since_start = self.now;
    }

    fn kill(&mut self, r: u8) -> bool {
        let Some(p) = self.slots[usize::from(r)].process.take() else {
            return false;
        };
        let who = p.who;
        p.kill();
        self.trace(&who.to_string(), "killed");
        true
    }

    fn apply(&mut self, event: Event) {
        let now = self.now;
        match event {
            Event::Start(r) => self.start(r),
            Event::Kill(r) => {
                self.kill(r);
            }
            Event::Restart(r) => {
                self.kill(r);
                self.start(r);
            }
            Event::Stop(r) => {
                if let Some(p) = self.slots[usize::from(r)].process.as_mut()
                    && p.state != State::Paused
                    && !matches!(p.state, State::Stopping(_))
                {
                    p.stop(now + 30_000);
                    let who = p.who;
                    self.trace(&who.to_string(), "told to stop");
                }
            }
            Event::Pause(r, d) => {
                if let Some(p) = self.slots[usize::from(r)].process.as_mut()
                    && p.state == State::Running
                {
                    p.state = State::Paused;
                    let who = p.who;
                    self.trace(&who.to_string(), format_args!("paused for {}", show(d)));
                    self.ends.push((now + d, End::Resume(r)));
                }
            }
            Event::Fault(r, path, fault, d) => {
                self.trace(
                    &format!("r{r}"),
                    format_args!("fault on {path:?} path for {}: {fault:?}", show(d)),
                );
                self.net.set(r, path, |f| set_fault(f, &fault, true));
                self.ends.push((now + d, End::Clear(r, path, fault)));
            }
            Event::DeleteLease(r) => self.by_hand(r, false),
            Event::RelabelLease(r) => self.by_hand(r, true),
            Event::Want(m) => self.want(m, true),
            Event::Unwant(m) => self.want(m, false),
            Event::Renew(m) => {
                let name = member_name(m);
                if self.wanted.get(&name).copied().unwrap_or(false) {
                    match self.plan.kind {
                        Kind::Clusters => {
                            self.trace("source", format_args!("renew {name}"));
                            self.shared.checker.lock().replaced(&name);
                            self.tell_every_replica(SourceOp::Renew(m));
                        }
                        Kind::Namespaces => self.touch_namespace(&name),
                    }
                }
            }
            Event::Hand(on) => {
                if !self.plan.hand || self.wanted.get(HAND).copied() == Some(on) {
                    return;
                }
                self.wanted.insert(HAND.to_owned(), on);
                self.trace(
                    "source",
                    format_args!("hand {HAND}: {}", if on { "wanted" } else { "let go" }),
                );
                if on {
                    self.removals.retain(|(_, n), _| n != HAND);
                    self.shared.checker.lock().wanted(HAND, true, now);
                } else {
                    self.shared.checker.lock().unwanted(HAND, now);
                }
                self.tell_every_replica(SourceOp::Hand(on));
            }
        }
    }

    /// Right after replica `r` was cut short: if a member owned elsewhere at the last step is
    /// being brought up now (ownership came home, its first attempt under way), the source
    /// removes it at this very moment (then wants it again a little later): a removal that
    /// lands in a transition. One of the plan's few ambushes.
    fn ambush(&mut self, r: u8) {
        if self.ambushes == 0 || self.plan.kind != Kind::Clusters {
            return;
        }
        let slot = &self.slots[usize::from(r)];
        let Some(p) = slot.process.as_ref() else {
            return;
        };
        let table: BTreeMap<String, Phase> = p.table(&self.names).into_iter().collect();
        let coming = self.names.iter().find(|n| {
            n.as_str() != HAND
                && self.wanted.get(*n).copied().unwrap_or(false)
                && table.get(*n) == Some(&Phase::Pending)
                && slot.last_phases.get(*n) == Some(&Phase::Elsewhere)
        });
        let Some(name) = coming.cloned() else {
            return;
        };
        let Some(m) = name.strip_prefix('m').and_then(|m| m.parse::<u8>().ok()) else {
            return;
        };
        self.ambushes -= 1;
        self.trace(
            "sim",
            format_args!("ambush: {name} is coming home on r{r}: the source removes it now"),
        );
        self.want(m, false);
        if let Some(p) = self.slots[usize::from(r)].process.as_ref() {
            p.unwant(&name);
            self.removals.insert((r, name.clone()), self.now);
        }
        self.source
            .retain(|(_, to, op)| !(*to == r && matches!(op, SourceOp::Unwant(x) if *x == m)));
        let back = self.now + self.rng.u64(1_000..4_000);
        self.later.push((back, Event::Want(m)));
    }

    /// Member `m` wanted or not, in the provider's source of truth.
    fn want(&mut self, m: u8, on: bool) {
        let name = member_name(m);
        if self.wanted.get(&name).copied() == Some(on) {
            return;
        }
        self.wanted.insert(name.clone(), on);
        self.trace(
            "source",
            format_args!("{} {name}", if on { "want" } else { "unwant" }),
        );
        let now = self.now;
        if on {
            self.removals.retain(|(_, n), _| *n != name);
            self.shared.checker.lock().wanted(&name, false, now);
        } else {
            self.shared.checker.lock().unwanted(&name, now);
        }
        match self.plan.kind {
            Kind::Clusters => self.tell_every_replica(if on {
                SourceOp::Want(m)
            } else {
                SourceOp::Unwant(m)
            }),
            Kind::Namespaces => {
                if on {
                    self.unlabelled.remove(&name);
                } else {
                    self.unlabelled.insert(name.clone(), now);
                }
                let label = if on {
                    serde_json::json!("true")
                } else {
                    serde_json::Value::Null
                };
                let patch = serde_json::json!({"metadata": {"labels": {MEMBER_LABEL: label}}});
                let api = Api::<Namespace>::all(self.host.clone());
                self.rt.block_on(async {
                    let _ = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                });
            }
        }
    }

    /// A change to a member namespace that keeps it a member.
    fn touch_namespace(&mut self, name: &str) {
        let patch = serde_json::json!({"metadata": {"annotations": {"mcr-sim/touched": self.now.to_string()}}});
        let api = Api::<Namespace>::all(self.host.clone());
        self.rt.block_on(async {
            let _ = api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        });
        self.trace("source", format_args!("touch {name}"));
    }

    /// The source's change reaches each replica's provider a little later (0 to 3 steps).
    fn tell_every_replica(&mut self, op: SourceOp) {
        for r in 1..=self.plan.replicas {
            let delay = self.rng.u64(0..=3) * self.opts.step;
            self.source.push((self.now + delay, r, op));
        }
    }

    /// Hands each replica what its source says, once due; a paused replica gets it when it
    /// resumes (a stopped process does nothing, not even listen).
    fn deliver_source(&mut self) {
        let now = self.now;
        let paused = |slots: &[Slot], r: u8| {
            slots[usize::from(r)]
                .process
                .as_ref()
                .is_some_and(|p| p.state == State::Paused)
        };
        let due: Vec<(Ms, u8, SourceOp)> = self
            .source
            .iter()
            .filter(|(t, r, _)| *t <= now && !paused(&self.slots, *r))
            .copied()
            .collect();
        self.source
            .retain(|(t, r, _)| *t > now || paused(&self.slots, *r));
        for (_, r, op) in due {
            let Some(p) = self.slots[usize::from(r)].process.as_ref() else {
                continue;
            };
            match op {
                SourceOp::Hand(on) => {
                    if self.wanted.get(HAND).copied() == Some(on) {
                        p.hand(HAND, self.target(HAND), on);
                        if !on {
                            self.removals.insert((r, HAND.to_owned()), now);
                        }
                    }
                }
                SourceOp::Want(m) => {
                    let name = member_name(m);
                    if self.wanted.get(&name).copied().unwrap_or(false) {
                        p.want(&self.shared, &name, self.target(&name));
                    }
                }
                SourceOp::Unwant(m) => {
                    let name = member_name(m);
                    if !self.wanted.get(&name).copied().unwrap_or(true) {
                        p.unwant(&name);
                        self.removals.insert((r, name), now);
                    }
                }
                SourceOp::Renew(m) => {
                    let name = member_name(m);
                    p.renew(&self.shared, &name, self.target(&name));
                }
            }
        }
    }

    /// Replica `r`'s Lease deleted, or relabelled out of the group, by hand.
    fn by_hand(&mut self, r: u8, relabel: bool) {
        let api = Api::<Lease>::namespaced(self.host.clone(), "default");
        let name = format!("sim-r{r}");
        let done = self.rt.block_on(async {
            if relabel {
                let patch = serde_json::json!({"metadata": {"labels": {"mcr.sigs.k8s.io/shard-group": null}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.is_ok()
            } else {
                api.delete(&name, &DeleteParams::default()).await.is_ok()
            }
        });
        if done {
            self.trace(
                "hand",
                format_args!(
                    "lease {name} {}",
                    if relabel { "relabelled" } else { "deleted" }
                ),
            );
            self.net.lease_gone(name, self.now);
        }
    }

    fn end(&mut self, end: End) {
        match end {
            End::Resume(r) => {
                let now = self.now;
                if let Some(p) = self.slots[usize::from(r)].process.as_mut()
                    && p.state == State::Paused
                {
                    p.state = State::Running;
                    let who = p.who;
                    self.slots[usize::from(r)].running_since = now;
                    self.trace(&who.to_string(), "resumed");
                }
            }
            End::Clear(r, path, fault) => {
                self.net.set(r, path, |f| set_fault(f, &fault, false));
                self.trace(
                    &format!("r{r}"),
                    format_args!("fault on {path:?} path over: {fault:?}"),
                );
            }
        }
    }

    /// Every fault lifted, every paused replica resumed, at least two replicas running.
    fn lift_faults(&mut self) {
        self.trace("sim", "faults lifted: the quiet tail begins");
        self.net.heal_all();
        // With the namespace provider, members' informers run over the host path: after it
        // errored, they may take up to HOST_RECOVERY to recover. The tail waits that out.
        if self.plan.kind == Kind::Namespaces {
            for slot in &self.slots {
                if let Some(t) = slot.errors_cleared
                    && self.now < t + HOST_RECOVERY
                {
                    self.plan.end = self.plan.end.max(t + HOST_RECOVERY + BOUNDS.orphan);
                }
            }
        }
        let resumes: Vec<End> = self
            .ends
            .drain(..)
            .filter_map(|(_, e)| matches!(e, End::Resume(_)).then_some(e))
            .collect();
        for e in resumes {
            self.end(e);
        }
        let mut existing = (1..=self.plan.replicas)
            .filter(|r| {
                self.slots[usize::from(*r)]
                    .process
                    .as_ref()
                    .is_some_and(|p| p.state == State::Running)
            })
            .count();
        for r in 1..=self.plan.replicas {
            if existing >= 2 {
                break;
            }
            if self.slots[usize::from(r)].process.is_none() {
                self.start(r);
                existing += 1;
            }
        }
    }

    /// Disruptions begun and ended, and host paths cleared, at this step.
    fn watch_health(&mut self) {
        let now = self.now;
        for r in 1..=self.plan.replicas {
            let faults = self.net.faults(r, Path::Host);
            let slot = &mut self.slots[usize::from(r)];
            if faults.any() {
                slot.host_clean_since = now;
            }
            if faults.disrupts() {
                slot.errors_cleared = Some(now);
            }
            if self.plan.kind == Kind::Namespaces && faults.watch.hangs("namespaces") {
                slot.source_hung = Some(now);
            }
            let disrupted = slot
                .process
                .as_ref()
                .is_some_and(|p| p.state == State::Paused || faults.disrupts());
            match (disrupted, slot.disrupted_since) {
                (true, None) => slot.disrupted_since = Some(now),
                (false, Some(_)) => slot.disrupted_since = None,
                _ => {}
            }
        }
    }

    /// Leases deleted (or relabelled out of the group) since the last step: every replica
    /// whose peer-Lease watch hangs may need [`Bounds::restart`] more to take that peer for
    /// gone.
    fn leases_gone(&mut self) {
        let gone = self.net.leases_gone();
        for (lease, at) in gone {
            let peer = lease
                .strip_prefix("sim-r")
                .and_then(|r| r.parse::<u8>().ok());
            for r in 1..=self.plan.replicas {
                if Some(r) == peer || self.slots[usize::from(r)].process.is_none() {
                    continue;
                }
                let faults = self.net.faults(r, Path::Host);
                if faults.watch.hangs("leases") || faults.partition.is_some() {
                    let until = at + 2 * TIMINGS.lease + BOUNDS.orphan;
                    let slot = &mut self.slots[usize::from(r)];
                    slot.restart_until = slot.restart_until.max(until);
                }
            }
        }
    }

    /// The state of the world after a step, for the checker.
    fn view(&mut self) -> StepView {
        let now = self.now;
        let mut healthy = 0;
        let mut disrupted_recently = false;
        let mut available = Vec::new();
        let mut degraded = Vec::new();
        let mut replicas = Vec::new();
        let mut reached = Vec::new();
        let mut owners = BTreeMap::new();
        for r in 1..=self.plan.replicas {
            let faults: Faults = self.net.faults(r, Path::Host);
            let slot = &self.slots[usize::from(r)];
            let Some(p) = slot.process.as_ref() else {
                continue;
            };
            let existing = matches!(p.state, State::Running | State::Paused);
            if existing {
                let extra = if now < slot.restart_until {
                    BOUNDS.restart
                } else {
                    0
                };
                owners.insert(p.id.clone(), (slot.running_since_start, extra));
            }
            if existing
                && slot
                    .disrupted_since
                    .is_some_and(|s| now < s + BOUNDS.excuse)
            {
                disrupted_recently = true;
            }
            if existing
                && self.plan.kind == Kind::Namespaces
                && (slot.errors_cleared.is_some_and(|t| now < t + HOST_RECOVERY)
                    || slot.source_hung.is_some_and(|t| now < t + BOUNDS.orphan))
            {
                disrupted_recently = true;
            }
            if p.state == State::Running && !faults.disrupts() {
                healthy += 1;
                available.push((p.id.clone(), 1));
            } else if p.state == State::Running
                && faults.partition.is_none()
                && (faults.errors > 0
                    || slot.errors_cleared.is_some_and(|t| now < t + BOUNDS.orphan))
            {
                degraded.push((p.id.clone(), 1));
            }
            if p.state == State::Paused {
                continue;
            }
            // When each removal reached this replica.
            for name in &self.names {
                if self.wanted.get(name).copied().unwrap_or(false) {
                    continue;
                }
                let at = if let Some(at) = self.removals.get(&(r, name.clone())) {
                    Some(*at)
                } else if let Some(at) = self.unlabelled.get(name)
                    && !faults.any()
                {
                    let backoff = slot.errors_cleared.map_or(0, |t| t + HOST_RECOVERY);
                    Some((*at).max(slot.host_clean_since).max(backoff))
                } else {
                    None
                };
                if let Some(at) = at {
                    reached.push((name.clone(), r, at.max(slot.running_since)));
                }
            }
            let table = p.table(&self.names);
            let shown: Vec<String> = table
                .iter()
                .map(|(n, ph)| format!("{n}={}", ph.letter()))
                .collect();
            let shown = shown.join(" ");
            if shown != slot.last_table {
                let who = p.who;
                self.shared.trace.lock().add(
                    now,
                    &who.to_string(),
                    format_args!("table [{shown}]"),
                );
            }
            replicas.push((r, ReplicaView { who: p.who, table }, shown));
        }
        let mut checker = self.shared.checker.lock();
        for (name, r, at) in reached {
            checker.removal_reached(&name, r, at);
        }
        drop(checker);
        available.sort();
        let replicas = replicas
            .into_iter()
            .map(|(r, view, shown)| {
                let slot = &mut self.slots[usize::from(r)];
                slot.last_table = shown;
                slot.last_phases = view.table.iter().cloned().collect();
                view
            })
            .collect();
        StepView {
            now,
            healthy,
            disrupted_recently,
            available,
            degraded,
            owners,
            replicas,
        }
    }

    fn shutdown(&mut self) {
        for slot in &mut self.slots {
            if let Some(p) = slot.process.take() {
                p.kill();
            }
        }
    }
}

/// Turns `fault` on or off in `faults`.
fn set_fault(faults: &mut Faults, fault: &Fault, on: bool) {
    match fault {
        // A fault's end lifts only that fault (another of its kind may have begun since).
        Fault::Partition(p) if on => faults.partition = Some(*p),
        Fault::Partition(p) => {
            if faults.partition == Some(*p) {
                faults.partition = None;
            }
        }
        Fault::Errors(e) => faults.errors = if on { *e } else { 0 },
        Fault::Latency(l) => faults.latency = if on { *l } else { 0 },
        Fault::WatchHang(r) if on => faults.watch.hang = Some(*r),
        Fault::WatchHang(r) => {
            if faults.watch.hang == Some(*r) {
                faults.watch.hang = None;
            }
        }
        Fault::WatchChaos(w) => {
            let hang = faults.watch.hang;
            faults.watch = if on { w.clone() } else { Default::default() };
            faults.watch.hang = hang;
        }
        Fault::StaleLists => faults.stale_lists = on,
    }
}
