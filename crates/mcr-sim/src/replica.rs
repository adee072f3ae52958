//! One replica process: a `mcr_manager::Manager` in sharded mode, with a real provider and a
//! real controller, on a tokio runtime of its own (current-thread, clock paused) that the
//! simulator drives step by step. Killing it drops the runtime: every task of the process is
//! gone at once and nothing more is sent. Pausing it is not driving it.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::providers::clusters::ClustersProvider;
use mcr_core::{Aware, Cluster, ClusterName};
use mcr_manager::{Action, Context, Controller, Manager, Sharding};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::check::{Checker, Phase};
use crate::clock::{Clock, Ms};
use crate::trace::Trace;
use crate::wire::{Endpoint, Sender, Target, Wire};

/// The provider a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `mcr_core::providers::clusters::ClustersProvider`: members are emulated clusters, added
    /// and removed by code (here, by the simulator on each replica); plus one cluster engaged
    /// by hand through the manager (`Aware::engage`) in some runs.
    Clusters,
    /// `mcr_provider_namespace::NamespaceProvider`: members are labelled namespaces of the
    /// host.
    Namespaces,
}

/// The timings every replica runs with.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    /// `Sharding::lease_duration` (whole seconds: a Lease carries seconds).
    pub lease: Ms,
    /// `Sharding::renew_deadline`.
    pub renew_deadline: Ms,
    /// `Sharding::renew_period`.
    pub renew_period: Ms,
    /// A member's sync timeout.
    pub sync_timeout: Ms,
    /// How long a reconcile works (awaits a sleep) before it returns.
    pub work: Ms,
    /// When a reconcile asks to run again.
    pub requeue: Ms,
    /// How often the hand engager and the clusters provider's adder retry.
    pub retry: Ms,
}

/// The label that makes a host namespace a member (namespace provider).
pub(crate) const MEMBER_LABEL: &str = "mcr-sim/member";

/// What a replica's reconciles and subscriber record into: the checker and the trace, with
/// the process's clock.
pub(crate) struct Probe {
    pub(crate) who: Sender,
    pub(crate) clock: Clock,
    pub(crate) now: Arc<AtomicU64>,
    pub(crate) checker: Arc<Mutex<Checker>>,
    pub(crate) trace: Arc<Mutex<Trace>>,
    next: AtomicU64,
    timings: Timings,
}

impl Probe {
    /// Global time, as this process sees it.
    pub(crate) fn now(&self) -> Ms {
        self.clock.now_or(self.now.load(Ordering::Relaxed))
    }

    pub(crate) fn trace(&self, what: impl std::fmt::Display) {
        let t = self.now();
        self.trace.lock().add(t, &self.who.to_string(), what);
    }
}

pin_project_lite::pin_project! {
    /// A reconcile, each of its polls recorded: running reconcile code.
    struct Traced<F> {
        #[pin]
        inner: F,
        probe: Arc<Probe>,
        member: ClusterName,
        id: u64,
    }
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let at = this.probe.now();
        this.probe
            .checker
            .lock()
            .polled(this.member.as_str(), this.probe.who, *this.id, at);
        this.inner.poll(cx)
    }
}

/// The simulation's reconcile: some work (a virtual-time sleep, so reconciles are in flight
/// when ownership moves), then a requeue, so every member is reconciled over and over.
fn reconcile(
    _: Arc<ConfigMap>,
    ctx: Context<Probe>,
) -> impl Future<Output = Result<Action, Infallible>> + Send + 'static {
    let probe = ctx.data().clone();
    let id = probe.next.fetch_add(1, Ordering::Relaxed);
    let timings = probe.timings;
    Traced {
        inner: async move {
            tokio::time::sleep(Duration::from_millis(timings.work)).await;
            Ok(Action::requeue(Duration::from_millis(timings.requeue)))
        },
        probe,
        member: ctx.cluster_name().clone(),
        id,
    }
}

fn error_policy(_: Arc<ConfigMap>, _: &Infallible, ctx: Context<Probe>) -> Action {
    Action::requeue(Duration::from_millis(ctx.data().timings.requeue))
}

/// The table's subscriber: records every engagement.
struct Engaged(Arc<Probe>);

impl Aware for Engaged {
    fn engage(
        &self,
        _: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        let at = self.0.now();
        self.0
            .checker
            .lock()
            .engaged(name.as_str(), self.0.who, cluster.id().to_string(), at);
        self.0.trace(format_args!("engaged {name}"));
        Ok(())
    }
}

