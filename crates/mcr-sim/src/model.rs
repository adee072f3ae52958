//! The checker's model of who should own a member: weighted rendezvous hashing over the
//! replicas the simulator knows to be available, as `mcr_manager::shard` documents it.
//!
//! This is an oracle, not the code under test: the checker compares what the replicas did
//! with it (churn is counted against its changes of owner), and at the end of a run every
//! replica's own answer (`Fleet::owner`) must agree with it, so a model that drifted from the
//! sharder fails loudly rather than passing quietly.
//!
//! (`mcr_manager` keeps its hashing private; a public `owner_of(peers, name)` there would let
//! this module call the real function instead: see the crate README.)

/// FNV-1a over `peer`, a 0xff separator and `name`, then the splitmix64 finaliser.
fn mix(peer: &str, name: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let bytes = peer
        .bytes()
        .chain(std::iter::once(0xff))
        .chain(name.bytes());
    let h = bytes.fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    let h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// `-weight / ln(u)` with `u` uniform in (0, 1) from the top 53 bits of the hash.
fn score(peer: &str, weight: u32, name: &str) -> f64 {
    let u = ((mix(peer, name) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -f64::from(weight.max(1)) / u.ln()
}

/// The owner of `name` among `peers` (identity, weight): the highest score, the smaller
/// identity on a tie; `None` without peers.
pub(crate) fn owner<'a>(peers: &'a [(String, u32)], name: &str) -> Option<&'a str> {
    let mut best: Option<(&str, f64)> = None;
    for (id, weight) in peers {
        let s = score(id, *weight, name);
        let better = match best {
            None => true,
            Some((best_id, best_s)) => match s.total_cmp(&best_s) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => id.as_str() < best_id,
                std::cmp::Ordering::Less => false,
            },
        };
        if better {
            best = Some((id, s));
        }
    }
    best.map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_one_owner_and_only_a_leavers_names_move() {
        let three: Vec<(String, u32)> = ["r1", "r2", "r3"]
            .iter()
            .map(|id| (id.to_string(), 1))
            .collect();
        let two = three[..2].to_vec();
        let names: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
        let mut share = [0usize; 3];
        for n in &names {
            let before = owner(&three, n).unwrap();
            share[usize::from(before.as_bytes()[1] - b'1')] += 1;
            let after = owner(&two, n).unwrap();
            if before != "r3" {
                assert_eq!(before, after, "{n} moved between peers that stayed");
            }
        }
        assert!(share.iter().all(|s| *s > 60), "shares {share:?}");
        assert_eq!(owner(&[], "m0"), None);
    }
}
