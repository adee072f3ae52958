//! The work queue shared by every cluster of one controller.
//!
//! Keys are grouped per cluster. The queue
//! - deduplicates: a key that is already waiting is not added twice (the earliest time wins);
//! - never hands out a key that is running: a request for it arriving meanwhile is remembered and
//!   the key becomes ready once more when the running reconcile is [`done`](WorkQueue::done);
//! - delays keys (requeue after a duration, error backoff) on a timer wheel;
//! - debounces like kube-runtime's `debounced_scheduler`: every request is due at its time plus
//!   the debounce period, and a request for a waiting key that is not later than the key's
//!   current due time moves it to the new request's time plus the debounce period. A key thus
//!   runs once no request for it arrived for a whole debounce period (each new event within the
//!   window pushes it back), and never later than kube-runtime would run it;
//! - is fair across clusters: ready keys are served round-robin per cluster ([`fair`]);
//! - serves live changes first: keys asked for by an informer's initial list (or an unchanged
//!   relist) wait in a second, equally fair ring that is served only when no live key is ready
//!   in a cluster the caller accepts; a live request for such a key moves it to the live ring;
//! - forgets a cluster's pending keys when the cluster leaves;
//! - remembers when each ready key became due (enqueued ready, or its delay expired, or its
//!   follow-up request while it ran), so [`WorkQueue::pop_due`] can tell how long it waited.
//!
//! Every operation is O(1) except [`WorkQueue::remove_cluster`] (linear in that cluster's keys).
//! The queue is a plain data structure owned by one task: no locks.

mod fair;

use std::{
    collections::HashMap,
    hash::Hash,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use mcr_core::{ClusterName, backoff::Backoff};
use tokio::time::Instant;
use tokio_util::time::{DelayQueue, delay_queue};

use self::fair::FairRing;
pub(crate) use self::fair::Popped;

/// First delay of the per-key exponential backoff used after a panic.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// Upper bound of the per-key exponential backoff.
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// The furthest a key is ever scheduled ahead (as kube-runtime: about six months). Keeps
/// `Instant` arithmetic from overflowing and the timer wheel within its range.
const MAX_DELAY: Duration = Duration::from_secs(86_400 * 30 * 6);

/// `now + delay`, clamped to [`MAX_DELAY`] (so a huge requeue cannot overflow or panic).
pub(crate) fn after(now: Instant, delay: Duration) -> Instant {
    now + delay.min(MAX_DELAY)
}

/// When a request asked for `at` is due: `at` plus the debounce period, at most
/// [`MAX_DELAY`] from `now`.
fn due(at: Instant, debounce: Duration, now: Instant) -> Instant {
    let limit = after(now, MAX_DELAY);
    at.checked_add(debounce).map_or(limit, |due| due.min(limit))
}

/// The exponential backoff after `failures` consecutive failures (1 = first failure).
pub(crate) fn backoff(failures: u32) -> Duration {
    Backoff::new(BACKOFF_BASE, BACKOFF_MAX).delay_after(failures)
}

/// How a reconcile ended, as far as the queue is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Succeeded; requeue at that time if `Some`.
    Success(Option<Instant>),
    /// Failed; requeue at that time if `Some` (the error policy decided).
    Failure(Option<Instant>),
    /// Failed without a policy decision (a panic): retry with the per-key exponential backoff.
    Backoff,
}

#[derive(Debug)]
enum State {
    /// In a ready ring: the initial one (`initial`) or the live one.
    Ready { initial: bool },
    /// On the timer; `initial`: it goes to the initial ring when due.
    Delayed(delay_queue::Key, Instant, bool),
    /// Handed out; `again` is when it is due once more (a request arrived meanwhile).
    Running { again: Option<Instant> },
}

#[derive(Debug)]
struct Entry<T> {
    key: Arc<T>,
    state: State,
    failures: u32,
}

/// A deduplicating, delaying, cluster-fair work queue (see the module docs).
#[derive(Debug)]
pub(crate) struct WorkQueue<T> {
    entries: HashMap<ClusterName, HashMap<Arc<T>, Entry<T>>>,
    /// Ready keys of live changes.
    ready: FairRing<T>,
    /// Ready keys of initial lists, served when no live key is. May hold stale copies of keys
    /// that moved to `ready` meanwhile: skipped when popped.
    initial: FairRing<T>,
    delayed: DelayQueue<(ClusterName, Arc<T>)>,
    debounce: Duration,
}

impl<T> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::with_debounce(Duration::ZERO)
    }
}

impl<T> WorkQueue<T> {
    /// An empty queue that debounces every request by `debounce` (see the module docs).
    pub(crate) fn with_debounce(debounce: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            ready: FairRing::default(),
            initial: FairRing::default(),
            delayed: DelayQueue::new(),
            debounce,
        }
    }
}

