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

use mcr_core::ClusterName;
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
    let exp = failures.saturating_sub(1).min(20);
    BACKOFF_BASE.saturating_mul(1 << exp).min(BACKOFF_MAX)
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
    Ready,
    Delayed(delay_queue::Key, Instant),
    /// Handed out; `again` is when it is due once more (a request arrived meanwhile).
    Running {
        again: Option<Instant>,
    },
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
    ready: FairRing<T>,
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
        let now = Instant::now();
        let due = due(at, self.debounce, now);
        let lane = match self.entries.get_mut(cluster) {
            Some(lane) => lane,
            None => self.entries.entry(cluster.clone()).or_default(),
        };
        if let Some(entry) = lane.get_mut(&key) {
            match &mut entry.state {
                State::Ready => {}
                State::Running { again } => match again {
                    None => *again = Some(due),
                    Some(when) if *when > now && *when >= at => *when = due,
                    Some(_) => {}
                },
                State::Delayed(dk, when) => {
                    if *when >= at {
                        if due <= now {
                            self.delayed.remove(dk);
                            entry.state = State::Ready;
                            // Due from this request on (not from an earlier `at`).
                            self.ready.push(cluster, entry.key.clone(), now);
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
        let state = Self::schedule(&mut self.ready, &mut self.delayed, cluster, &key, due);
        lane.insert(
            key.clone(),
            Entry {
                key,
                state,
                failures: 0,
            },
        );
    }

    /// Makes `key` ready (due since `at`) if `at` has come, or delays it until `at`.
    fn schedule(
        ready: &mut FairRing<T>,
        delayed: &mut DelayQueue<(ClusterName, Arc<T>)>,
        cluster: &ClusterName,
        key: &Arc<T>,
        at: Instant,
    ) -> State {
        if at <= Instant::now() {
            ready.push(cluster, key.clone(), at);
            State::Ready
        } else {
            State::Delayed(delayed.insert_at((cluster.clone(), key.clone()), at), at)
        }
    }

    /// The next ready key (round-robin across clusters), now marked running, with the instant it
    /// became due (its queue wait is `since.elapsed()`). O(1).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn pop_due(&mut self) -> Option<Popped<T>> {
        self.pop_due_where(|_| true)
    }

    /// [`pop_due`](Self::pop_due), only from a cluster `allowed` accepts (e.g. one below its
    /// cap of running reconciles).
    pub(crate) fn pop_due_where(
        &mut self,
        allowed: impl Fn(&ClusterName) -> bool,
    ) -> Option<Popped<T>> {
        let (cluster, key, since) = self.ready.pop_where(allowed)?;
        if let Some(entry) = self.entries.get_mut(&cluster).and_then(|l| l.get_mut(&key)) {
            entry.state = State::Running { again: None };
        }
        Some((cluster, key, since))
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
                entry.state =
                    Self::schedule(&mut self.ready, &mut self.delayed, cluster, &entry.key, at);
            }
            None => {
                lane.remove(key);
                if lane.is_empty() {
                    self.entries.remove(cluster);
                    self.ready.forget_if_empty(cluster);
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
                && let State::Delayed(_, when) = entry.state
            {
                entry.state = State::Ready;
                // Due since its time, however late the timer fired or was polled.
                self.ready.push(&cluster, key, when.min(Instant::now()));
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
        let mut dropped = self.ready.remove_cluster(cluster).len();
        if let Some(lane) = self.entries.get_mut(cluster) {
            lane.retain(|_, entry| match &mut entry.state {
                State::Ready => false,
                State::Delayed(dk, _) => {
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
        self.ready.len() + self.delayed.len()
    }

    /// Keys ready to be handed out right now, one cluster.
    pub(crate) fn ready_len(&self, cluster: &ClusterName) -> usize {
        self.ready.cluster_len(cluster)
    }

    /// When `key` of `cluster` is due, if it waits on the timer (not ready, not running).
    #[cfg(test)]
    pub(crate) fn due_at(&self, cluster: &ClusterName, key: &T) -> Option<Instant> {
        match self.entries.get(cluster)?.get(key)?.state {
            State::Delayed(_, when) => Some(when),
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
