//! The ownership gate (`mcr_core::coordinator`) against the emulator: a member another replica
//! owns gets no client and no engagement; when ownership moves, the old member is stopped and
//! the newly owned one engaged, on both paths (the per-name workers and `Engagements::add`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcr_core::members::{Connection, Converge, Error, Member, Members, MembersOptions, Workers};
use mcr_core::{BoxFuture, Cluster, ClusterName, Engagements, Phase};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_test_support::{DEADLINE, Owned};
use tokio_util::sync::CancellationToken;

/// A table behind the test's coordinator (what the manager is in sharded mode).
fn gated(owned: &Arc<Owned>) -> Engagements {
    let table = Engagements::new();
    let _ = table.coordinate(owned.clone());
    table
}

/// Counts the attempts (each builds a client) per name, and records the failures reported.
#[derive(Clone, Default)]
struct Count(Arc<Mutex<BTreeMap<String, u32>>>, Arc<Mutex<Vec<String>>>);

impl Count {
    fn of(&self, name: &str) -> u32 {
        self.0.lock().unwrap().get(name).copied().unwrap_or(0)
    }
}

impl Converge for Count {
    type Desired = Arc<str>;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Arc<str>>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            *self
                .0
                .lock()
                .unwrap()
                .entry(member.name().to_string())
                .or_default() += 1;
            let connection = Connection::parse(member.desired().as_bytes()).unwrap();
            member.ensure(&connection).await.map(drop)
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, member: &Member<Arc<str>>, error: &Error, _: Option<Duration>) {
        self.1
            .lock()
            .unwrap()
            .push(format!("{}: {error}", member.name()));
    }
}

/// Brings members up like [`Count`], but on the first attempt first moves ownership of the
/// member away without telling anyone yet: the coordinator already answers "elsewhere" while
/// its change has not been announced, as when a replica joins while a member is being brought
/// up. With `back`, ownership comes back, announced by one change, once that attempt has
/// ended (failed, or dropped by the worker).
struct MovesAway {
    count: Count,
    owned: Arc<Owned>,
    back: bool,
}

/// Gives the member back, announced, when dropped.
struct Back(Arc<Owned>);

impl Drop for Back {
    fn drop(&mut self) {
        self.0.set(&["a"]);
    }
}

impl Converge for MovesAway {
    type Desired = Arc<str>;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Arc<str>>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            // Once the worker waits on both the attempt and the announcement of a change.
            tokio::task::yield_now().await;
            let mut back = None;
            if self.count.of(member.name().as_str()) == 0 {
                self.owned.set_unannounced(&[]);
                back = self.back.then(|| Back(self.owned.clone()));
            }
            let result = self.count.converge(member).await;
            drop(back);
            result
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, member: &Member<Arc<str>>, error: &Error, retry_in: Option<Duration>) {
        self.count.failed(member, error, retry_in);
    }
}

/// Member `a`, owned here, handed to workers that bring it up with [`MovesAway`].
struct Moving {
    _a: TestCluster,
    registry: Engagements,
    members: Members,
    count: Count,
    workers: Workers<MovesAway>,
    token: CancellationToken,
}

impl Moving {
    async fn start(back: bool) -> Self {
        let a = TestCluster::start_https("a").await.unwrap();
        let owned = Owned::new(&["a"]);
        let registry = gated(&owned);
        let members = Members::new(MembersOptions::default());
        members.bind(&registry).unwrap();
        let token = CancellationToken::new();
        let count = Count::default();
        let moves = MovesAway {
            count: count.clone(),
            owned,
            back,
        };
        let workers = Workers::new(&members, &token, moves);
        workers.ensure(&"a".into(), Arc::from(a.kubeconfig_yaml().unwrap()));
        Moving {
            _a: a,
            registry,
            members,
            count,
            workers,
            token,
        }
    }

    /// Asserts that no attempt was reported failed.
    fn no_failure(&self) {
        let failures = self.count.1.lock().unwrap().clone();
        assert!(failures.is_empty(), "reported as failed: {failures:?}");
    }

    async fn stop(self) {
        self.workers.shutdown().await;
        self.token.cancel();
    }
}

/// A member whose ownership moves away while it is being brought up is released as owned
/// elsewhere, not reported (and logged) as a failed attempt retried with backoff.
#[tokio::test]
async fn ownership_moving_away_mid_attempt_is_no_failure() {
    let m = Moving::start(false).await;
    eventually("a reported as owned elsewhere", DEADLINE, || {
        m.members
            .member_statuses()
            .iter()
            .any(|s| s.name == "a" && matches!(s.state, mcr_core::MemberState::Elsewhere { .. }))
    })
    .await;
    m.no_failure();
    assert_eq!(m.count.of("a"), 1, "one attempt, before ownership moved");
    assert!(m.registry.names().is_empty() && m.members.names().is_empty());
    m.stop().await;
}

