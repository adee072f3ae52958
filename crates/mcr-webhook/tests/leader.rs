//! Leader election with a webhook: two replicas behind one address (what the chart's defaults
//! give, `mode: leaderElection`, `replicas: 2`, one Service). Every replica answers every
//! member's review (the standby engages the members read-only, as controller-runtime runs its
//! caches and webhooks on every replica), while only the leader reconciles and writes the
//! members' webhook configurations; once the leader is gone, the standby takes both over.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{Frontend, WAIT, body, configmap_webhooks, fixture};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, api::PostParams, runtime::controller::Action};
use mcr_core::{Cluster, MemberState, providers::clusters::ClustersProvider};
use mcr_envtest::{Fleet, TestCluster, wait::eventually};
use mcr_manager::{Context, Controller, LeaderElection, Manager};
use mcr_webhook::{ConfigOptions, MemberConfigurations, Server, ServerOptions, Webhooks};
use tokio_util::sync::CancellationToken;

const VALIDATE: &str = "/validate--v1-configmap";

/// One replica: a manager electing a leader over the host, its webhook server (added to the
/// manager), member configurations, and a controller counting its reconciles of members.
struct Replica {
    mgr: Manager,
    addr: std::net::SocketAddr,
    writer: Arc<MemberConfigurations>,
    reconciles: Arc<AtomicUsize>,
    token: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), mcr_manager::Error>>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

async fn reconcile(
    _cm: Arc<ConfigMap>,
    ctx: Context<AtomicUsize>,
) -> Result<Action, mcr_core::Error> {
    if !ctx.cluster_name().is_host() {
        ctx.data().fetch_add(1, Ordering::SeqCst);
    }
    Ok(Action::await_change())
}

fn retry(_: Arc<ConfigMap>, _: &mcr_core::Error, _: Context<AtomicUsize>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

async fn replica(
    id: &str,
    host: &TestCluster,
    fleet: &Fleet,
    pki: &common::Pki,
    base: &str,
) -> Replica {
    let provider = Arc::new(ClustersProvider::new());
    for c in fleet.clusters() {
        provider
            .add(Cluster::new(c.name(), c.client()))
            .await
            .unwrap();
    }
    let election = LeaderElection::new("webhook-leader", "default")
        .identity(id)
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(100));
    let mgr = Manager::builder(host.client())
        .provider(provider)
        .leader_election(election)
        .build();
    let webhooks = Webhooks::new(&mgr);
    configmap_webhooks(&webhooks);
    let server = Server::bind(
        ([127, 0, 0, 1], 0).into(),
        webhooks.clone(),
        pki.reloader(),
        ServerOptions::default(),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    mgr.add(Arc::new(server)).unwrap();
    let writer = Arc::new(
        MemberConfigurations::new(
            webhooks,
            base,
            pki.ca_pem.clone().into_bytes(),
            ConfigOptions::new("configmaps.leader.mcr.test"),
        )
        .unwrap(),
    );
    mgr.add(writer.clone()).unwrap();
    let reconciles = Arc::new(AtomicUsize::new(0));
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .register(reconcile, retry, reconciles.clone())
        .unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });
    Replica {
        mgr,
        addr,
        writer,
        reconciles,
        token,
        run,
    }
}

/// Posts member-1's review of the ConfigMap `settings` (which member-1's blocklist names) to
/// `addr`: the HTTP status and the review.
async fn review(addr: std::net::SocketAddr, ca: &str) -> (u16, serde_json::Value) {
    let mut conn = common::connect(addr, ca).await;
    conn.post(
        &format!("/clusters/member-1{VALIDATE}"),
        body(&fixture("configmap-create.json")),
    )
    .await
}

