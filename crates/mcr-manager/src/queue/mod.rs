//! The work queue shared by every cluster of one controller.
//!
//! Keys are grouped per cluster. The queue
//! - deduplicates: a key that is already waiting is not added twice (the earliest time wins);
//! - never hands out a key that is running: a request for it arriving meanwhile is remembered and
//!   the key becomes ready once more when the running reconcile is [`done`](WorkQueue::done);
//! - delays keys (requeue after a duration, error backoff) on a timer wheel;
//! - is fair across clusters: ready keys are served round-robin per cluster ([`fair`]);
//! - forgets a cluster's pending keys when the cluster leaves.
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

/// First delay of the per-key exponential backoff used after a panic.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// Upper bound of the per-key exponential backoff.
const BACKOFF_MAX: Duration = Duration::from_secs(300);

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
    ready: FairRing<T>,
    delayed: DelayQueue<(ClusterName, Arc<T>)>,
}

impl<T> Default for WorkQueue<T> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            ready: FairRing::default(),
            delayed: DelayQueue::new(),
        }
    }
}

impl<T: Eq + Hash> WorkQueue<T> {
    /// Asks for `key` of `cluster` to be handed out at `at` (now or earlier: as soon as possible).
    pub(crate) fn push(&mut self, cluster: &ClusterName, key: T, at: Instant) {
        let lane = match self.entries.get_mut(cluster) {
            Some(lane) => lane,
            None => self.entries.entry(cluster.clone()).or_default(),
        };
        if let Some(entry) = lane.get_mut(&key) {
            match &mut entry.state {
                State::Ready => {}
                State::Running { again } => *again = Some(again.map_or(at, |t| t.min(at))),
                State::Delayed(dk, when) => {
                    if at < *when {
                        if at <= Instant::now() {
                            self.delayed.remove(dk);
                            entry.state = State::Ready;
                            self.ready.push(cluster, entry.key.clone());
                        } else {
                            self.delayed.reset_at(dk, at);
                            *when = at;
                        }
                    }
                }
            }
            return;
        }
        let key = Arc::new(key);
        let state = Self::schedule(&mut self.ready, &mut self.delayed, cluster, &key, at);
        lane.insert(
            key.clone(),
            Entry {
                key,
                state,
                failures: 0,
            },
        );
    }

    fn schedule(
        ready: &mut FairRing<T>,
        delayed: &mut DelayQueue<(ClusterName, Arc<T>)>,
        cluster: &ClusterName,
        key: &Arc<T>,
        at: Instant,
    ) -> State {
        if at <= Instant::now() {
            ready.push(cluster, key.clone());
            State::Ready
        } else {
            State::Delayed(delayed.insert_at((cluster.clone(), key.clone()), at), at)
        }
    }

    /// The next ready key (round-robin across clusters), now marked running.
    pub(crate) fn pop(&mut self) -> Option<(ClusterName, Arc<T>)> {
        let (cluster, key) = self.ready.pop()?;
        if let Some(entry) = self.entries.get_mut(&cluster).and_then(|l| l.get_mut(&key)) {
            entry.state = State::Running { again: None };
        }
        Some((cluster, key))
    }

    /// Reports that the reconcile of `key` (handed out by [`pop`](Self::pop)) ended.
    pub(crate) fn done(&mut self, cluster: &ClusterName, key: &T, outcome: Outcome) {
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
                Some(Instant::now() + backoff(entry.failures))
            }
        };
        let next = match (again, requeue) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
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
                && matches!(entry.state, State::Delayed(..))
            {
                entry.state = State::Ready;
                self.ready.push(&cluster, key);
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

    /// True when nothing waits and nothing runs.
    #[cfg(test)]
    pub(crate) fn is_idle(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests;
