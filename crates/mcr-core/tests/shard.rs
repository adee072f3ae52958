//! The ownership gate (`mcr_core::coordinator`) against the emulator: a member another replica
//! owns gets no client and no engagement; when ownership moves, the old member is stopped and
//! the newly owned one engaged, on both paths (the per-name workers and `Engagements::add`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcr_core::members::{Connection, Converge, Error, Member, Members, MembersOptions, Workers};
use mcr_core::{BoxFuture, Cluster, ClusterName, Coordinator, Engagements, Ownership, Phase};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(30);

/// The names this replica owns, set by the test.
struct Owned {
    names: Mutex<BTreeSet<String>>,
    version: watch::Sender<u64>,
}

impl Owned {
    fn new(names: &[&str]) -> Arc<Self> {
        Arc::new(Owned {
            names: Mutex::new(names.iter().map(|n| n.to_string()).collect()),
            version: watch::channel(0).0,
        })
    }

    fn set(&self, names: &[&str]) {
        *self.names.lock().unwrap() = names.iter().map(|n| n.to_string()).collect();
        self.version.send_modify(|v| *v += 1);
    }
}

impl Coordinator for Owned {
    fn owner(&self, name: &ClusterName) -> Ownership {
        if self.names.lock().unwrap().contains(name.as_str()) {
            Ownership::Owned
        } else {
            Ownership::Elsewhere {
                owner: Some("replica-2".into()),
            }
        }
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

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

/// Brings members up like [`Count`], but first moves ownership of the member away without
/// telling anyone yet: the coordinator already answers "elsewhere" while its change has not
/// been announced, as when a replica joins while a member is being brought up.
struct MovesAway(Count, Arc<Owned>);

impl Converge for MovesAway {
    type Desired = Arc<str>;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Arc<str>>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            // Once the worker waits on both the attempt and the announcement of a change.
            tokio::task::yield_now().await;
            *self.1.names.lock().unwrap() = BTreeSet::new();
            self.0.converge(member).await
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, member: &Member<Arc<str>>, error: &Error, retry_in: Option<Duration>) {
        self.0.failed(member, error, retry_in);
    }
}

/// A member whose ownership moves away while it is being brought up is released as owned
/// elsewhere, not reported (and logged) as a failed attempt retried with backoff.
#[tokio::test]
async fn ownership_moving_away_mid_attempt_is_no_failure() {
    let a = TestCluster::start_https("a").await.unwrap();
    let owned = Owned::new(&["a"]);
    let registry = gated(&owned);
    let members = Members::new(MembersOptions::default());
    members.bind(&registry).unwrap();
    let token = CancellationToken::new();
    let count = Count::default();
    let workers = Workers::new(&members, &token, MovesAway(count.clone(), owned.clone()));
    workers.ensure(&"a".into(), Arc::from(a.kubeconfig_yaml().unwrap()));
    eventually("a reported as owned elsewhere", DEADLINE, || {
        members
            .member_statuses()
            .iter()
            .any(|s| s.name == "a" && matches!(s.state, mcr_core::MemberState::Elsewhere { .. }))
    })
    .await;
    assert_eq!(count.of("a"), 1, "one attempt, before ownership moved");
    assert!(
        count.1.lock().unwrap().is_empty(),
        "reported as failed: {:?}",
        count.1.lock().unwrap()
    );
    assert!(registry.names().is_empty() && members.names().is_empty());
    workers.shutdown().await;
    token.cancel();
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
