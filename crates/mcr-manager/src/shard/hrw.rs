//! Weighted rendezvous hashing: which peer owns a cluster name.
//!
//! Each (peer, cluster) pair gets a uniform pseudo-random `u` in (0, 1) from a 64-bit hash;
//! the peer's score is `-weight / ln(u)` and the highest score owns the cluster. This is the
//! logarithmic method of weighted rendezvous hashing: a peer of weight `w` owns a `w / Σw`
//! share of the names, and when a peer joins or leaves only the names it gains or had move
//! (about `1/N` of them for equal weights), none between the other peers.

use mcr_core::ClusterName;

/// A live peer and its weight, as announced in its Lease.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Peer {
    /// The peer's identity.
    pub(crate) id: String,
    /// Its relative share of the fleet (at least 1).
    pub(crate) weight: u32,
}

impl Peer {
    pub(crate) fn new(id: impl Into<String>, weight: u32) -> Self {
        Peer {
            id: id.into(),
            weight: weight.max(1),
        }
    }
}

/// FNV-1a over `peer`, a separator and `name`, finished with the splitmix64 mixer (FNV alone
/// mixes the last bytes poorly).
fn hash(peer: &str, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in peer.bytes().chain([0xff]).chain(name.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The score of `peer` for `name` (higher wins).
fn score(peer: &Peer, name: &str) -> f64 {
    // 53 bits into (0, 1), never 0 or 1.
    let u = ((hash(&peer.id, name) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -f64::from(peer.weight) / u.ln()
}

/// The peer of `peers` that owns `name` (none without peers).
pub(crate) fn owner<'a>(peers: &'a [Peer], name: &ClusterName) -> Option<&'a Peer> {
    peers.iter().max_by(|a, b| {
        score(a, name.as_str())
            .total_cmp(&score(b, name.as_str()))
            .then_with(|| b.id.cmp(&a.id))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn names(n: usize) -> Vec<ClusterName> {
        (0..n)
            .map(|i| ClusterName::from(format!("cluster-{i}")))
            .collect()
    }

    fn peers(ids: &[&str]) -> Vec<Peer> {
        ids.iter().map(|id| Peer::new(*id, 1)).collect()
    }

    fn assign(peers: &[Peer], names: &[ClusterName]) -> Vec<String> {
        names
            .iter()
            .map(|n| owner(peers, n).unwrap().id.clone())
            .collect()
    }

    #[test]
    fn equal_weights_share_evenly() {
        let names = names(10_000);
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for id in assign(&peers(&["r1", "r2", "r3"]), &names) {
            *counts.entry(id).or_default() += 1;
        }
        for (id, c) in &counts {
            assert!((3000..3700).contains(c), "{id}: {c} of 10000");
        }
    }

    #[test]
    fn a_join_moves_about_one_in_n_and_only_to_the_newcomer() {
        let names = names(10_000);
        let before = assign(&peers(&["r1", "r2", "r3"]), &names);
        let after = assign(&peers(&["r1", "r2", "r3", "r4"]), &names);
        let moved: Vec<(&String, &String)> =
            before.iter().zip(&after).filter(|(a, b)| a != b).collect();
        assert!(moved.iter().all(|(_, to)| *to == "r4"), "moves only to r4");
        assert!(
            (2200..2800).contains(&moved.len()),
            "about 1/4 move: {}",
            moved.len()
        );
    }

    #[test]
    fn a_leave_moves_only_the_leavers_clusters() {
        let names = names(10_000);
        let before = assign(&peers(&["r1", "r2", "r3"]), &names);
        let after = assign(&peers(&["r1", "r3"]), &names);
        for (a, b) in before.iter().zip(&after) {
            if a != "r2" {
                assert_eq!(a, b, "a cluster of a peer that stayed does not move");
            }
        }
        let moved = before.iter().filter(|a| *a == "r2").count();
        assert!((3000..3700).contains(&moved), "{moved}");
    }

    #[test]
    fn weights_set_the_share() {
        let names = names(10_000);
        let ps = vec![Peer::new("big", 3), Peer::new("small", 1)];
        let big = assign(&ps, &names).iter().filter(|id| *id == "big").count();
        assert!((7200..7800).contains(&big), "3/4 expected: {big}");
    }
}
