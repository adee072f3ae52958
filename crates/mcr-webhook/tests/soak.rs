//! A webhook soak on real control planes (`MCR_ENVTEST=real`; `#[ignore]`d: run it with
//! `cargo test -p mcr-webhook --test soak -- --ignored --nocapture`): members on
//! kube-apiservers, three sharded replicas, each serving its own URL (the per-replica design)
//! with a validator and a defaulter that read the member, and writing its URL into the members
//! it owns. While every member creates ConfigMaps without pause (every other one invalid), the
//! replicas roll one by one (a clean stop, then a new replica under the same identity), one
//! is killed (its runtime dropped: no release, its Leases expire), the serving CA rotates
//! (both CAs trusted, the certificate switched, the old CA dropped) and configurations are
//! edited by hand (our webhook taken out of one member's, another's caBundle spoiled).
//!
//! Counted: every write by outcome, and the writes refused because the webhook call failed
//! (the `failurePolicy`, `Fail`, decided), grouped per member into windows (a window ends at
//! the member's next write that is answered). Goal: refused writes only in windows that follow
//! a handoff or a hand edit, each handoff window shorter than the lease duration plus one write
//! timeout; no write refused by a wrong answer; none admitted unvalidated but while a hand edit
//! had taken our webhook out (until the converge puts it back); and, once things settle, no
//! configuration pointing at a replica that does not own the member.

mod common;

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use common::{Pki, labelled};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::{Api, api::PostParams};
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use mcr_envtest::{Fleet, TestCluster, wait::eventually};
use mcr_manager::{Manager, Sharding};
use mcr_webhook::{ConfigOptions, MemberConfigurations, ServerOptions, Webhooks};
use tokio_util::sync::CancellationToken;

const CONFIG: &str = "configmaps.soak.mcr.test";
const LABEL: &str = "mcr-webhook-soak";
const REFUSAL: &str = "data.size must be a number";
const LEASE: Duration = Duration::from_secs(6);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
const SETTLE: Duration = Duration::from_secs(180);

