//! The peer table: each other peer's Lease as this replica last saw it, and the rules of the
//! [module docs](super) that make a peer live, gone, or still a claimant.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::Instant;

use super::claim::{self, PeerLease};
use super::hrw::Peer;
use mcr_core::older_version as older;

/// One peer's Lease as this replica last saw it.
#[derive(Clone, Debug)]
struct Seen {
    lease: PeerLease,
    /// When this replica saw the Lease change (local monotonic clock).
    at: Instant,
    /// Gone for good: a consistent list showed this version after the lease duration had
    /// passed since `at`, or the peer left cleanly. Only now is its claim disregarded.
    gone: bool,
    /// The watch showed the Lease deleted (or relabelled out of the group) after this version:
    /// nothing the peer wrote before the deletion was missed here.
    deleted: bool,
    /// When a consistent list first missed the Lease while this replica had not seen it
    /// deleted (its watch may lag): the peer's clock runs from then, until the watch shows
    /// the deletion of the version seen.
    missing_since: Option<Instant>,
    /// Known only from another peer's claim (its own Lease not seen yet: deleted by hand, or
    /// not listed yet): live, claiming nothing known, until its Lease appears or a consistent
    /// list has missed it for its lease duration.
    indirect: bool,
}

impl Seen {
    /// A peer seen in a Lease at `now`.
    fn new(lease: PeerLease, now: Instant) -> Self {
        Seen {
            gone: lease.left,
            lease,
            at: now,
            deleted: false,
            missing_since: None,
            indirect: false,
        }
    }
}

impl Seen {
    /// When the peer counts as silent for its lease duration, as seen here.
    fn expiry(&self) -> Instant {
        let since = match self.missing_since {
            Some(missing) if !self.deleted => missing.max(self.at),
            _ => self.at,
        };
        since + self.lease.duration
    }

    fn expired(&self, now: Instant) -> bool {
        now >= self.expiry()
    }
}

/// The other peers of the group (this replica's own Lease is not kept here), one entry per
/// peer however long the run.
#[derive(Debug)]
pub(super) struct Peers {
    me: String,
    seen: HashMap<String, Seen>,
    /// Peers confirmed gone that other peers' claims may still name, with when they departed
    /// and their lease duration: not taken back in as indirect peers while a claim listed
    /// names them, nor for two lease durations after (a replica that saw the peer's Lease
    /// just before it went counts it live for at most that long, restarted clock included,
    /// and may name it in the claim it writes meanwhile).
    departed: HashMap<String, (Instant, Duration)>,
    /// The version of the newest consistent list taken in: a Lease version no newer than it,
    /// of a peer not in the table, is one that list already reflected (a resumed watch
    /// replaying what it missed).
    listed_at: String,
}

impl Peers {
    /// An empty table for replica `me`.
    pub(super) fn new(me: impl Into<String>) -> Self {
        Peers {
            me: me.into(),
            seen: HashMap::new(),
            departed: HashMap::new(),
            listed_at: String::new(),
        }
    }

    /// Records a peer Lease seen at `now`; `true` when the peer is new or its weight, claim or
    /// leaving changed. A version older than one already seen (a resumed watch replaying what
    /// it missed) is ignored, so a peer's claim never appears to shrink back; so is a version
    /// of a peer not in the table that is no newer than the last consistent list (which
    /// showed that peer's Lease gone, or a newer one since forgotten), so a replay never
    /// brings back a peer that left.
    pub(super) fn observe(&mut self, lease: &Lease, now: Instant) -> bool {
        let Some(read) = claim::read(lease) else {
            return false;
        };
        if read.id == self.me {
            return false;
        }
        let rv = &read.resource_version;
        if !self.seen.contains_key(&read.id)
            && (*rv == self.listed_at || older(rv, &self.listed_at))
        {
            return false;
        }
        // A version already seen, or older (a resumed watch replaying what it missed), says
        // nothing new: not even of the peers its claim names (a peer gone since would come
        // back as indirect).
        if let Some(seen) = self.seen.get(&read.id)
            && (seen.lease.resource_version == read.resource_version
                || older(&read.resource_version, &seen.lease.resource_version))
        {
            return false;
        }
        self.departed.remove(&read.id);
        self.learn(&read, now);
        match self.seen.get_mut(&read.id) {
            Some(seen) => {
                let changed = seen.lease.weight != read.weight
                    || seen.lease.claim != read.claim
                    || seen.gone != read.left
                    || seen.indirect;
                *seen = Seen::new(read, now);
                changed
            }
            None => {
                self.seen.insert(read.id.clone(), Seen::new(read, now));
                true
            }
        }
    }

