//! Losing the leader Lease: the controllers stop and `run_until` returns
//! `Error::LeaderElectionLost` (the hand-over between two managers is in `lifecycle.rs`).

mod common;

use std::{sync::Arc, time::Duration};

use common::*;
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::ConfigMap},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{Api, api::PostParams};
use mcr_envtest::{Partition, TestCluster};
use mcr_manager::{Controller, Error, LeaderElection, Manager};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LEASE: &str = "mcr-loss";

/// A manager of the host cluster alone (so the host is engaged), electing through `LEASE`.
fn elected(host: &TestCluster, log: &Log) -> Manager {
    let le = LeaderElection::new(LEASE, "default")
        .identity("me")
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(50));
    let mgr = Manager::builder(host.client()).leader_election(le).build();
    Controller::new(&mgr)
        .for_::<ConfigMap>()
        .register(record, retry, Arc::new(log.clone()))
        .unwrap();
    mgr
}

/// `mcr_engaged_clusters` of the controller: 1 while it runs on the host, 0 once stopped.
fn engaged_gauge(mgr: &Manager) -> Option<i64> {
    let prefix = r#"mcr_engaged_clusters{controller="configmap"} "#;
    mgr.metrics()
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(prefix).and_then(|v| v.trim().parse().ok()))
}

/// Starts `mgr`, waits until it leads and reconciles on the host.
async fn leading(host: &TestCluster, mgr: &Manager, log: &Log) -> JoinHandle<Result<(), Error>> {
    let run = tokio::spawn({
        let mgr = mgr.clone();
        async move { mgr.run_until(CancellationToken::new()).await }
    });
    eventually("leading", DEADLINE, || mgr.is_leader()).await;
    create_cm(host.client(), "one", "1").await;
    eventually("reconciling", DEADLINE, || log.contains("/one=1")).await;
    assert_eq!(engaged_gauge(mgr), Some(1));
    run
}

/// Waits (generously) for `run_until` to return by itself.
async fn returned(run: JoinHandle<Result<(), Error>>) -> Result<(), Error> {
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("run_until should return after losing the lease")
        .unwrap()
}

#[tokio::test]
async fn losing_the_lease_to_another_identity_stops_the_controllers() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let log = Log::default();
    let mgr = elected(&host, &log);
    let run = leading(&host, &mgr, &log).await;

    // Someone else writes the Lease over (retrying on conflicts with the leader's renewals).
    let api: Api<Lease> = Api::namespaced(host.client(), "default");
    let start = std::time::Instant::now();
    loop {
        let mut lease = api.get(LEASE).await.unwrap();
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some("intruder".into());
        spec.lease_duration_seconds = Some(3600);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        match api.replace(LEASE, &PostParams::default(), &lease).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                assert!(start.elapsed() < DEADLINE, "could not take the lease over");
            }
            Err(err) => panic!("writing the lease failed: {err}"),
        }
    }

    let result = returned(run).await;
    assert!(
        matches!(&result, Err(Error::LeaderElectionLost { lease }) if lease == "default/mcr-loss"),
        "run_until should report the lost lease, got {result:?}"
    );
    assert!(!mgr.is_leader());
    assert_eq!(engaged_gauge(&mgr), Some(0), "the controller was stopped");
    let holder = api
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(
        holder.as_deref(),
        Some("intruder"),
        "the loser must not release a lease it no longer holds"
    );
}

#[tokio::test]
async fn a_leader_cut_off_past_its_renew_deadline_stops_the_controllers() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let log = Log::default();
    let mgr = elected(&host, &log);
    let run = leading(&host, &mgr, &log).await;

    // Renewals now hang; after the renew deadline the leader gives up, and shutdown (including
    // the best-effort release of the Lease) does not wait on the unreachable host.
    host.partition(Partition::Hang);
    let result = returned(run).await;
    assert!(
        matches!(&result, Err(Error::LeaderElectionLost { .. })),
        "run_until should report the lost lease, got {result:?}"
    );
    assert!(!mgr.is_leader());
    assert_eq!(engaged_gauge(&mgr), Some(0), "the controller was stopped");
    host.heal();
}
