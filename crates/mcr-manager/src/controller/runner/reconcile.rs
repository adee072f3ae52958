//! Reconcile execution: starting a reconcile (panics caught, queue wait observed) as a future
//! the loop spawns on a task of its own, and turning its outcome, handed back when that task
//! is joined, into metrics, logs and the queue's next step.

use std::{
    fmt::{self, Debug},
    hash::Hash,
    panic::AssertUnwindSafe,
    sync::Arc,
    time::Duration,
};

use futures::FutureExt;
use kube::{Resource, runtime::reflector::ObjectRef};
use mcr_core::{BoxFuture, ClusterName, ErrorChain, cluster_not_found};
use serde::de::DeserializeOwned;
use tokio::{task::JoinError, time::Instant};
use tracing::{Instrument, debug, error, info_span, trace, warn};

use mcr_core::panic_message;

use super::{Loop, limits::Cut, member::Member, reconciler::Returned};
use crate::{
    controller::{
        action::{UnreadableAction, requeue_after},
        outcome::report,
    },
    queue::{Outcome, after},
};

/// How long a key of a cluster whose primary cache has not synced yet is held back.
const UNSYNCED_RETRY: Duration = Duration::from_millis(50);

/// A reconcile that ended.
pub(super) struct Finished<K: Resource> {
    cluster: ClusterName,
    key: Arc<ObjectRef<K>>,
    /// What the reconciler returned (or its panic), unless the runtime cut it short.
    result: Result<std::thread::Result<Returned>, Cut>,
    elapsed: Duration,
}

/// Shows a request without building one.
struct Shown<'a, K: Resource>(&'a ClusterName, &'a ObjectRef<K>);

impl<K: Resource> fmt::Display for Shown<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.1.namespace.as_deref().unwrap_or_default();
        write!(f, "cluster://{}/{}/{}", self.0, ns, self.1.name)
    }
}