    /// Takes in the peers `read`'s claim names that this replica has not seen: each is a live
    /// peer until its own Lease shows what it claims, or a consistent list has missed that
    /// Lease for its lease duration. So a replica that joins while a live peer's Lease is
    /// missing (deleted by hand) still counts that peer, and claims nothing it holds.
    fn learn(&mut self, read: &PeerLease, now: Instant) {
        if read.left {
            return;
        }
        for peer in &read.claim {
            if peer.id == self.me
                || self.seen.contains_key(&peer.id)
                || self.departed.contains_key(&peer.id)
            {
                continue;
            }
            let lease = PeerLease {
                id: peer.id.clone(),
                name: String::new(),
                resource_version: String::new(),
                duration: read.duration,
                weight: peer.weight,
                claim: Vec::new(),
                left: false,
            };
            let mut seen = Seen::new(lease, now);
            seen.indirect = true;
            self.seen.insert(peer.id.clone(), seen);
        }
    }

    /// A peer Lease left the watch (deleted, or no longer labelled for the group). Only a
    /// peer that said it left ([`claim::LEFT`], written after it released everything) is gone
    /// at once. Any other deletion, by hand or by a peer that found this one gone, changes
    /// nothing: the peer is gone only by the lease-duration rule, so a live peer whose Lease
    /// someone deleted keeps its claim until it writes the Lease again.
    pub(super) fn forget(&mut self, lease: &Lease, now: Instant) {
        let Some(read) = claim::read(lease) else {
            return;
        };
        if read.left {
            self.observe(lease, now);
        } else if let Some(seen) = self.seen.get_mut(&read.id)
            && !older(&read.resource_version, &seen.lease.resource_version)
        {
            // A watch delivers in order: having got this far, it has shown every write of the
            // peer before the deletion (whose event carries the deletion's own, newer
            // version). A replayed deletion of an older Lease says nothing.
            seen.deleted = true;
        }
    }

    /// Takes in a consistent list of the group's Leases read at `now`: every Lease observed,
    /// and peers whose Lease is unchanged for their lease duration confirmed gone.
    ///
    /// A Lease missing from the list (deleted by hand, pruned, relabelled, or collected by
    /// another peer) is forgotten once its lease duration has passed since its last change,
    /// if this replica's watch showed the deletion: a watch delivers in order, so no renewal
    /// before it was missed. Otherwise (the watch lags, or hung) the absence shows only
    /// that the Lease is gone now, not that its peer stopped renewing: it may have renewed a
    /// moment before the deletion, unseen here. The first list that misses it then restarts
    /// its clock, and the peer, claim and all, is forgotten only by a list that still misses
    /// it a lease duration later (by then it has written nothing for longer than its renew
    /// deadline), or once the watch shows the deletion after all (a list
    /// that ran ahead of the watch by a moment, as when another peer just collected the
    /// Lease of a dead one).
    ///
    /// `version` is the list's own resource version: Lease versions up to it that a watch
    /// delivers later are not news (see [`observe`](Self::observe)).
    pub(super) fn listed(&mut self, leases: &[Lease], version: Option<&str>, now: Instant) {
        let mut present = Vec::new();
        for lease in leases {
            self.observe(lease, now);
            if let Some(read) = claim::read(lease) {
                present.push(read.id);
            }
        }
        for (id, s) in &mut self.seen {
            if !present.contains(id) && !s.deleted && !s.gone {
                s.missing_since.get_or_insert(now);
            }
        }
        let departed = &mut self.departed;
        self.seen.retain(|id, s| {
            let keep = present.contains(id) || !s.expired(now);
            if !keep {
                departed
                    .entry(id.clone())
                    .or_insert((now, s.lease.duration));
            }
            keep
        });
        for (id, s) in &mut self.seen {
            if s.expired(now) {
                s.gone = true;
                self.departed
                    .entry(id.clone())
                    .or_insert((now, s.lease.duration));
            }
        }
        // Forgotten once no claim names them any more, and two lease durations have passed.
        let claimed: HashSet<String> = leases
            .iter()
            .filter_map(claim::read)
            .flat_map(|l| l.claim.into_iter().map(|p| p.id))
            .collect();
        self.departed
            .retain(|id, (at, duration)| claimed.contains(id) || now < *at + *duration * 2);
        // After the list's own Leases were taken in (each no newer than the list).
        if let Some(version) = version
            && (self.listed_at.is_empty() || older(&self.listed_at, version))
        {
            self.listed_at = version.to_owned();
        }
    }

