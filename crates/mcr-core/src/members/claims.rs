//! [`Claims`]: which of the source objects claiming one cluster name owns it.
//!
//! Two Secrets in different namespaces, or two ClusterProfiles carrying the same clusterset
//! name, can claim one cluster name. The owner is decided by a fixed rule, never by arrival
//! order, so it is the same after every restart whatever order the lists come in: the oldest
//! `creationTimestamp` wins, then the smallest key (for `namespace/name` keys: the namespace,
//! then the name); a claim without a timestamp ranks last.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::ClusterName;

struct Claim {
    name: ClusterName,
    created: Option<Time>,
}

/// The claims of source objects (keyed by `K`, e.g. a `namespace/name` reference) on cluster
/// names, and the owner of each name: the oldest `creationTimestamp` wins, then the smallest
/// key; a claim without a timestamp ranks last. Never the arrival order, so the owner is the
/// same after every restart.
///
/// [`claim`](Self::claim) and [`release`](Self::release) record what the source says;
/// [`settle`](Self::settle) decides a name's owner and says who lost it or takes it over.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
/// use k8s_openapi::jiff::Timestamp;
/// use mcr_core::members::Claims;
///
/// let at = |s| Some(Time(Timestamp::from_second(s).unwrap()));
/// let mut claims = Claims::new();
/// claims.claim("b/x", "x".into(), at(100));
/// assert_eq!(claims.settle(&"x".into()).owner, Some("b/x"));
/// // An older claim listed later takes the name over.
/// claims.claim("a/x", "x".into(), at(50));
/// let settled = claims.settle(&"x".into());
/// assert_eq!((settled.owner, settled.previous), (Some("a/x"), Some("b/x")));
/// assert_eq!(settled.others, ["b/x"]);
/// ```
pub struct Claims<K> {
    claims: BTreeMap<K, Claim>,
    by_name: HashMap<ClusterName, BTreeSet<K>>,
    owners: HashMap<ClusterName, K>,
}

impl<K> Default for Claims<K> {
    fn default() -> Self {
        Claims {
            claims: BTreeMap::new(),
            by_name: HashMap::new(),
            owners: HashMap::new(),
        }
    }
}

impl<K> std::fmt::Debug for Claims<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claims")
            .field("claims", &self.claims.len())
            .field("names", &self.by_name.len())
            .finish()
    }
}

/// What [`Claims::settle`] decided about one name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settled<K> {
    /// The owner now (`None`: nothing claims the name any more).
    pub owner: Option<K>,
    /// The owner before (`None`: the name had none).
    pub previous: Option<K>,
    /// The other claimants, which the owner outranks, in key order.
    pub others: Vec<K>,
}

impl<K> Settled<K> {
    /// Whether the name changed hands (including getting its first owner, or losing its last).
    ///
    /// ```
    /// let s = mcr_core::members::Settled { owner: Some(1), previous: None, others: vec![] };
    /// assert!(s.changed());
    /// ```
    pub fn changed(&self) -> bool
    where
        K: PartialEq,
    {
        self.owner != self.previous
    }
}

impl<K: Ord + Clone> Claims<K> {
    /// No claims.
    pub fn new() -> Self {
        Self::default()
    }

    /// `key` claims `name` (created at `created`). Returns the name it claimed before when that
    /// was another one: settle that name too.
    pub fn claim(
        &mut self,
        key: K,
        name: ClusterName,
        created: Option<Time>,
    ) -> Option<ClusterName> {
        let before = self.release(&key).filter(|before| *before != name);
        self.by_name
            .entry(name.clone())
            .or_default()
            .insert(key.clone());
        self.claims.insert(key, Claim { name, created });
        before
    }

    /// `key` claims nothing any more. Returns the name it claimed: settle it.
    pub fn release(&mut self, key: &K) -> Option<ClusterName> {
        let claim = self.claims.remove(key)?;
        if let Some(keys) = self.by_name.get_mut(&claim.name) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_name.remove(&claim.name);
            }
        }
        Some(claim.name)
    }

    /// Decides who owns `name` now: the claimant with the oldest `creationTimestamp`, then the
    /// smallest key (claims without a timestamp rank last).
    pub fn settle(&mut self, name: &ClusterName) -> Settled<K> {
        let keys = self.by_name.get(name);
        let rank = |k: &K| {
            let created = self.claims.get(k).and_then(|c| c.created.as_ref());
            (created.is_none(), created, k.clone())
        };
        let owner = keys.into_iter().flatten().min_by_key(|k| rank(k)).cloned();
        let others = keys
            .into_iter()
            .flatten()
            .filter(|k| Some(*k) != owner.as_ref())
            .cloned()
            .collect();
        let previous = match &owner {
            Some(owner) => self.owners.insert(name.clone(), owner.clone()),
            None => self.owners.remove(name),
        };
        Settled {
            owner,
            previous,
            others,
        }
    }

    /// Every claimed name, sorted.
    pub fn names(&self) -> Vec<ClusterName> {
        let names: BTreeSet<&ClusterName> = self.by_name.keys().collect();
        names.into_iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(s: i64) -> Option<Time> {
        Some(Time(Timestamp::from_second(s).unwrap()))
    }

    #[test]
    fn the_oldest_then_the_smallest_key_owns_whatever_the_order() {
        let claimants = [("b", at(10)), ("a", at(20)), ("c", at(10)), ("d", None)];
        for rotation in 0..claimants.len() {
            let mut claims = Claims::new();
            for (key, created) in claimants.iter().cycle().skip(rotation).take(4) {
                claims.claim(*key, "x".into(), created.clone());
            }
            let settled = claims.settle(&"x".into());
            assert_eq!(settled.owner, Some("b"));
            assert_eq!(settled.others, ["a", "c", "d"]);
        }
    }

    #[test]
    fn moving_and_releasing_hand_the_name_on() {
        let mut claims = Claims::new();
        claims.claim("a", "x".into(), at(1));
        claims.claim("b", "x".into(), at(2));
        assert_eq!(claims.settle(&"x".into()).owner, Some("a"));
        // `a` moves to another name: `x` goes to `b`.
        assert_eq!(claims.claim("a", "y".into(), at(1)), Some("x".into()));
        let x = claims.settle(&"x".into());
        assert_eq!((x.owner, x.previous), (Some("b"), Some("a")));
        assert_eq!(
            claims.names(),
            [ClusterName::new("x"), ClusterName::new("y")]
        );
        // Claiming the same name again is no move.
        assert_eq!(claims.claim("a", "y".into(), at(1)), None);
        assert_eq!(claims.release(&"b"), Some("x".into()));
        let x = claims.settle(&"x".into());
        assert!(x.changed() && x.owner.is_none());
        assert_eq!(claims.names(), [ClusterName::new("y")]);
        // Settled again: nobody owned it and nobody does.
        assert!(!claims.settle(&"x".into()).changed());
    }
}