/// A replica on its own runtime, so that a kill drops everything at once.
struct Replica {
    id: String,
    mgr: Manager,
    addr: std::net::SocketAddr,
    writer: Arc<MemberConfigurations>,
    token: CancellationToken,
    run: Option<tokio::task::JoinHandle<Result<(), mcr_manager::Error>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Replica {
    async fn start(id: &str, host: &TestCluster, fleet: &Fleet, pki: &Pki, ca: Vec<u8>) -> Replica {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("replica-{id}"))
            .enable_all()
            .build()
            .unwrap();
        let (host, members) = (host.clone(), fleet.clusters().to_vec());
        let (id2, certs) = (id.to_owned(), pki.reloader());
        let token = CancellationToken::new();
        let token2 = token.clone();
        let (mgr, addr, writer, run) = runtime
            .spawn(async move {
                let provider = Arc::new(ClustersProvider::new());
                for c in &members {
                    provider
                        .add(Cluster::new(c.name(), c.client()))
                        .await
                        .unwrap();
                }
                let mgr = Manager::builder(host.client())
                    .provider(provider)
                    .sharding(
                        Sharding::new("webhook-soak")
                            .identity(&id2)
                            .lease_duration(LEASE)
                            .renew_deadline(LEASE * 2 / 3)
                            .renew_period(LEASE / 5),
                    )
                    .build();
                let webhooks = Webhooks::new(&mgr);
                common::configmap_webhooks(&webhooks);
                let server = mcr_webhook::Server::bind(
                    ([127, 0, 0, 1], 0).into(),
                    webhooks.clone(),
                    certs,
                    ServerOptions::default(),
                )
                .await
                .unwrap();
                let addr = server.local_addr();
                mgr.add(Arc::new(server)).unwrap();
                let mut options = ConfigOptions::new(CONFIG);
                options.object_selector = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                        match_labels: Some([(LABEL.to_string(), "yes".to_string())].into()),
                        ..Default::default()
                    },
                );
                let writer = Arc::new(
                    MemberConfigurations::new(webhooks, format!("https://{addr}"), ca, options)
                        .unwrap()
                        .write_timeout(WRITE_TIMEOUT)
                        .resync(Duration::from_secs(10)),
                );
                mgr.add(writer.clone()).unwrap();
                let run = tokio::spawn({
                    let mgr = mgr.clone();
                    async move { mgr.run_until(token2).await }
                });
                (mgr, addr, writer, run)
            })
            .await
            .unwrap();
        Replica {
            id: id.to_owned(),
            mgr,
            addr,
            writer,
            token,
            run: Some(run),
            runtime: Some(runtime),
        }
    }

    /// A clean stop: its members are released to the others.
    async fn stop(mut self) {
        self.token.cancel();
        if let Some(run) = self.run.take() {
            let _ = tokio::time::timeout(Duration::from_secs(60), run).await;
        }
    }

    /// Killed: its runtime dropped, nothing released.
    fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    fn owns(&self, member: &str) -> bool {
        self.mgr
            .fleet()
            .names()
            .iter()
            .any(|n| n.as_str() == member)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.token.cancel();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One write of a member: when it was sent and answered, and how it went.
#[derive(Clone, Debug)]
struct Write {
    at: Instant,
    answered: Instant,
    outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Admitted,
    Denied,
    /// The call to the webhook failed: the failurePolicy refused the write.
    FailedCall(String),
    WronglyRefused(String),
    Unvalidated,
    Other(String),
}

async fn keep_writing(
    api: Api<k8s_openapi::api::core::v1::ConfigMap>,
    log: Arc<parking_lot::Mutex<Vec<Write>>>,
    stop: CancellationToken,
) {
    let mut i = 0u32;
    while !stop.is_cancelled() {
        i += 1;
        let marked = i.is_multiple_of(2);
        let cm = labelled(&format!("w-{i}"), LABEL, if marked { "large" } else { "3" });
        let at = Instant::now();
        let created = tokio::time::timeout(
            Duration::from_secs(30),
            api.create(&PostParams::default(), &cm),
        )
        .await;
        let outcome = match created {
            Ok(Ok(_)) if marked => Outcome::Unvalidated,
            Ok(Ok(_)) => Outcome::Admitted,
            Ok(Err(kube::Error::Api(s))) if s.message.contains(REFUSAL) && marked => {
                Outcome::Denied
            }
            Ok(Err(kube::Error::Api(s))) if s.message.contains(REFUSAL) => {
                Outcome::WronglyRefused(s.message)
            }
            Ok(Err(kube::Error::Api(s))) if s.message.contains("failed calling webhook") => {
                Outcome::FailedCall(s.message)
            }
            Ok(Err(other)) => Outcome::Other(other.to_string()),
            Err(_) => Outcome::Other("no answer within 30 s".into()),
        };
        log.lock().push(Write {
            at,
            answered: Instant::now(),
            outcome,
        });
    }
}

/// A moment of the soak that may refuse writes: a handoff or a hand edit.
#[derive(Clone, Debug)]
struct Event {
    at: Instant,
    what: String,
    /// A handoff (bounded by the lease and a write timeout), or a hand edit.
    handoff: bool,
}

/// The owner's URL prefix of `member`, and the URL its configuration holds.
async fn pointing(
    replicas: &[&Replica],
    fleet: &Fleet,
    member: &str,
) -> (Option<String>, Option<String>) {
    let owner = replicas
        .iter()
        .find(|r| r.owns(member))
        .map(|r| format!("https://{}/clusters/{member}/", r.addr));
    let api: Api<ValidatingWebhookConfiguration> = Api::all(fleet.get(member).unwrap().client());
    let url = api
        .get_opt(CONFIG)
        .await
        .ok()
        .flatten()
        .and_then(|c| c.webhooks)
        .and_then(|h| h.into_iter().find_map(|h| h.client_config.url));
    (owner, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of minutes on real control planes: cargo test -p mcr-webhook --test soak -- --ignored --nocapture"]
async fn a_webhook_soak_on_real_control_planes() {
    if !mcr_envtest::backend().is_real() {
        eprintln!(
            "SKIPPED on the emulator: the soak needs kube-apiservers that call the webhooks (MCR_ENVTEST=real)"
        );
        return;
    }
    common::init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(3)
        .name_prefix("member")
        .start()
        .await
        .unwrap();
    let all: Vec<String> = fleet.names();
    let (old, new) = (Pki::new(), Pki::new());
    // The CA bundle until the rotation, the last step that starts no replica.
    let bundle = old.ca_pem.clone().into_bytes();
    let mut replicas = Vec::new();
    for id in ["r1", "r2", "r3"] {
        replicas.push(Replica::start(id, &host, &fleet, &old, bundle.clone()).await);
    }
    let settled = |replicas: &[Replica]| {
        all.iter()
            .all(|m| replicas.iter().filter(|r| r.owns(m)).count() == 1)
    };
    eventually("every member owned once", SETTLE, || settled(&replicas)).await;
    for member in &all {
        let refs: Vec<&Replica> = replicas.iter().collect();
        mcr_envtest::wait::eventually_async(&format!("{member} to call its owner"), SETTLE, || {
            let (refs, fleet) = (&refs, &fleet);
            async move {
                let (owner, url) = pointing(refs, fleet, member).await;
                owner.zip(url).is_some_and(|(o, u)| u.starts_with(&o))
            }
        })
        .await;
    }

    // The members write without pause from here on.
    let stop = CancellationToken::new();
    let mut logs = BTreeMap::new();
    for member in &all {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let api = Api::namespaced(fleet.get(member).unwrap().client(), "default");
        tokio::spawn(keep_writing(api, log.clone(), stop.clone()));
        logs.insert(member.clone(), log);
    }
    let started = Instant::now();
    let mut events = Vec::new();
    let pause = || tokio::time::sleep(Duration::from_secs(15));
    pause().await;

    // A rolling restart: each replica stopped cleanly and replaced under its identity.
    for i in 0..3 {
        let id = replicas[i].id.clone();
        let old_replica = replicas.remove(i);
        events.push(Event {
            at: Instant::now(),
            what: format!("{id} stops (roll)"),
            handoff: true,
        });
        old_replica.stop().await;
        let replacement = Replica::start(&id, &host, &fleet, &old, bundle.clone()).await;
        events.push(Event {
            at: Instant::now(),
            what: format!("{id} back (roll)"),
            handoff: true,
        });
        replicas.insert(i, replacement);
        eventually("every member owned once", SETTLE, || settled(&replicas)).await;
        pause().await;
    }

    // One replica killed: its members wait for its Leases to expire.
    let killed = replicas.remove(1);
    events.push(Event {
        at: Instant::now(),
        what: format!("{} killed", killed.id),
        handoff: true,
    });
    killed.kill();
    eventually("the killed replica's members taken over", SETTLE, || {
        settled(&replicas)
    })
    .await;
    pause().await;
    let back = Replica::start("r2", &host, &fleet, &old, bundle.clone()).await;
    events.push(Event {
        at: Instant::now(),
        what: "r2 back".into(),
        handoff: true,
    });
    replicas.insert(1, back);
    eventually("every member owned once", SETTLE, || settled(&replicas)).await;
    pause().await;

    // The serving CA rotates: both trusted, the certificate switched, the old one dropped.
    let both = format!("{}{}", old.ca_pem, new.ca_pem).into_bytes();
    for r in &replicas {
        r.writer.set_ca_bundle(both.clone()).unwrap();
    }
    eventually("every member to trust both CAs", SETTLE, || {
        replicas
            .iter()
            .all(|r| r.writer.has_written_ca_bundle(&both))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await; // kube-apiserver reads configurations through a watch
    new.issue_into(old.dir.path(), "serving-2");
    for r in &replicas {
        let (addr, ca) = (r.addr, new.ca_pem.clone());
        mcr_envtest::wait::eventually_async(
            &format!("{} to present the new certificate", r.id),
            SETTLE,
            || {
                let ca = ca.clone();
                async move {
                    mcr_webhook::testing::ReviewClient::connect(addr, ca.as_bytes())
                        .await
                        .is_ok()
                }
            },
        )
        .await;
    }
    pause().await;
    let only_new = new.ca_pem.clone().into_bytes();
    for r in &replicas {
        r.writer.set_ca_bundle(only_new.clone()).unwrap();
    }
    eventually("every member to trust only the new CA", SETTLE, || {
        replicas
            .iter()
            .all(|r| r.writer.has_written_ca_bundle(&only_new))
    })
    .await;
    pause().await;

    // Hand edits: our webhook taken out of member-1's, member-2's caBundle spoiled.
    let edit = |member: &str, change: fn(&mut ValidatingWebhookConfiguration)| {
        let api: Api<ValidatingWebhookConfiguration> =
            Api::all(fleet.get(member).unwrap().client());
        async move {
            if let Ok(mut c) = api.get(CONFIG).await {
                change(&mut c);
                c.metadata.managed_fields = None;
                let _ = api.replace(CONFIG, &PostParams::default(), &c).await;
            }
        }
    };
    events.push(Event {
        at: Instant::now(),
        what: "member-1: our webhook removed by hand".into(),
        handoff: false,
    });
    edit("member-1", |c| c.webhooks = Some(vec![])).await;
    events.push(Event {
        at: Instant::now(),
        what: "member-2: caBundle spoiled by hand".into(),
        handoff: false,
    });
    edit("member-2", |c| {
        for h in c.webhooks.iter_mut().flatten() {
            h.client_config.ca_bundle = Some(k8s_openapi::ByteString(b"garbage".to_vec()));
        }
    })
    .await;
    pause().await;
    stop.cancel();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Settled: every configuration points at its member's owner.
    let refs: Vec<&Replica> = replicas.iter().collect();
    let mut wrong = Vec::new();
    for member in &all {
        let mut last = (None, None);
        let ok = tokio::time::timeout(SETTLE, async {
            loop {
                last = pointing(&refs, &fleet, member).await;
                if let (Some(o), Some(u)) = &last
                    && u.starts_with(o.as_str())
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
        .await;
        if ok.is_err() {
            wrong.push(format!("{member}: {last:?}"));
        }
    }

    // The figures.
    let bound = LEASE + WRITE_TIMEOUT;
    let mut total = 0;
    let mut failed = 0;
    let mut wrongly_refused = Vec::new();
    let mut unvalidated = Vec::new();
    let mut others = Vec::new();
    let mut windows = Vec::new();
    for (member, log) in &logs {
        let log = log.lock().clone();
        total += log.len();
        // (the first refused write's send and answer, how many)
        let mut open: Option<(Instant, Instant, usize)> = None;
        for w in &log {
            match &w.outcome {
                Outcome::FailedCall(_) => {
                    failed += 1;
                    let entry = open.get_or_insert((w.at, w.answered, 0));
                    entry.2 += 1;
                }
                outcome => {
                    if let Some((from, refused, n)) = open.take() {
                        windows.push((member.clone(), from, refused, w.at, n));
                    }
                    match outcome {
                        Outcome::WronglyRefused(m) => wrongly_refused.push(m.clone()),
                        Outcome::Unvalidated => unvalidated.push((member.clone(), w.answered)),
                        Outcome::Other(m) => others.push(m.clone()),
                        _ => {}
                    }
                }
            }
        }
        if let Some((from, refused, n)) = open {
            windows.push((member.clone(), from, refused, Instant::now(), n));
        }
    }
    let mut outside = Vec::new();
    let mut too_long = Vec::new();
    for (member, from, refused, to, n) in &windows {
        // The event the window follows: the last one before its first refusal was answered
        // (a write sent just before an event may be refused because of it).
        let cause = events.iter().rev().find(|e| e.at <= *refused);
        let length = to.duration_since(*from);
        let line = format!(
            "{member}: {n} refused over {length:?} from {:?} after {}",
            from.duration_since(started),
            cause.map_or("nothing", |e| e.what.as_str())
        );
        match cause {
            None => outside.push(line),
            Some(e) if e.handoff && length > bound => too_long.push(line),
            Some(_) => eprintln!("window: {line}"),
        }
    }
    // A write admitted unvalidated is expected only while a member's webhook is missing: after
    // the hand edit that took it out, before the converge that put it back.
    let mut unexplained = Vec::new();
    for (member, at) in &unvalidated {
        // The last hand edit of this member before the write, and whether the member's
        // webhook had answered since (a marked write denied in between).
        let removed = events.iter().rev().find(|e| {
            e.at <= *at
                && e.what
                    .starts_with(&format!("{member}: our webhook removed"))
        });
        let answered_since = removed.is_some_and(|e| {
            logs[member]
                .lock()
                .iter()
                .any(|w| w.outcome == Outcome::Denied && w.at >= e.at && w.answered <= *at)
        });
        let line = format!(
            "{member}: admitted unvalidated at {:?}",
            at.duration_since(started)
        );
        match removed {
            Some(e) if !answered_since => {
                eprintln!(
                    "unvalidated: {line}, {:?} after our webhook was removed by hand",
                    at.duration_since(e.at)
                );
            }
            _ => unexplained.push(line),
        }
    }
    eprintln!(
        "soak: {total} writes in {:?}, {failed} refused by failed calls in {} windows; {} wrongly refused, {} unvalidated ({} while our webhook was missing after a hand edit), {} other; {} configurations pointing at a non-owner after settling",
        started.elapsed(),
        windows.len(),
        wrongly_refused.len(),
        unvalidated.len(),
        unvalidated.len() - unexplained.len(),
        others.len(),
        wrong.len()
    );
    assert!(wrongly_refused.is_empty(), "{wrongly_refused:?}");
    assert!(unexplained.is_empty(), "{unexplained:?}");
    assert!(
        wrong.is_empty(),
        "configurations pointing at a non-owner: {wrong:?}"
    );
    assert!(
        outside.is_empty(),
        "refused writes outside any handoff or edit: {outside:?}"
    );
    assert!(
        too_long.is_empty(),
        "handoff windows longer than {bound:?}: {too_long:?}"
    );
}