/// An attempt refused because ownership moved away, while ownership came back before the
/// worker looked, is no failure either: the member is tried again at once, not reported (and
/// logged) as failed and retried with backoff. B13 at 100,000 clusters logged four such
/// errors while ten replicas joined.
#[tokio::test]
async fn ownership_moving_away_and_back_mid_attempt_is_no_failure() {
    let m = Moving::start(true).await;
    eventually("a engaged, or a failure reported", DEADLINE, || {
        m.registry.names() == ["a"] || !m.count.1.lock().unwrap().is_empty()
    })
    .await;
    m.no_failure();
    assert_eq!(m.count.of("a"), 2, "refused once, then engaged");
    m.stop().await;
}

#[tokio::test]
async fn workers_build_only_owned_members_and_follow_ownership() {
    let a = TestCluster::start_https("a").await.unwrap();
    let b = TestCluster::start_https("b").await.unwrap();
    let owned = Owned::new(&["a"]);
    let registry = gated(&owned);
    let members = Members::new(MembersOptions::default());
    members.bind(&registry).unwrap();
    let token = CancellationToken::new();
    let count = Count::default();
    let workers = Workers::new(&members, &token, count.clone());
    workers.ensure(&"a".into(), Arc::from(a.kubeconfig_yaml().unwrap()));
    workers.ensure(&"b".into(), Arc::from(b.kubeconfig_yaml().unwrap()));
    eventually("a engaged", DEADLINE, || registry.names() == ["a"]).await;
    assert_eq!(
        count.of("b"),
        0,
        "no client is built for a member owned elsewhere"
    );
    assert_eq!(members.names(), ["a"]);
    let a_token = registry.active()[0].2.clone();

    owned.set(&["b"]);
    eventually("b engaged, a released", DEADLINE, || {
        registry.names() == ["b"] && members.names() == ["b"]
    })
    .await;
    assert!(a_token.is_cancelled(), "a's engagement was stopped");

    owned.set(&["a", "b"]);
    eventually("a engaged again", DEADLINE, || {
        registry.names() == ["a", "b"]
    })
    .await;
    workers.shutdown().await;
    token.cancel();
}

/// A name owned elsewhere has no worker: the latest desired state published while it is
/// parked is the one it comes home with, and a parked name removed is forgotten at once (its
/// record goes, and owning it later starts nothing).
#[tokio::test]
async fn a_parked_name_comes_home_with_its_latest_desired_state_and_a_removed_one_never_does() {
    let b = TestCluster::start_https("b").await.unwrap();
    let c = TestCluster::start_https("c").await.unwrap();
    let owned = Owned::nothing();
    let registry = gated(&owned);
    let members = Members::new(MembersOptions::default());
    members.bind(&registry).unwrap();
    let token = CancellationToken::new();
    let count = Count::default();
    let workers = Workers::new(&members, &token, count.clone());
    let elsewhere = |name: &str| {
        members
            .member_statuses()
            .iter()
            .any(|s| s.name == name && matches!(s.state, mcr_core::MemberState::Elsewhere { .. }))
    };
    // `Count` cannot parse this: an attempt with it would be reported as failed.
    workers.ensure(&"b".into(), Arc::from("not a kubeconfig: ["));
    workers.ensure(&"c".into(), Arc::from(c.kubeconfig_yaml().unwrap()));
    assert!(
        elsewhere("b") && elsewhere("c"),
        "{:?}",
        members.member_statuses()
    );
    workers.ensure(&"b".into(), Arc::from(b.kubeconfig_yaml().unwrap()));
    workers.remove(&"c".into());
    assert!(!elsewhere("c"), "a removed parked name keeps no record");

    owned.set(&["b", "c"]);
    eventually("b engaged", DEADLINE, || registry.names() == ["b"]).await;
    assert_eq!(
        count.of("b"),
        1,
        "one attempt, with the latest desired state"
    );
    assert!(
        count.1.lock().unwrap().is_empty(),
        "{:?}",
        count.1.lock().unwrap()
    );
    assert_eq!(
        count.of("c"),
        0,
        "a removed name is not started when it comes home"
    );
    assert_eq!(members.names(), ["b"]);
    workers.shutdown().await;
    token.cancel();
}