/// A future that is ready after `n` polls, waking itself in between: driving a runtime with
/// it runs a few of its ready tasks and stops, the clock untouched.
struct Polls(u32);

impl Future for Polls {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Where the process is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Running,
    /// SIGSTOP: not driven.
    Paused,
    /// Told to stop (gracefully): driven until its manager returns, up to this moment.
    Stopping(Ms),
}

/// What the whole world shares with a new process.
pub(crate) struct Shared {
    pub(crate) wire: Arc<Wire>,
    pub(crate) now: Arc<AtomicU64>,
    pub(crate) checker: Arc<Mutex<Checker>>,
    pub(crate) trace: Arc<Mutex<Trace>>,
    pub(crate) timings: Timings,
    pub(crate) kind: Kind,
    /// Whether replicas shard (see `Options::sharded`).
    pub(crate) sharded: bool,
}

/// The provider's handle of one process.
enum Source {
    Clusters(Arc<ClustersProvider>),
    Namespaces,
}

/// The cluster engaged by hand, and this process's engagement of it.
struct Hand {
    name: String,
    target: Target,
    wanted: bool,
    token: Option<CancellationToken>,
}

/// One replica process.
pub(crate) struct Process {
    pub(crate) who: Sender,
    pub(crate) id: String,
    rt: Option<tokio::runtime::Runtime>,
    clock: Clock,
    probe: Arc<Probe>,
    pub(crate) mgr: Manager,
    token: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), mcr_manager::Error>>,
    source: Source,
    /// The clusters provider's members this process's source wants now.
    wanted: Arc<Mutex<BTreeSet<String>>>,
    hand: Arc<Mutex<Option<Hand>>>,
    pub(crate) state: State,
}

fn ms(t: Ms) -> Duration {
    Duration::from_millis(t)
}

impl Process {
    /// Starts replica `who` at `now`; `event_interval` is its runtime's (how many tasks it
    /// runs between looks at its timers, a scheduling choice of the seed).
    pub(crate) fn start(
        shared: &Shared,
        who: Sender,
        now: Ms,
        event_interval: u32,
        rng_seed: u64,
    ) -> Process {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        builder
            .enable_time()
            .start_paused(true)
            .event_interval(event_interval.max(1));
        #[cfg(tokio_unstable)]
        builder.rng_seed(tokio::runtime::RngSeed::from_bytes(&rng_seed.to_le_bytes()));
        #[cfg(not(tokio_unstable))]
        let _ = rng_seed;
        let rt = builder.build().expect("a current-thread runtime builds");
        let clock = Clock::of(&rt, now);
        let id = format!("r{}", who.replica);
        let probe = Arc::new(Probe {
            who,
            clock,
            now: shared.now.clone(),
            checker: shared.checker.clone(),
            trace: shared.trace.clone(),
            next: AtomicU64::new(0),
            timings: shared.timings,
        });
        let endpoint = |target| Endpoint {
            wire: shared.wire.clone(),
            from: who,
            target,
            clock,
            now: shared.now.clone(),
        };
        let t = shared.timings;
        let sharding = Sharding::new("sim")
            .identity(&id)
            .namespace("default")
            .lease_duration(ms(t.lease))
            .renew_deadline(ms(t.renew_deadline))
            .renew_period(ms(t.renew_period));
        let (kind, sharded) = (shared.kind, shared.sharded);
        let host = endpoint(Target::Host);
        let probe2 = probe.clone();
        let (mgr, source) = rt.block_on(async move {
            let host = host.client();
            let (builder, source) = match kind {
                Kind::Clusters => {
                    let provider =
                        Arc::new(ClustersProvider::with_sync_timeout(ms(t.sync_timeout)));
                    let builder = Manager::builder(host).provider(provider.clone());
                    (builder, Source::Clusters(provider))
                }
                Kind::Namespaces => {
                    let host = Cluster::new(ClusterName::host(), host);
                    let options = mcr_provider_namespace::Options {
                        label_selector: Some(format!("{MEMBER_LABEL}=true")),
                        sync_timeout: ms(t.sync_timeout),
                        retry_delay: ms(t.retry),
                        ..Default::default()
                    };
                    let provider =
                        mcr_provider_namespace::NamespaceProvider::new(host.clone(), options);
                    let builder = Manager::builder_with_host(host).provider(Arc::new(provider));
                    (builder, Source::Namespaces)
                }
            };
            let builder = if sharded {
                builder.sharding(sharding)
            } else {
                builder
            };
            let mgr = builder.build();
            // Lists from the watch cache (`resourceVersion=0`), which stale-list faults serve
            // from an older snapshot.
            let watch = mcr_manager::WatchOptions::config(
                kube::runtime::watcher::Config::default().any_semantic(),
            );
            Controller::new(&mgr)
                .for_with::<ConfigMap>(watch)
                .register(reconcile, error_policy, probe2.clone())
                .expect("the simulation's controller registers");
            mgr.engagements().subscribe(Arc::new(Engaged(probe2)));
            (mgr, source)
        });
        let token = CancellationToken::new();
        let run = {
            let (mgr, token) = (mgr.clone(), token.clone());
            rt.spawn(async move { mgr.run_until(token).await })
        };
        let process = Process {
            who,
            id,
            rt: Some(rt),
            clock,
            probe,
            mgr,
            token,
            run,
            source,
            wanted: Arc::default(),
            hand: Arc::default(),
            state: State::Running,
        };
        process.spawn_hand_engager(shared);
        process
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.rt.as_ref().expect("a live process has its runtime")
    }

