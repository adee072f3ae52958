//! The shard group's Lease codec: what a peer writes on its Lease besides the holder and the
//! times (the group label, its weight, its claim, and that it left), and reading it back.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;

use super::hrw::Peer;

/// The label every peer Lease of a group carries (its value: the group).
pub(crate) const GROUP_LABEL: &str = "mcr.sigs.k8s.io/shard-group";
/// The annotation with a peer's weight.
pub(crate) const WEIGHT: &str = "mcr.sigs.k8s.io/shard-weight";
/// The annotation with the peer set a peer has applied (its claim): `id=weight,…`.
pub(crate) const CLAIM: &str = "mcr.sigs.k8s.io/shard-claim";
/// The annotation a peer writes on its Lease when it leaves cleanly (it has released every
/// cluster and claims nothing), right before it deletes the Lease: the others take it for
/// gone at once. A Lease deleted or relabelled without it (by hand, by a GitOps prune) says
/// nothing about its peer, who is then gone only by the lease-duration rule.
pub(crate) const LEFT: &str = "mcr.sigs.k8s.io/shard-left";

/// A peer's Lease, read.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PeerLease {
    /// The holder: the peer's identity.
    pub(super) id: String,
    /// The Lease's name.
    pub(super) name: String,
    pub(super) resource_version: String,
    pub(super) duration: Duration,
    pub(super) weight: u32,
    pub(super) claim: Vec<Peer>,
    /// It left cleanly ([`LEFT`]).
    pub(super) left: bool,
}

/// Reads a peer Lease; `None` for a Lease without a holder.
pub(super) fn read(lease: &Lease) -> Option<PeerLease> {
    let spec = lease.spec.as_ref()?;
    let id = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let annotations = lease.metadata.annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key));
    Some(PeerLease {
        id,
        name: lease.metadata.name.clone().unwrap_or_default(),
        resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
        duration: crate::lease::duration(spec),
        weight: get(WEIGHT).and_then(|w| w.parse().ok()).unwrap_or(1),
        claim: annotations.map(read_claim).unwrap_or_default(),
        left: get(LEFT).is_some(),
    })
}

/// The annotations of a peer with `weight` claiming `claim`.
/// The claim recorded in a Lease's `annotations` (empty if none).
pub(super) fn read_claim(annotations: &BTreeMap<String, String>) -> Vec<Peer> {
    annotations
        .get(CLAIM)
        .map(|c| decode(c))
        .unwrap_or_default()
}

pub(super) fn annotations(weight: u32, claim: &[Peer]) -> BTreeMap<String, String> {
    BTreeMap::from([
        (WEIGHT.to_owned(), weight.to_string()),
        (CLAIM.to_owned(), encode(claim)),
    ])
}

/// Marks `lease` as left: it claims nothing any more.
pub(super) fn mark_left(lease: &mut Lease) {
    let annotations = lease.metadata.annotations.get_or_insert_default();
    annotations.insert(CLAIM.to_owned(), String::new());
    annotations.insert(LEFT.to_owned(), "true".to_owned());
}

/// `id=weight,…`.
pub(super) fn encode(peers: &[Peer]) -> String {
    peers
        .iter()
        .map(|p| format!("{}={}", p.id, p.weight))
        .collect::<Vec<_>>()
        .join(",")
}

/// The sorted peer set of `id=weight,…` (malformed entries skipped).
pub(super) fn decode(s: &str) -> Vec<Peer> {
    let mut peers: Vec<Peer> = s
        .split(',')
        .filter_map(|e| {
            let (id, w) = e.rsplit_once('=')?;
            Some(Peer::new(id, w.parse().ok()?))
        })
        .collect();
    peers.sort();
    peers
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn claims_round_trip() {
        let peers = vec![Peer::new("a", 1), Peer::new("b-2", 3)];
        assert_eq!(decode(&encode(&peers)), peers);
        assert!(decode("").is_empty());
        assert_eq!(
            decode("a=1,junk,b=x,c=2"),
            vec![Peer::new("a", 1), Peer::new("c", 2)]
        );
    }

    #[test]
    fn a_lease_reads_back_what_was_written() {
        let claim = vec![Peer::new("a", 1), Peer::new("b", 2)];
        let mut lease = Lease {
            metadata: ObjectMeta {
                name: Some("g-b".into()),
                resource_version: Some("7".into()),
                annotations: Some(annotations(2, &claim)),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("b".into()),
                lease_duration_seconds: Some(4),
                ..LeaseSpec::default()
            }),
        };
        let read_back = read(&lease).unwrap();
        assert_eq!((read_back.id.as_str(), read_back.weight), ("b", 2));
        assert_eq!(read_back.claim, claim);
        assert_eq!(read_back.duration, Duration::from_secs(4));
        assert!(!read_back.left);
        mark_left(&mut lease);
        let left = read(&lease).unwrap();
        assert!(left.left && left.claim.is_empty());
        lease.spec.as_mut().unwrap().holder_identity = None;
        assert!(read(&lease).is_none());
    }
}