fn states(writer: &MemberConfigurations) -> Vec<MemberState> {
    writer
        .member_statuses()
        .into_iter()
        .map(|s| s.state)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_leader_election_every_replica_answers_every_members_review() {
    common::init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(2)
        .name_prefix("member")
        .start()
        .await
        .unwrap();
    for c in fleet.clusters() {
        common::admission_types(&c.client()).await;
    }
    // member-1 blocks the name `settings`: only a handler that reads member-1 says so.
    let mut blocklist = ConfigMap::default();
    blocklist.metadata.name = Some("blocklist".into());
    blocklist.data = Some([("names".to_string(), "settings".to_string())].into());
    Api::<ConfigMap>::namespaced(fleet.get("member-1").unwrap().client(), "default")
        .create(&PostParams::default(), &blocklist)
        .await
        .unwrap();

    // Two replicas behind one address, as behind a Service.
    let pki = common::Pki::new();
    let frontend = Frontend::start().await;
    let base = format!("https://{}", frontend.addr);
    let a = replica("a", &host, &fleet, &pki, &base).await;
    eventually("a to lead", WAIT, || a.mgr.is_leader()).await;
    let b = replica("b", &host, &fleet, &pki, &base).await;
    frontend.set(&[a.addr, b.addr]);
    eventually("a to reconcile the members", WAIT, || {
        a.reconciles.load(Ordering::SeqCst) > 0
    })
    .await;

    // Both answer member-1's reviews with member-1's own answer: the standby too (before,
    // it had no member engaged and failed every member review, 503).
    for (who, addr) in [("the leader", a.addr), ("the standby", b.addr)] {
        let answer = Arc::new(parking_lot::Mutex::new((0, serde_json::Value::Null)));
        mcr_envtest::wait::eventually_async(
            &format!("{who} to answer member-1's review"),
            WAIT,
            || {
                let (answer, ca) = (answer.clone(), pki.ca_pem.clone());
                async move {
                    let got = review(addr, &ca).await;
                    let served = got.0 != 503;
                    *answer.lock() = got;
                    served
                }
            },
        )
        .await;
        let (status, review) = answer.lock().clone();
        assert_eq!(status, 200, "{who}: {review}");
        assert_eq!(review["response"]["allowed"], false, "{who}: {review}");
        assert_eq!(
            review["response"]["status"]["message"], "settings is blocked in member-1",
            "{who}: {review}"
        );
    }
    // Through the one address, every call is answered, whichever replica gets it.
    for _ in 0..10 {
        let (status, review) = review(frontend.addr, &pki.ca_pem).await;
        assert_eq!(status, 200, "{review}");
    }
    assert!(!b.mgr.is_leader());
    // Only the leader reconciles and writes the members' configurations.
    assert_eq!(
        b.reconciles.load(Ordering::SeqCst),
        0,
        "the standby reconciled"
    );
    eventually("a to converge the members", WAIT, || {
        let s = states(&a.writer);
        s.len() == 2 && s.iter().all(|s| *s == MemberState::Engaged)
    })
    .await;
    assert!(
        states(&b.writer)
            .iter()
            .all(|s| matches!(s, MemberState::Elsewhere { .. })),
        "the standby's writer: {:?}",
        b.writer.member_statuses()
    );

    // The leader goes: the standby leads, reconciles the members it had engaged all along and
    // converges their configurations.
    let mut a = a;
    a.token.cancel();
    tokio::time::timeout(WAIT, &mut a.run)
        .await
        .expect("a stops in time")
        .unwrap()
        .unwrap();
    frontend.set(&[b.addr]);
    eventually("b to lead", WAIT, || b.mgr.is_leader()).await;
    eventually("b to reconcile the members", WAIT, || {
        b.reconciles.load(Ordering::SeqCst) > 0
    })
    .await;
    eventually("b to converge the members", WAIT, || {
        let s = states(&b.writer);
        s.len() == 2 && s.iter().all(|s| *s == MemberState::Engaged)
    })
    .await;
    let (status, review) = review(frontend.addr, &pki.ca_pem).await;
    assert_eq!(status, 200, "{review}");
}