    /// Runs the process from `from` (its clock jumps there first if it lags: a process
    /// resumed after a pause) until `to`.
    pub(crate) fn drive(&mut self, from: Ms, to: Ms) {
        let (start, end) = (self.clock.instant(from), self.clock.instant(to));
        let _driving = crate::logs::driving(self.clock, self.who);
        self.rt().block_on(async move {
            let now = tokio::time::Instant::now();
            if now < start {
                tokio::time::advance(start - now).await;
            }
            tokio::time::sleep_until(end).await;
        });
    }

    /// Runs a few of the process's ready tasks (about `polls` times its event interval) and
    /// stops there, mid-step: what the simulator does next lands between two of its tasks.
    pub(crate) fn cut(&mut self, polls: u32) {
        let _driving = crate::logs::driving(self.clock, self.who);
        self.rt().block_on(Polls(polls));
    }

    /// Kill -9: every task dropped at once.
    pub(crate) fn kill(mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }

    /// Tells the manager to stop (gracefully: it releases its members and leaves the group).
    pub(crate) fn stop(&mut self, deadline: Ms) {
        self.token.cancel();
        self.state = State::Stopping(deadline);
    }

    /// Whether its manager returned.
    pub(crate) fn finished(&self) -> bool {
        self.run.is_finished()
    }

    /// The members in its table, with their phase, among `names`.
    pub(crate) fn table(&self, names: &[String]) -> Vec<(String, Phase)> {
        let table = self.mgr.engagements();
        names
            .iter()
            .filter_map(|n| {
                let state = table.member_state(&n.as_str().into())?;
                Some((n.clone(), Phase::of(&state)))
            })
            .collect()
    }