impl<T: Eq + Hash> WorkQueue<T> {
    /// Asks for `key` of `cluster` to be handed out at `at` (plus the debounce period; now or
    /// earlier: as soon as possible).
    ///
    /// A key already waiting keeps its due time if that is earlier than `at` (the earlier request
    /// wins); otherwise it becomes due at `at` plus the debounce period, which may push it back:
    /// that is the debounce. A key that is already due (ready, or running and due again) stays
    /// as it is.
    pub(crate) fn push(&mut self, cluster: &ClusterName, key: T, at: Instant) {
        self.request(cluster, key, at, false);
    }

    /// [`push`](Self::push) for a request of an informer's initial list: a new key waits in the
    /// initial ring, behind every live key (see the module docs). A key already waiting keeps
    /// its place.
    pub(crate) fn push_initial(&mut self, cluster: &ClusterName, key: T, at: Instant) {
        self.request(cluster, key, at, true);
    }

    fn request(&mut self, cluster: &ClusterName, key: T, at: Instant, initial: bool) {
        let now = Instant::now();
        let due = due(at, self.debounce, now);
        let lane = match self.entries.get_mut(cluster) {
            Some(lane) => lane,
            None => self.entries.entry(cluster.clone()).or_default(),
        };
        if let Some(entry) = lane.get_mut(&key) {
            match &mut entry.state {
                State::Ready { initial: false } => {}
                State::Ready { initial: true } => {
                    if !initial {
                        // A live change for a key of an initial list: served with live ones
                        // (its copy in the initial ring is skipped when popped).
                        entry.state = State::Ready { initial: false };
                        self.ready.push(cluster, entry.key.clone(), now);
                    }
                }
                State::Running { again } => match again {
                    None => *again = Some(due),
                    Some(when) if *when > now && *when >= at => *when = due,
                    Some(_) => {}
                },
                State::Delayed(dk, when, waits) => {
                    *waits &= initial;
                    if *when >= at {
                        if due <= now {
                            self.delayed.remove(dk);
                            let initial = *waits;
                            entry.state = State::Ready { initial };
                            // Due from this request on (not from an earlier `at`).
                            let ring = if initial {
                                &mut self.initial
                            } else {
                                &mut self.ready
                            };
                            ring.push(cluster, entry.key.clone(), now);
                        } else {
                            self.delayed.reset_at(dk, due);
                            *when = due;
                        }
                    }
                }
            }
            return;
        }
        let key = Arc::new(key);
        // A new key is due from this request on at the earliest (not from an earlier `at`).
        let due = due.max(now);
        let state = Self::schedule(
            &mut self.ready,
            &mut self.initial,
            &mut self.delayed,
            (cluster, &key),
            due,
            initial,
        );
        lane.insert(
            key.clone(),
            Entry {
                key,
                state,
                failures: 0,
            },
        );
    }

    /// Makes `key` ready (due since `at`) in the live or the `initial` ring if `at` has come,
    /// or delays it until `at`.
    fn schedule(
        ready: &mut FairRing<T>,
        initial_ring: &mut FairRing<T>,
        delayed: &mut DelayQueue<(ClusterName, Arc<T>)>,
        (cluster, key): (&ClusterName, &Arc<T>),
        at: Instant,
        initial: bool,
    ) -> State {
        if at <= Instant::now() {
            let ring = if initial { initial_ring } else { ready };
            ring.push(cluster, key.clone(), at);
            State::Ready { initial }
        } else {
            let dk = delayed.insert_at((cluster.clone(), key.clone()), at);
            State::Delayed(dk, at, initial)
        }
    }

