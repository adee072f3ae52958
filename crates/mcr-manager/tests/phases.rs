//! Engagement runs in phases: a provider's `Engagements::add` engages the cluster (the
//! controllers open their informers), waits for those informers to sync, then activates it. So
//! when `add` returns, the controller's cache of the new member is listed, not still empty.
//! And since the manager's fleet, the provider and a reconcile all read one table, they agree
//! at every phase of a member's life.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::providers::clusters::ClustersProvider;
use mcr_core::{Cluster, ClusterName, Coordinator, MemberState, Ownership, Provider};
use mcr_envtest::{Partition, TestCluster};
use mcr_manager::{Controller, Manager};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn add_returns_once_the_controllers_informers_have_synced() {
    let env = Env::start(1).await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();
    create_cm(env.member("cluster-1").client(), "first", "1").await;
    eventually("the manager runs", DEADLINE, || {
        log.contains("cluster-1/first=1")
    })
    .await;

    let late = TestCluster::start("late").await.unwrap();
    create_cm(late.client(), "present", "1").await;
    let cluster = Cluster::new("late", late.client());
    env.provider.add(cluster.clone()).await.unwrap();
    // Phase 1 opened the controller's informer, phase 2 waited for its list.
    let cache = cluster.cache();
    assert!(
        cache.informer_count() >= 1,
        "the controller's informer is open"
    );
    assert!(cache.is_synced());
    let cms = cache.informer::<ConfigMap>();
    assert!(cms.is_synced());
    assert!(cms.get(Some("default"), "present").is_some());
    // Phase 3: active everywhere.
    assert!(
        mcr_core::Provider::get(&*env.provider, &"late".into())
            .await
            .is_ok()
    );
    eventually("the late member reconciled", DEADLINE, || {
        log.contains("late/present=1")
    })
    .await;
    env.token.cancel();
    run.await.unwrap().unwrap();
}

/// Owns `m` when told to; every other name always.
struct Toggle {
    owns_m: Mutex<bool>,
    version: watch::Sender<u64>,
}

impl Toggle {
    fn set(&self, owns: bool) {
        *self.owns_m.lock().unwrap() = owns;
        self.version.send_modify(|v| *v += 1);
    }
}

impl Coordinator for Toggle {
    fn owner(&self, name: &ClusterName) -> Ownership {
        if name.as_str() != "m" || *self.owns_m.lock().unwrap() {
            Ownership::Owned
        } else {
            Ownership::Elsewhere {
                owner: Some("r2".into()),
            }
        }
    }
    fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

/// Per reconcile of `m`: the ConfigMap's value, the instance the reconcile runs on, and what
/// `ctx.cluster("m")` answers.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, String, String)>>>);

impl Seen {
    fn has(&self, entry: (&str, &str, &str)) -> bool {
        self.0
            .lock()
            .unwrap()
            .iter()
            .any(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()) == entry)
    }
}

fn answer(result: Result<Cluster, mcr_core::Error>) -> String {
    match result {
        Ok(cluster) => format!("id:{}", cluster.id()),
        Err(mcr_core::Error::NotOwned { owner, .. }) => {
            format!("not-owned:{}", owner.unwrap_or_default())
        }
        Err(err) if mcr_core::cluster_not_found(&err).is_some() => "not-found".into(),
        Err(err) => format!("error:{err}"),
    }
}

async fn note(cm: Arc<ConfigMap>, ctx: mcr_manager::Context<Seen>) -> Res {
    let own = ctx.cluster_name().clone();
    ctx.data().0.lock().unwrap().push((
        value(&cm),
        format!("id:{}", ctx.current_cluster().id()),
        answer(ctx.cluster(&own)),
    ));
    Ok(kube::runtime::controller::Action::await_change())
}

fn again(
    _: Arc<ConfigMap>,
    _: &mcr_core::Error,
    _: mcr_manager::Context<Seen>,
) -> kube::runtime::controller::Action {
    kube::runtime::controller::Action::requeue(Duration::from_millis(50))
}

/// What the fleet and the provider answer for `name`, once they agree (they must, at once).
async fn agreed(mgr: &Manager, provider: &ClustersProvider, name: &str) -> String {
    let name = ClusterName::new(name);
    let fleet = answer(mgr.fleet().get(&name));
    let provided = answer(provider.get(&name).await);
    let managed = answer(mgr.cluster(name.clone()).await);
    assert_eq!(fleet, provided, "fleet and provider disagree on {name}");
    assert_eq!(
        fleet, managed,
        "fleet and Manager::cluster disagree on {name}"
    );
    fleet
}