    /// The other live peers: those whose Lease changed within its duration, as seen here.
    ///
    /// A peer that has announced itself but claimed nothing yet (a Lease with an empty claim,
    /// see `Run::announce`) counts only for a replica that is not active yet itself
    /// (`active: false`: two replicas starting together claim with each other), or once a
    /// claim names it (`mine`, this replica's, or another peer's): an active replica keeps
    /// what the newcomer will take until the newcomer claims, instead of leaving it
    /// unreconciled while the newcomer listens.
    pub(super) fn live(&self, now: Instant, active: bool, mine: &[Peer]) -> Vec<Peer> {
        let named = |id: &str| {
            mine.iter().any(|p| p.id == id)
                || self
                    .seen
                    .values()
                    .any(|s| !s.gone && s.lease.claim.iter().any(|p| p.id == id))
        };
        self.seen
            .iter()
            .filter(|(_, s)| !s.gone && !s.expired(now))
            .filter(|(id, s)| !active || s.indirect || !s.lease.claim.is_empty() || named(id))
            .map(|(id, s)| Peer::new(id.clone(), s.lease.weight))
            .collect()
    }

    /// Every other peer's claim, until a consistent list confirmed the peer gone (or it
    /// left): a peer that only *looks* silent (this replica's watch lags, or this process was
    /// paused) may still hold what it claims.
    ///
    /// A peer whose Lease was already missing (without this replica's watch showing the
    /// deletion) when this replica became active (`active_since`: it listed its peers after
    /// its claim) may have claimed anything before the Lease went, this replica's share
    /// included if it took this replica for gone while it was fenced: until it writes its
    /// Lease again (or is gone) it holds every cluster. A peer that goes missing later cannot
    /// have taken this replica for gone (it renewed all along), so its last claim seen holds.
    pub(super) fn claims(&self, active_since: Option<Instant>) -> Vec<(String, Vec<Peer>)> {
        self.seen
            .iter()
            .filter(|(_, s)| !s.gone)
            .map(|(id, s)| {
                let unknown = s
                    .missing_since
                    .is_some_and(|missing| active_since.is_none_or(|active| missing <= active));
                let claim = if unknown && !s.deleted {
                    vec![Peer::new(id.clone(), s.lease.weight)]
                } else {
                    s.lease.claim.clone()
                };
                (id.clone(), claim)
            })
            .collect()
    }

    /// The peers gone for good, with their Lease's name and version: `(id, name, version)`.
    pub(super) fn gone(&self) -> Vec<(String, String, String)> {
        self.seen
            .iter()
            .filter(|(_, s)| s.gone && !s.lease.left && !s.indirect)
            .map(|(id, s)| {
                let l = &s.lease;
                (id.clone(), l.name.clone(), l.resource_version.clone())
            })
            .collect()
    }

    /// Forgets peer `id` (its Lease was collected).
    pub(super) fn remove(&mut self, id: &str, now: Instant) {
        let duration = self
            .seen
            .remove(id)
            .map_or(Duration::ZERO, |s| s.lease.duration);
        self.departed.insert(id.to_owned(), (now, duration));
    }

    /// When the next live peer's Lease expires, as seen here.
    pub(super) fn next_expiry(&self, now: Instant) -> Option<Instant> {
        self.seen
            .values()
            .filter(|s| !s.gone && !s.expired(now))
            .map(Seen::expiry)
            .min()
    }