impl<K, Ctx> Loop<'_, K, Ctx>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    pub(super) fn start_reconcile(
        &mut self,
        cluster: ClusterName,
        key: Arc<ObjectRef<K>>,
        due: Instant,
    ) -> Option<BoxFuture<'static, Finished<K>>> {
        // A cluster that is leaving (its token fired, its removal not yet processed) gets no
        // new reconciles.
        let Some(e) = (self.members.get(&cluster))
            .and_then(Member::engaged)
            .filter(|e| !e.token.is_cancelled())
        else {
            self.queue.done(&cluster, &key, Outcome::Success(None));
            return None;
        };
        if self.spec.fleet.lapsed(&cluster) {
            // Sharded, past the renew deadline: nothing starts (the release follows; if the
            // replica renews first after all, the key runs then). Held back, not dropped.
            trace!(controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key), "ownership lapsed; held");
            let at = after(Instant::now(), UNSYNCED_RETRY);
            self.queue.done(&cluster, &key, Outcome::Success(Some(at)));
            return None;
        }
        if e.held.is_some() {
            // Listed here, but the member is not engaged yet (the informers of other
            // controllers on it are still listing, or this instance is a replacement not yet
            // active): a reconcile would not find its own cluster. Held, not dropped, and
            // queued again the moment the table activates the instance (`activated`).
            trace!(controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key), "cluster not engaged yet; held");
            self.queue.done(&cluster, &key, Outcome::Success(None));
            let engaged = self.members.get_mut(&cluster).and_then(Member::engaged_mut);
            if let Some(held) = engaged.and_then(|e| e.held.as_mut()) {
                held.insert(key);
            }
            return None;
        }
        if !e.primary.is_synced() {
            // Not active until the primary cache has synced: read from a cache still listing,
            // an existing object would look gone. Held back briefly, not dropped.
            trace!(controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key), "cache not synced; held");
            let at = after(Instant::now(), UNSYNCED_RETRY);
            self.queue.done(&cluster, &key, Outcome::Success(Some(at)));
            return None;
        }
        // Taken off the queue now: the wait since it became due ends here.
        e.metrics.wait.observe(due.elapsed());
        e.metrics.depth.set(self.queue.ready_len(&cluster) as i64);
        let cached = e.primary.get(key.namespace.as_deref(), &key.name);
        let ctx = e.ctx.clone();
        let Some(created) = (self.task.reconciler)(&cluster, &key, cached, ctx) else {
            if !e.primary.covers(key.namespace.as_deref()) {
                warn!(
                    controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key),
                    watched = ?e.primary.namespaces(),
                    "outside the namespaces the reconciled type is watched in, so never in the \
                     cache: skipped; watch its namespace too, or take a `Request<K>`"
                );
                self.queue.done(&cluster, &key, Outcome::Success(None));
                return None;
            }
            debug!(
                controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key),
                "not in the cache (deleted, or not created in this cluster yet): skipped; \
                 reconcilers that must see such keys (to create or clean up) take a `Request<K>`"
            );
            self.queue.done(&cluster, &key, Outcome::Success(None));
            return None;
        };
        let span = info_span!(
            "reconcile",
            controller = %self.spec.name,
            cluster = %cluster,
            object = %Shown(&cluster, &key),
            trace_id = tracing::field::Empty,
        );
        #[cfg(feature = "opentelemetry")]
        crate::telemetry::record_trace_id(&span);
        let left = e.cut.clone();
        // Sharded: checked on every poll, before the reconciler's future, so a process that
        // resumes past its renew deadline runs no more of it (the coordinator's release, which
        // cancels `left`, comes a few polls later). Never lapsed without sharding.
        let fence = (self.spec.fleet.clone(), cluster.clone());
        let timeout = self.spec.limits.reconcile_timeout;
        if let Some(member) = self.members.get_mut(&cluster) {
            self.slots.started(&mut member.in_flight, Instant::now());
        }
        // Boxed where it is built: the task that runs it then moves a pointer, not the whole
        // future (copies of it were a measurable part of the per-event cost).
        Some(Box::pin(
            async move {
                let started = Instant::now();
                let run = async {
                    match created {
                        Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
                        Err(panic) => Err(panic),
                    }
                };
                let bounded = async {
                    match timeout {
                        Some(t) => tokio::time::timeout(t, run)
                            .await
                            .map_err(|_| Cut::TimedOut),
                        None => Ok(run.await),
                    }
                };
                let lapsed = std::future::poll_fn(|_| {
                    let (fleet, name) = &fence;
                    if fleet.lapsed(name) {
                        std::task::Poll::Ready(())
                    } else {
                        std::task::Poll::Pending
                    }
                });
                // Both fences come before the reconciler's future on every poll: a reconcile
                // woken in the same instant its cluster left (or its hold lapsed) is dropped,
                // not polled once more.
                let cut_short = async {
                    tokio::select! {
                        biased;
                        () = lapsed => Err(Cut::ClusterLeft),
                        () = left.cancelled() => Err(Cut::ClusterLeft),
                        r = bounded => r,
                    }
                };
                // A panic while the reconciler's future is dropped is the reconciler's too:
                // caught here, so the task always hands its key back to the loop.
                let result = match AssertUnwindSafe(cut_short).catch_unwind().await {
                    Ok(r) => r,
                    Err(panic) => Ok(Err(panic)),
                };
                Finished {
                    cluster,
                    key,
                    result,
                    elapsed: started.elapsed(),
                }
            }
            .instrument(span),
        ))
    }

    /// Marks the clusters whose reconciles made no progress for the stall period as stalled,
    /// and says so once per stall.
    pub(super) fn check_stalls(&mut self) {
        let (after, now) = (self.spec.limits.stalled_after, Instant::now());
        for (cluster, member) in &mut self.members {
            let Some(in_flight) = self.slots.check(&mut member.in_flight, now, after) else {
                continue;
            };
            warn!(
                controller = %self.spec.name, cluster = %cluster, in_flight, stalled_after = ?after,
                "cluster stalled: none of its reconciles finished; it starts no new ones until one does, and its slots go to the other clusters"
            );
        }
    }

    /// Takes in a joined reconcile task.
    pub(super) fn joined(&mut self, joined: Result<Finished<K>, JoinError>) {
        match joined {
            Ok(f) => self.finish(f),
            // The loop aborts its reconcile tasks only when it stops, and a task catches
            // every panic of the reconciler, so this is not expected; its key stays
            // marked in flight.
            Err(err) => error!(controller = %self.spec.name, error = %err, "reconcile task failed"),
        }
    }

    pub(super) fn finish(&mut self, f: Finished<K>) {
        let Finished {
            cluster,
            key,
            result,
            elapsed,
        } = f;
        // A reconcile cut short (timed out, or its cluster left) produced no result to report.
        if let Ok(finished) = &result {
            let finished = match finished {
                Ok(Ok(action)) => Ok(Ok(action)),
                Ok(Err(failed)) => Ok(Err(failed.error())),
                Err(panic) => Err(panic.as_ref()),
            };
            report(&self.spec.on_outcome, &cluster, &key, finished, elapsed);
        }
        if let Some(member) = self.members.get_mut(&cluster) {
            self.slots.finished(&mut member.in_flight, Instant::now());
        }
        // The last reconcile of a departed member ended: its leave hook may start.
        self.start_leave(&cluster);
        self.settle(&cluster);
        let Some(e) = (self.members.get(&cluster))
            .and_then(Member::engaged)
            .filter(|e| !e.token.is_cancelled())
        else {
            // The cluster left while this ran: nothing to retry against.
            debug!(controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key), "cluster left during reconcile");
            self.queue.done(&cluster, &key, Outcome::Success(None));
            return;
        };
        e.metrics.duration.observe(elapsed.as_secs_f64());
        let now = Instant::now();
        let result = match result {
            Ok(result) => result,
            Err(cut) => {
                let outcome = if cut == Cut::ClusterLeft {
                    // A new instance replaced the one this ran against: run it there.
                    debug!(controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key), "cluster replaced during reconcile; requeued");
                    Outcome::Success(Some(now))
                } else {
                    e.metrics.error.inc();
                    warn!(
                        controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key),
                        timeout = ?self.spec.limits.reconcile_timeout,
                        "reconcile timed out; retrying with backoff"
                    );
                    Outcome::Backoff
                };
                self.queue.done(&cluster, &key, outcome);
                return;
            }
        };
        let outcome = match result {
            Ok(Ok(action)) => {
                e.metrics.success.inc();
                match requeue_after(&action) {
                    Ok(delay) => Outcome::Success(delay.map(|d| after(now, d))),
                    Err(err) => unreadable(&self.spec.name, &cluster, &key, &err),
                }
            }
            // Only the request's own cluster being gone ends it quietly; another cluster
            // missing is an error like any other.
            Ok(Err(failed))
                if !self.spec.retry_when_gone
                    && cluster_not_found(failed.error()) == Some(&cluster) =>
            {
                e.metrics.gone.inc();
                debug!(
                    controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key),
                    error = %ErrorChain(failed.error()), "cluster not found; not retried"
                );
                Outcome::Failure(None)
            }
            Ok(Err(failed)) => {
                e.metrics.error.inc();
                // Through `ErrorChain`: kube errors in the chain are redacted (a failed
                // credential command's error carries its command line and output).
                warn!(
                    controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key),
                    error = %ErrorChain(failed.error()), "reconcile failed"
                );
                // The error policy is user code too: a panic there must not stop the loop.
                match std::panic::catch_unwind(AssertUnwindSafe(|| failed.policy())) {
                    Ok(action) => match requeue_after(&action) {
                        Ok(delay) => Outcome::Failure(delay.map(|d| after(now, d))),
                        Err(err) => unreadable(&self.spec.name, &cluster, &key, &err),
                    },
                    Err(panic) => {
                        error!(
                            controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key),
                            panic = %panic_message(panic.as_ref()),
                            "error policy panicked; retrying with backoff"
                        );
                        Outcome::Backoff
                    }
                }
            }
            Err(panic) => {
                e.metrics.panic.inc();
                error!(
                    controller = %self.spec.name, cluster = %cluster, object = %Shown(&cluster, &key),
                    panic = %panic_message(panic.as_ref()),
                    "reconciler panicked; retrying with backoff"
                );
                Outcome::Backoff
            }
        };
        self.queue.done(&cluster, &key, outcome);
        if let Some(e) = self.members.get(&cluster).and_then(Member::engaged) {
            e.metrics.depth.set(self.queue.ready_len(&cluster) as i64);
        }
    }
}

/// An `Action` whose delay cannot be read: an error in the log, and backoff (never a guess).
fn unreadable<K: Resource>(
    controller: &str,
    cluster: &ClusterName,
    key: &ObjectRef<K>,
    err: &UnreadableAction,
) -> Outcome {
    error!(controller, cluster = %cluster, object = %Shown(cluster, key), error = %err, "retrying with backoff");
    Outcome::Backoff
}