#[tokio::test]
async fn clusters_park_what_another_replica_owns_and_engage_it_when_owned() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("mcr_core=debug")
        .try_init();
    let a = TestCluster::start_https("a").await.unwrap();
    let b = TestCluster::start_https("b").await.unwrap();
    let owned = Owned::new(&["a"]);
    let registry = gated(&owned);
    let clusters = registry.prefixed("");
    let token = CancellationToken::new();
    let cb = Cluster::new("b", b.client());
    clusters
        .add(&token, Cluster::new("a", a.client()))
        .await
        .unwrap();
    clusters.add(&token, cb.clone()).await.unwrap();
    assert_eq!(clusters.names(), ["a"]);
    assert_eq!(clusters.phase(&"b".into()), Some(Phase::Parked));
    assert!(!cb.cache().is_started(), "a parked cluster starts nothing");
    assert_eq!(registry.names(), ["a"]);
    let a_token = clusters.token(&"a".into()).unwrap();

    owned.set(&["b"]);
    eventually("b engaged, a parked", DEADLINE, || {
        registry.names() == ["b"] && clusters.phase(&"a".into()) == Some(Phase::Parked)
    })
    .await;
    assert!(a_token.is_cancelled());

    // Removing a parked cluster forgets it.
    assert!(clusters.remove(&"a".into()));
    assert_eq!(clusters.phase(&"a".into()), None, "forgotten");
    owned.set(&["a", "b"]);
    eventually("nothing parked comes back", DEADLINE, || {
        registry.names() == ["b"]
    })
    .await;
    token.cancel();
}

/// A subscriber that, as the member comes up, moves its ownership away without announcing it
/// (the coordinator answers "elsewhere" before the table's follower has run), and keeps the
/// instance it was engaged with, as a controller's in-flight reconcile would.
struct MovesAwayOnEngage(Arc<Owned>, Mutex<Vec<Cluster>>);

impl mcr_core::Aware for MovesAwayOnEngage {
    fn engage(
        &self,
        _: CancellationToken,
        _: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        self.0.set_unannounced(&[]);
        self.1.lock().unwrap().push(cluster);
        Ok(())
    }
}

/// A member whose ownership moves while it comes up never becomes active (its activation asks
/// the coordinator again), and a release finds every instance given away that is still alive,
/// whether it stopped it itself or the table's follower came first.
#[tokio::test]
async fn an_instance_given_away_is_never_activated_and_always_found_by_a_release() {
    let a = TestCluster::start_https("a").await.unwrap();
    let owned = Owned::new(&["a"]);
    let registry = gated(&owned);
    let clusters = registry.prefixed("");
    let keeper = Arc::new(MovesAwayOnEngage(owned.clone(), Mutex::new(Vec::new())));
    registry.subscribe(keeper.clone());
    let token = CancellationToken::new();
    let ca = Cluster::new("a", a.client());
    let released = ca.released();
    clusters.add(&token, ca).await.unwrap();
    assert_eq!(
        clusters.phase(&"a".into()),
        Some(Phase::Parked),
        "activated although another replica owned it by then: {:?}",
        registry.names()
    );
    assert!(registry.names().is_empty());

    // The instance is still alive (the subscriber keeps it): a release hands it back to wait
    // on, the same before and after the follower has run.
    let found = registry.release_unowned();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "a");
    assert!(!found[0].1.is_released());
    owned.set(&[]);
    tokio::task::yield_now().await;
    assert_eq!(registry.release_unowned().len(), 1);
    keeper.1.lock().unwrap().clear();
    tokio::time::timeout(DEADLINE, released.wait())
        .await
        .expect("the instance given away is dropped");
    assert!(registry.release_unowned().is_empty());
    token.cancel();
}

/// A release stops what is owned elsewhere at once, without waiting for the table's follower.
#[tokio::test]
async fn a_release_stops_what_is_owned_elsewhere_at_once() {
    let a = TestCluster::start_https("a").await.unwrap();
    let owned = Owned::new(&["a"]);
    let registry = gated(&owned);
    let clusters = registry.prefixed("");
    let token = CancellationToken::new();
    clusters
        .add(&token, Cluster::new("a", a.client()))
        .await
        .unwrap();
    let a_token = clusters.token(&"a".into()).unwrap();
    // Moved without announcing it: only the release can see it.
    owned.set_unannounced(&[]);
    let found = registry.release_unowned();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(a_token.is_cancelled() && registry.names().is_empty());
    assert_eq!(clusters.phase(&"a".into()), Some(Phase::Parked));
    token.cancel();
}