    /// The next ready key (round-robin across clusters), now marked running, with the instant it
    /// became due (its queue wait is `since.elapsed()`). O(1).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn pop_due(&mut self) -> Option<Popped<T>> {
        self.pop_due_where(|_| true)
    }

    /// [`pop_due`](Self::pop_due), only from a cluster `allowed` accepts (e.g. one below its
    /// cap of running reconciles). Live keys first; a key of an initial list only when no live
    /// key is ready in an accepted cluster.
    pub(crate) fn pop_due_where(
        &mut self,
        allowed: impl Fn(&ClusterName) -> bool,
    ) -> Option<Popped<T>> {
        if let Some((cluster, key, since)) = self.ready.pop_where(&allowed) {
            if let Some(entry) = self.entries.get_mut(&cluster).and_then(|l| l.get_mut(&key)) {
                entry.state = State::Running { again: None };
            }
            return Some((cluster, key, since));
        }
        loop {
            let (cluster, key, since) = self.initial.pop_where(&allowed)?;
            let entry = self.entries.get_mut(&cluster).and_then(|l| l.get_mut(&key));
            // A copy whose key moved to the live ring (or ran since) is skipped.
            if let Some(entry) = entry.filter(|e| matches!(e.state, State::Ready { initial: true }))
            {
                entry.state = State::Running { again: None };
                return Some((cluster, key, since));
            }
        }
    }

    /// [`pop_due`](Self::pop_due) without the instant.
    #[cfg(test)]
    pub(crate) fn pop(&mut self) -> Option<(ClusterName, Arc<T>)> {
        self.pop_due().map(|(cluster, key, _)| (cluster, key))
    }

    /// Reports that the reconcile of `key` (handed out by [`pop`](Self::pop)) ended.
    ///
    /// A requeue the outcome asks for is a request like any other (debounced, and merged with a
    /// request that arrived while the key ran, as [`push`](Self::push) does).
    pub(crate) fn done(&mut self, cluster: &ClusterName, key: &T, outcome: Outcome) {
        let now = Instant::now();
        let debounce = self.debounce;
        let Some(lane) = self.entries.get_mut(cluster) else {
            return;
        };
        let Some(entry) = lane.get_mut(key) else {
            return;
        };
        let State::Running { again } = entry.state else {
            return;
        };
        let requeue = match outcome {
            Outcome::Success(at) => {
                entry.failures = 0;
                at
            }
            Outcome::Failure(at) => {
                entry.failures = entry.failures.saturating_add(1);
                at
            }
            Outcome::Backoff => {
                entry.failures = entry.failures.saturating_add(1);
                Some(after(now, backoff(entry.failures)))
            }
        };
        let due = |at: Instant| due(at, debounce, now);
        let next = match (again, requeue) {
            (None, None) => None,
            (None, Some(at)) => Some(due(at)),
            (Some(when), None) => Some(when),
            // Already due again: it runs right away and the requeue adds nothing.
            (Some(when), Some(_)) if when <= now => Some(when),
            (Some(when), Some(at)) if when >= at => Some(due(at)),
            (Some(when), Some(_)) => Some(when),
        };
        match next {
            Some(at) => {
                entry.state = Self::schedule(
                    &mut self.ready,
                    &mut self.initial,
                    &mut self.delayed,
                    (cluster, &entry.key),
                    at,
                    false,
                );
            }
            None => {
                lane.remove(key);
                if lane.is_empty() {
                    self.entries.remove(cluster);
                    self.ready.forget_if_empty(cluster);
                    self.initial.forget_if_empty(cluster);
                }
            }
        }
    }

    /// Moves every key whose delay expired to the ready lanes. `Ready(())` when at least one
    /// moved; `Pending` (with a timer registered) otherwise.
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut moved = false;
        while let Poll::Ready(Some(expired)) = self.delayed.poll_expired(cx) {
            let (cluster, key) = expired.into_inner();
            if let Some(entry) = self.entries.get_mut(&cluster).and_then(|l| l.get_mut(&key))
                && let State::Delayed(_, when, initial) = entry.state
            {
                entry.state = State::Ready { initial };
                let ring = if initial {
                    &mut self.initial
                } else {
                    &mut self.ready
                };
                // Due since its time, however late the timer fired or was polled.
                ring.push(&cluster, key, when.min(Instant::now()));
                moved = true;
            }
        }
        if moved {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Drops every waiting key of `cluster` (running ones finish, but are not requeued).
    /// Returns how many were dropped.
    pub(crate) fn remove_cluster(&mut self, cluster: &ClusterName) -> usize {
        self.ready.remove_cluster(cluster);
        self.initial.remove_cluster(cluster);
        let mut dropped = 0;
        if let Some(lane) = self.entries.get_mut(cluster) {
            lane.retain(|_, entry| match &mut entry.state {
                State::Ready { .. } => {
                    dropped += 1;
                    false
                }
                State::Delayed(dk, ..) => {
                    self.delayed.remove(dk);
                    dropped += 1;
                    false
                }
                State::Running { again } => {
                    *again = None;
                    true
                }
            });
            if lane.is_empty() {
                self.entries.remove(cluster);
            }
        }
        dropped
    }

    /// Keys waiting (ready or delayed), all clusters.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        let ready = self.entries.values().flat_map(|l| l.values());
        ready
            .filter(|e| matches!(e.state, State::Ready { .. }))
            .count()
            + self.delayed.len()
    }

    /// Keys ready to be handed out right now, one cluster (a key that moved from the initial
    /// to the live ring counts twice until its stale copy is popped).
    pub(crate) fn ready_len(&self, cluster: &ClusterName) -> usize {
        self.ready.cluster_len(cluster) + self.initial.cluster_len(cluster)
    }

    /// When `key` of `cluster` is due, if it waits on the timer (not ready, not running).
    #[cfg(test)]
    pub(crate) fn due_at(&self, cluster: &ClusterName, key: &T) -> Option<Instant> {
        match self.entries.get(cluster)?.get(key)?.state {
            State::Delayed(_, when, _) => Some(when),
            _ => None,
        }
    }

    /// True when nothing waits and nothing runs.
    #[cfg(test)]
    pub(crate) fn is_idle(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests;