    /// Whether it says it owns each of `names`.
    pub(crate) fn owners(&self, names: &[String]) -> Vec<(String, bool)> {
        names
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    self.mgr.fleet().owner(&n.as_str().into()).is_owned(),
                )
            })
            .collect()
    }

    /// The clusters provider's source wants `name` (reached at `target`): the provider is
    /// told so ([`ClustersProvider::want`]); the table brings it up when this replica owns it
    /// and retries it while it fails.
    pub(crate) fn want(&self, shared: &Shared, name: &str, target: Target) {
        let Source::Clusters(provider) = &self.source else {
            return;
        };
        self.wanted.lock().insert(name.to_owned());
        let endpoint = Endpoint {
            wire: shared.wire.clone(),
            from: self.who,
            target,
            clock: self.clock,
            now: shared.now.clone(),
        };
        let (provider, wanted, probe) = (provider.clone(), self.wanted.clone(), self.probe.clone());
        let name = name.to_owned();
        // From a task of the process, as a program's discovery would; a removal that comes
        // first wins.
        self.rt().spawn(async move {
            if !wanted.lock().contains(&name) {
                return;
            }
            let cluster = Cluster::new(name.as_str(), endpoint.client());
            if let Err(err) = provider.want(cluster) {
                probe.trace(format_args!("want {name} refused: {err}"));
            }
        });
    }

    /// The clusters provider's source no longer wants `name`: removed now.
    pub(crate) fn unwant(&self, name: &str) {
        let Source::Clusters(provider) = &self.source else {
            return;
        };
        self.wanted.lock().remove(name);
        let removed = provider.remove(&name.into());
        self.probe.trace(format_args!(
            "provider remove {name}: {}",
            if removed { "removed" } else { "not found" }
        ));
    }

    /// New credentials for `name`: the provider wants a new instance, which replaces the
    /// running one once it has synced.
    pub(crate) fn renew(&self, shared: &Shared, name: &str, target: Target) {
        let Source::Clusters(provider) = &self.source else {
            return;
        };
        let endpoint = Endpoint {
            wire: shared.wire.clone(),
            from: self.who,
            target,
            clock: self.clock,
            now: shared.now.clone(),
        };
        let (provider, wanted, probe) = (provider.clone(), self.wanted.clone(), self.probe.clone());
        let name = name.to_owned();
        self.rt().spawn(async move {
            // A program renews only what it wants (the source may have dropped it since).
            if !wanted.lock().contains(&name) {
                return;
            }
            let cluster = Cluster::new(name.as_str(), endpoint.client());
            match provider.want(cluster) {
                Ok(()) => probe.trace(format_args!("renew {name}")),
                Err(err) => probe.trace(format_args!("renew {name} refused: {err}")),
            }
        });
    }

    /// The cluster `name` (at `target`) is to be engaged by hand on this replica, or no
    /// longer (then its engagement's token is cancelled now).
    pub(crate) fn hand(&self, name: &str, target: Target, wanted: bool) {
        let mut hand = self.hand.lock();
        let h = hand.get_or_insert_with(|| Hand {
            name: name.to_owned(),
            target,
            wanted,
            token: None,
        });
        h.wanted = wanted;
        if !wanted && let Some(token) = h.token.take() {
            token.cancel();
            self.probe.trace(format_args!("hand {name}: disengaged"));
        }
    }

    /// The engager of the cluster engaged by hand: while it is wanted, it starts a new
    /// instance's cache and engages it with the manager (`Aware::engage`), every retry
    /// period. A sharded manager must refuse it every time ([`Invariant::Refusal`]): an
    /// acceptance, or a refusal for another reason, is a violation (and an accepted
    /// engagement is kept, as a program would, for the other invariants to judge).
    ///
    /// [`Invariant::Refusal`]: crate::check::Invariant::Refusal
    fn spawn_hand_engager(&self, shared: &Shared) {
        let (hand, mgr, probe) = (self.hand.clone(), self.mgr.clone(), self.probe.clone());
        let (wire, now, retry, who, clock) = (
            shared.wire.clone(),
            shared.now.clone(),
            shared.timings.retry,
            self.who,
            self.clock,
        );
        let stop = self.token.clone();
        self.rt().spawn(async move {
            let mut last: Option<String> = None;
            loop {
                let job = {
                    let hand = hand.lock();
                    hand.as_ref().and_then(|h| {
                        let engaged = h.token.as_ref().is_some_and(|t| !t.is_cancelled());
                        (h.wanted && !engaged).then(|| (h.name.clone(), h.target))
                    })
                };
                if let Some((name, target)) = job {
                    let endpoint = Endpoint {
                        wire: wire.clone(),
                        from: who,
                        target,
                        clock,
                        now: now.clone(),
                    };
                    let token = stop.child_token();
                    let cluster = Cluster::new(name.as_str(), endpoint.client());
                    cluster.cache().start(token.child_token());
                    let outcome = match mgr.engage(token.clone(), name.as_str().into(), cluster) {
                        Ok(()) => {
                            probe
                                .checker
                                .lock()
                                .accepted_by_hand(&name, who, probe.now(), Ok(()));
                            if let Some(h) = hand.lock().as_mut() {
                                h.token = Some(token);
                            }
                            "accepted".to_owned()
                        }
                        Err(err) => {
                            token.cancel();
                            if !matches!(err, mcr_core::Error::Engage { .. }) {
                                probe.checker.lock().accepted_by_hand(
                                    &name,
                                    who,
                                    probe.now(),
                                    Err(err.to_string()),
                                );
                            }
                            format!("refused: {}", mcr_core::ErrorChain(&err))
                        }
                    };
                    if last.as_deref() != Some(outcome.as_str()) {
                        probe.trace(format_args!("hand {name}: {outcome}"));
                        last = Some(outcome);
                    }
                }
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(ms(retry)) => {}
                }
            }
        });
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}