#[tokio::test]
async fn fleet_provider_and_reconcile_agree_at_every_phase() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start("m").await.unwrap();
    let hung = TestCluster::start("s").await.unwrap();
    let provider = Arc::new(ClustersProvider::with_sync_timeout(Duration::from_secs(
        300,
    )));
    let mgr = Manager::new(host.client(), Some(provider.clone()));
    let toggle = Arc::new(Toggle {
        owns_m: Mutex::new(false),
        version: watch::channel(0).0,
    });
    assert!(mgr.engagements().coordinate(toggle.clone()).is_ok());
    let seen = Seen::default();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .register(note, again, Arc::new(seen.clone()))
        .unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });
    let phase = |name: &str| mgr.engagements().member_state(&name.into());
    create_cm(member.client(), "a", "1").await;

    // Parked: another replica owns it.
    provider
        .add(Cluster::new("m", member.client()).with_connection_hash("v1"))
        .await
        .unwrap();
    eventually("m parked", DEADLINE, || {
        matches!(phase("m"), Some(MemberState::Elsewhere { .. }))
    })
    .await;
    assert_eq!(agreed(&mgr, &provider, "m").await, "not-owned:r2");

    // Handed to this replica: active, and a reconcile runs on the instance both return.
    toggle.set(true);
    eventually("m active", DEADLINE, || {
        matches!(phase("m"), Some(MemberState::Engaged))
    })
    .await;
    let first = agreed(&mgr, &provider, "m").await;
    assert!(first.starts_with("id:"), "{first}");
    eventually("a reconcile on the active instance", DEADLINE, || {
        seen.has(("1", &first, &first))
    })
    .await;

    // Replaced by a new instance (a new connection): everyone moves to it.
    let v2 = Cluster::new("m", member.client()).with_connection_hash("v2");
    provider.want(v2.clone()).unwrap();
    tokio::time::timeout(
        DEADLINE,
        provider.engagements().until_active(&"m".into(), v2.id()),
    )
    .await
    .expect("the new instance replaces the old one");
    let second = format!("id:{}", v2.id());
    assert_eq!(agreed(&mgr, &provider, "m").await, second);
    update_cm(member.client(), "a", "2").await;
    eventually("a reconcile on the replacement", DEADLINE, || {
        seen.has(("2", &second, &second))
    })
    .await;

    // Starting: a member whose API server never answers is in nobody's view.
    hung.partition(Partition::Hang);
    let adding = tokio::spawn({
        let provider = provider.clone();
        let client = hung.client();
        async move { provider.add(Cluster::new("s", client)).await }
    });
    eventually("s starting", DEADLINE, || {
        matches!(phase("s"), Some(MemberState::Pending))
    })
    .await;
    assert_eq!(agreed(&mgr, &provider, "s").await, "not-found");
    assert!(provider.remove(&"s".into()));
    assert!(adding.await.unwrap().is_err(), "the add was stopped");
    assert_eq!(phase("s"), None);

    // Handed off: parked again, owned elsewhere for everyone.
    toggle.set(false);
    eventually("m parked again", DEADLINE, || {
        matches!(phase("m"), Some(MemberState::Elsewhere { .. }))
    })
    .await;
    assert_eq!(agreed(&mgr, &provider, "m").await, "not-owned:r2");

    // Back: a fresh instance, which a reconcile runs on.
    toggle.set(true);
    eventually("m active again", DEADLINE, || {
        matches!(phase("m"), Some(MemberState::Engaged))
    })
    .await;
    let third = agreed(&mgr, &provider, "m").await;
    assert!(third.starts_with("id:") && third != second, "{third}");
    update_cm(member.client(), "a", "3").await;
    eventually("a reconcile on the instance taken back", DEADLINE, || {
        seen.has(("3", &third, &third))
    })
    .await;

    // Removed: gone for everyone.
    assert!(provider.remove(&"m".into()));
    eventually("m gone", DEADLINE, || phase("m").is_none()).await;
    assert_eq!(agreed(&mgr, &provider, "m").await, "not-found");

    token.cancel();
    run.await.unwrap().unwrap();
}
