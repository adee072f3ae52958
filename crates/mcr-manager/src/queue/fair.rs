//! Round-robin over clusters that have ready work.
//!
//! Each cluster has its own FIFO lane of ready keys; a ring holds the clusters whose lane is not
//! empty. [`FairRing::pop`] takes one key from the cluster at the front of the ring and moves that
//! cluster to the back, so a cluster with ten thousand ready keys gets one turn per round, exactly
//! like a cluster with one.
//!
//! Each ready key carries the [`Instant`] it became due, so the runner can observe how long it
//! waited (`mcr_queue_wait_seconds`) without any extra bookkeeping.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
    sync::Arc,
};

use mcr_core::ClusterName;
use tokio::time::Instant;

/// A key handed out by [`FairRing::pop`]: its cluster, the key, and when it became due.
pub(crate) type Popped<T> = (ClusterName, Arc<T>, Instant);

/// Ready keys, grouped per cluster, served round-robin across clusters.
#[derive(Debug)]
pub(crate) struct FairRing<T> {
    lanes: HashMap<ClusterName, VecDeque<(Arc<T>, Instant)>>,
    ring: VecDeque<ClusterName>,
    len: usize,
}

impl<T> Default for FairRing<T> {
    fn default() -> Self {
        Self {
            lanes: HashMap::new(),
            ring: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T: Eq + Hash> FairRing<T> {
    /// Appends `key`, due since `since`, to the lane of `cluster`. O(1); the caller guarantees it
    /// is not already there.
    pub(crate) fn push(&mut self, cluster: &ClusterName, key: Arc<T>, since: Instant) {
        self.len += 1;
        if let Some(lane) = self.lanes.get_mut(cluster) {
            if lane.is_empty() {
                self.ring.push_back(cluster.clone());
            }
            lane.push_back((key, since));
            return;
        }
        let mut lane = VecDeque::with_capacity(4);
        lane.push_back((key, since));
        self.lanes.insert(cluster.clone(), lane);
        self.ring.push_back(cluster.clone());
    }

    /// The next ready key: one from the cluster whose turn it is, with the instant it became
    /// due. O(1).
    pub(crate) fn pop(&mut self) -> Option<Popped<T>> {
        // Invariant: a cluster is in the ring exactly when its lane is non-empty.
        let cluster = self.ring.pop_front()?;
        let lane = self.lanes.get_mut(&cluster)?;
        let (key, since) = lane.pop_front()?;
        self.len -= 1;
        if lane.is_empty() {
            // Keep the (empty) lane allocation while the cluster is busy; it is dropped by
            // `remove_cluster` when the cluster leaves.
        } else {
            self.ring.push_back(cluster.clone());
        }
        Some((cluster, key, since))
    }

    /// Like [`pop`](Self::pop), but only from a cluster `allowed` accepts; clusters refused are
    /// passed over (their turn moves to the back). O(clusters with ready keys).
    pub(crate) fn pop_where(
        &mut self,
        allowed: impl Fn(&ClusterName) -> bool,
    ) -> Option<Popped<T>> {
        for _ in 0..self.ring.len() {
            let front = self.ring.front()?;
            if allowed(front) {
                return self.pop();
            }
            self.ring.rotate_left(1);
        }
        None
    }

    /// Drops every ready key of `cluster` and returns them. O(keys of that cluster + clusters).
    pub(crate) fn remove_cluster(&mut self, cluster: &ClusterName) -> Vec<Arc<T>> {
        let Some(lane) = self.lanes.remove(cluster) else {
            return Vec::new();
        };
        if !lane.is_empty() {
            self.ring.retain(|c| c != cluster);
        }
        self.len -= lane.len();
        lane.into_iter().map(|(key, _)| key).collect()
    }

    /// Forgets the lane of `cluster` if it is empty (memory hygiene for clusters with no work).
    pub(crate) fn forget_if_empty(&mut self, cluster: &ClusterName) {
        if self.lanes.get(cluster).is_some_and(VecDeque::is_empty) {
            self.lanes.remove(cluster);
        }
    }

    /// Number of ready keys across all clusters.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Number of ready keys of one cluster.
    pub(crate) fn cluster_len(&self, cluster: &ClusterName) -> usize {
        self.lanes.get(cluster).map_or(0, VecDeque::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> ClusterName {
        ClusterName::new(s)
    }

    impl<T: Eq + Hash> FairRing<T> {
        fn add(&mut self, cluster: &ClusterName, key: T) {
            self.push(cluster, Arc::new(key), Instant::now());
        }

        fn next(&mut self) -> Option<(ClusterName, Arc<T>)> {
            self.pop().map(|(c, k, _)| (c, k))
        }
    }

    #[test]
    fn round_robin_across_clusters() {
        let mut ring = FairRing::default();
        for i in 0..100 {
            ring.add(&name("flood"), i);
        }
        ring.add(&name("quiet"), 1000);
        // The quiet cluster gets the second turn, not the 101st.
        let first = ring.next().unwrap();
        let second = ring.next().unwrap();
        assert_eq!(first.0, name("flood"));
        assert_eq!(second, (name("quiet"), Arc::new(1000)));
        assert_eq!(ring.len(), 99);
        // Then the flood drains in FIFO order.
        let rest: Vec<i32> = std::iter::from_fn(|| ring.next())
            .map(|(_, k)| *k)
            .collect();
        assert_eq!(rest, (1..100).collect::<Vec<_>>());
        assert_eq!(ring.len(), 0);
    }

    #[test]
    fn interleaves_three_clusters() {
        let mut ring = FairRing::default();
        for c in ["a", "b", "c"] {
            for i in 0..3 {
                ring.add(&name(c), format!("{c}{i}"));
            }
        }
        let order: Vec<String> = std::iter::from_fn(|| ring.next())
            .map(|(_, k)| (*k).clone())
            .collect();
        assert_eq!(
            order,
            ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]
        );
    }

    #[test]
    fn remove_cluster_drops_its_keys_only() {
        let mut ring = FairRing::default();
        ring.add(&name("a"), 1);
        ring.add(&name("b"), 2);
        ring.add(&name("a"), 3);
        let dropped = ring.remove_cluster(&name("a"));
        assert_eq!(dropped.len(), 2);
        assert_eq!(ring.len(), 1);
        assert_eq!(ring.cluster_len(&name("a")), 0);
        assert_eq!(ring.next(), Some((name("b"), Arc::new(2))));
        assert_eq!(ring.next(), None);
        // The cluster can come back and is served again.
        ring.add(&name("a"), 4);
        assert_eq!(ring.next(), Some((name("a"), Arc::new(4))));
    }
}