    /// How many peers the table holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn lease(rv: &str, claim: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some("g-r2".into()),
                resource_version: Some(rv.into()),
                annotations: Some(BTreeMap::from([(
                    claim::CLAIM.to_owned(),
                    claim.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("r2".into()),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Peer `id`'s Lease.
    fn lease_of(id: &str, rv: &str, claim: &str) -> Lease {
        let mut lease = lease(rv, claim);
        lease.metadata.name = Some(format!("g-{id}"));
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = Some(id.into());
        }
        lease
    }

    fn left(rv: &str) -> Lease {
        let mut lease = lease(rv, "");
        claim::mark_left(&mut lease);
        lease
    }

    fn claimants(peers: &Peers) -> Vec<String> {
        peers.claims(None).into_iter().map(|(id, _)| id).collect()
    }

    fn is_live(peers: &Peers, now: Instant) -> bool {
        peers.live(now, false, &[]).iter().any(|p| p.id == "r2")
    }

    #[test]
    fn an_older_lease_version_never_replaces_a_newer_one() {
        // A watch that resumes after a partition replays the events it missed, in order:
        // older versions of a peer's Lease can arrive after a consistent list showed a newer
        // one. Taking them would regress the peer's claim to one it has since widened.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        assert!(peers.observe(&lease("12", "r1=1,r2=1"), now));
        assert!(!peers.observe(&lease("9", "r2=1"), now), "older: ignored");
        assert_eq!(peers.claims(None)[0].1, claim::decode("r1=1,r2=1"));
        assert!(peers.observe(&lease("13", "r2=1"), now), "newer: taken");
        assert_eq!(peers.claims(None)[0].1, claim::decode("r2=1"));
    }

    #[test]
    fn only_a_peer_that_said_it_left_is_gone_when_its_lease_is_deleted() {
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        assert!(peers.observe(&lease("20", "r1=1,r2=1"), now));
        // Deleted (or relabelled) by hand: nothing changes, the peer may be alive.
        peers.forget(&lease("21", "r1=1,r2=1"), now);
        assert_eq!(claimants(&peers), ["r2"]);
        assert!(is_live(&peers, now));
        // A replayed deletion of an older Lease that left: ignored.
        peers.forget(&left("15"), now);
        assert_eq!(claimants(&peers), ["r2"]);
        // It left (released everything, claims nothing): gone at once.
        peers.forget(&left("22"), now);
        assert!(claimants(&peers).is_empty());
        assert!(!is_live(&peers, now));
    }

    #[test]
    fn a_lease_missing_from_a_list_is_forgotten_only_after_the_lease_duration() {
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        peers.observe(&lease("12", "r1=1,r2=1"), now);
        // Deleted by hand a moment ago: the list misses it, the peer stays, claim and all.
        peers.listed(&[], None, now + Duration::from_secs(1));
        assert_eq!(claimants(&peers), ["r2"]);
        // Still missing after its lease duration (15 s): forgotten.
        peers.listed(&[], None, now + Duration::from_secs(16));
        assert_eq!(peers.len(), 0);
    }

    #[test]
    fn a_lease_seen_deleted_and_expired_is_forgotten_by_the_next_list() {
        // r2 died; another peer collected its Lease, and this replica's watch showed the
        // deletion of the version it had seen: r2 wrote nothing since, so once expired it is
        // gone at once (a takeover is not delayed by another lease duration).
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(60)).unwrap();
        peers.observe(&lease("12", "r1=1,r2=1"), long_ago);
        // The deletion's event carries the deletion's own version.
        peers.forget(&lease("13", "r1=1,r2=1"), now);
        peers.listed(&[], None, now);
        assert_eq!(peers.len(), 0);
        // The same, with the list a moment ahead of the watch: the clock restarts at the
        // list, and the deletion seen right after ends the wait.
        peers.observe(&lease("12", "r1=1,r2=1"), long_ago);
        peers.listed(&[], None, now);
        assert_eq!(claimants(&peers), ["r2"]);
        assert!(peers.next_expiry(now).is_some_and(|at| at > now));
        peers.forget(&lease("13", "r1=1,r2=1"), now);
        assert_eq!(
            peers.next_expiry(now),
            None,
            "expired: a list is due at once"
        );
        peers.listed(&[], None, now);
        assert_eq!(peers.len(), 0);
    }

    #[test]
    fn a_lease_missing_from_a_list_restarts_the_clock_of_a_peer_seen_long_ago() {
        // This replica's watch hung (a dead connection) and saw none of r2's renewals for a
        // minute; then someone deleted r2's Lease, just before r2's next renewal would write it
        // again. A consistent list misses it: that shows no renewal stopped, only that the
        // Lease is gone now. r2 may have renewed a moment before the deletion, so its claim
        // holds for a lease duration from this list.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(60)).unwrap();
        peers.observe(&lease("12", "r1=1,r2=1"), long_ago);
        peers.listed(&[], None, now);
        assert_eq!(claimants(&peers), ["r2"], "its claim holds");
        assert!(is_live(&peers, now));
        peers.listed(&[], None, now + Duration::from_secs(5));
        assert_eq!(claimants(&peers), ["r2"], "still within its lease duration");
        // A deletion of an older version (r2 renewed since, unseen here) proves nothing.
        peers.forget(&lease("11", "r1=1,r2=1"), now);
        peers.listed(&[], None, now + Duration::from_secs(6));
        assert_eq!(claimants(&peers), ["r2"]);
        // Missing from every list for its lease duration: r2 has written nothing since, so it
        // fenced itself long ago.
        peers.listed(&[], None, now + Duration::from_secs(16));
        assert_eq!(peers.len(), 0);
    }

    #[test]
    fn a_peer_whose_lease_went_missing_unseen_holds_every_cluster() {
        // Simulation seed 1000: this replica was paused and its watch hung, so the last claim
        // it saw of r2 is an old, narrow one (r1=1,r2=1). Meanwhile r2 took this replica for
        // gone and claimed everything (r2=1); then someone deleted r2's Lease by hand. The
        // consistent list this replica takes to become active again misses it, and the watch
        // never showed the deletion: what r2 claims is unknown, so until r2 writes its Lease
        // again (or a lease duration passes) it holds every cluster, not just its share of the
        // stale claim.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(60)).unwrap();
        peers.observe(&lease("12", "r1=1,r2=1"), long_ago);
        let names: Vec<mcr_core::ClusterName> = (0..50).map(|i| format!("m{i}").into()).collect();
        let holds_all = |peers: &Peers, active_since: Option<Instant>| {
            let claims = peers.claims(active_since);
            names.iter().all(|n| {
                claims.iter().any(|(id, claim)| {
                    super::super::hrw::owner(claim, n).is_some_and(|p| &p.id == id)
                })
            })
        };
        assert!(
            !holds_all(&peers, None),
            "a known claim holds only its share"
        );
        peers.listed(&[], None, now);
        let activated = now + Duration::from_millis(100);
        assert!(
            holds_all(&peers, Some(activated)),
            "missing when this replica became active: holds everything"
        );
        // Active all along (renewing, so r2 never took it for gone): the last claim seen holds,
        // and what this replica already owns is not released.
        assert!(!holds_all(&peers, Some(long_ago)));
        // Written again: its claim is known once more.
        peers.observe(&lease("40", "r1=1,r2=1"), now);
        assert!(!holds_all(&peers, Some(activated)));
        // Deleted, and the watch showed it (so nothing before it was missed): the last claim
        // seen is still what it holds.
        peers.forget(&lease("41", "r1=1,r2=1"), now);
        peers.listed(&[], None, now);
        assert!(!holds_all(&peers, Some(activated)));
    }

    #[test]
    fn a_silent_peer_keeps_its_claim_until_a_consistent_list_confirms_it_gone() {
        // Seen through the watch alone, a peer silent for longer than its lease may be alive
        // (the watch lags, or this process was paused): it leaves the view, but its claim
        // holds until a consistent list shows its Lease unchanged.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(60)).unwrap();
        peers.observe(&lease("12", "r1=1,r2=1"), long_ago);
        assert!(!is_live(&peers, now), "out of the view");
        assert_eq!(claimants(&peers), ["r2"], "its claim holds");
        // A consistent list shows the same version: gone, its claim disregarded.
        peers.listed(&[lease("12", "r1=1,r2=1")], None, now);
        assert!(claimants(&peers).is_empty());
        assert_eq!(peers.gone().len(), 1, "its Lease is collected");
        // Renewed since (a newer version): back, claim and all.
        peers.listed(&[lease("14", "r1=1,r2=1")], None, now);
        assert_eq!(claimants(&peers), ["r2"]);
        assert!(is_live(&peers, now));
    }

    #[test]
    fn a_resumed_watch_replaying_a_departed_peer_does_not_bring_it_back() {
        // This replica's watch hung; meanwhile r2 renewed (version 15), left and deleted its
        // Lease. Consistent lists miss it for its lease duration: forgotten. Then the watch
        // resumes and replays what it missed, r2's renewal first: a version the last list
        // (at 30) already reflected, so it says nothing of r2 now.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(60)).unwrap();
        peers.observe(&lease("12", "r1=1,r2=1"), long_ago);
        peers.listed(&[], Some("20"), now);
        peers.listed(&[], Some("30"), now + Duration::from_secs(16));
        assert_eq!(peers.len(), 0, "forgotten");
        let later = now + Duration::from_secs(17);
        assert!(
            !peers.observe(&lease("15", "r1=1,r2=1"), later),
            "no change"
        );
        assert!(!is_live(&peers, later), "the replay does not bring r2 back");
        assert!(claimants(&peers).is_empty());
        // A version newer than the list: r2 is back for real.
        assert!(peers.observe(&lease("31", "r1=1,r2=1"), later));
        assert!(is_live(&peers, later));
    }

    #[test]
    fn a_departed_peer_named_by_a_newcomer_stays_gone() {
        // r2 died and this replica collected its Lease; r3 joins, having seen r2's Lease
        // before the deletion, and claims a view that still names r2. r2 is not taken back in
        // as a live peer: that would hand it clusters, and this replica would release them
        // and take them back a lease duration later.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        peers.observe(&lease("12", "r1=1,r2=1"), now);
        peers.remove("r2", now);
        // No Lease listed names r2 any more (this replica's own claim moved on).
        peers.listed(&[], Some("20"), now);
        let later = now + Duration::from_secs(1);
        peers.observe(&lease_of("r3", "21", "r1=1,r2=1,r3=1"), later);
        assert!(!is_live(&peers, later), "r2 stays gone");
        assert_eq!(claimants(&peers), ["r3"]);
        // Its own Lease written again (it was alive after all): back at once.
        assert!(peers.observe(&lease("22", "r1=1,r2=1,r3=1"), later));
        assert!(is_live(&peers, later));
    }

    #[test]
    fn an_announced_peer_counts_for_an_active_replica_once_a_claim_names_it() {
        // r2 announced itself (its Lease, claiming nothing) and listens before its first claim.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        let counts = |peers: &Peers, active: bool, mine: &str| {
            peers
                .live(now, active, &claim::decode(mine))
                .iter()
                .any(|p| p.id == "r2")
        };
        peers.observe(&lease_of("r2", "5", ""), now);
        assert!(counts(&peers, false, ""), "r1 starting too: claims with r2");
        assert!(
            !counts(&peers, true, "r1=1"),
            "r1 active: keeps r2's share until r2 claims"
        );
        assert!(counts(&peers, true, "r1=1,r2=1"), "r1's own claim names r2");
        peers.observe(&lease_of("r3", "6", "r1=1,r2=1,r3=1"), now);
        assert!(counts(&peers, true, "r1=1"), "r3's claim names r2");
        let mut peers = Peers::new("r1");
        peers.observe(&lease_of("r2", "5", ""), now);
        peers.observe(&lease_of("r2", "7", "r1=1,r2=1"), now);
        assert!(counts(&peers, true, "r1=1"), "r2 claimed");
    }

    #[test]
    fn a_replayed_old_claim_does_not_bring_a_departed_peer_back() {
        // Simulation seed 728: r2 left; this replica's watch hung, and a consistent list showed
        // r3's newer claim without r2. Long after, the watch resumes and replays r3's older
        // Lease version, whose claim still names r2: an old version says nothing of r2 now.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        peers.observe(&lease_of("r3", "10", "r1=1,r2=1,r3=1"), now);
        peers.observe(&lease("11", "r1=1,r2=1,r3=1"), now);
        peers.forget(&left("12"), now);
        peers.listed(&[lease_of("r3", "20", "r1=1,r3=1")], Some("20"), now);
        let later = now + Duration::from_secs(60);
        peers.listed(&[lease_of("r3", "30", "r1=1,r3=1")], Some("30"), later);
        // Two lease durations on: r2 is no longer remembered as departed.
        let later = later + Duration::from_secs(60);
        peers.listed(&[lease_of("r3", "40", "r1=1,r3=1")], Some("40"), later);
        assert!(!peers.observe(&lease_of("r3", "10", "r1=1,r2=1,r3=1"), later));
        assert!(
            !is_live(&peers, later),
            "r2 brought back by a replayed claim"
        );
    }

    #[test]
    fn the_table_stays_bounded_however_often_peers_renew() {
        // A day of renewals of one peer (every 2 s): the table holds that peer, not its
        // renewals.
        let mut peers = Peers::new("r1");
        let now = Instant::now();
        for rv in 1..=43_200u64 {
            peers.observe(&lease(&rv.to_string(), "r1=1,r2=1"), now);
        }
        assert_eq!(peers.len(), 1);
    }
}
