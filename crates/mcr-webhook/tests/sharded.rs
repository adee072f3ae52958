//! Webhooks of a sharded fleet: several replicas over one host and one set of members, each
//! replica engaging only the members it owns. A review for a member a replica cannot serve
//! must fail (HTTP 503, so the webhook's `failurePolicy` decides), never be denied; and a
//! member handed from one replica to another keeps its webhook configuration throughout.
//! Three replicas behind one address, one killed and one joining while the members write
//! (through their kube-apiservers with MCR_ENVTEST=real): no write is refused by mistake or
//! admitted unvalidated, and no configuration goes missing.

mod common;

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use common::{Running, WAIT, body, configmap_webhooks, connect, fixture, serve};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use mcr_envtest::{Fleet, TestCluster};
use mcr_manager::{Manager, Sharding};
use mcr_webhook::{ConfigOptions, MemberConfigurations, ServerOptions, Webhooks};
use tokio_util::sync::CancellationToken;

const VALIDATE: &str = "/validate--v1-configmap";
/// The review-only validator: any replica answers it.
const CHECK: &str = "/check--v1-configmap";

#[derive(kube::CustomResource, serde::Deserialize, serde::Serialize, Clone, Debug)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    schema = "disabled"
)]
struct WidgetSpec {
    size: i64,
}

#[derive(kube::CustomResource, serde::Deserialize, serde::Serialize, Clone, Debug)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Gadget",
    namespaced,
    schema = "disabled"
)]
struct GadgetSpec {
    size: i64,
}

/// `spec.size` moves to `spec.dimensions.size` in v2.
fn to_v2(mut obj: serde_json::Value, to: &str) -> Result<serde_json::Value, String> {
    let size = obj["spec"]["size"].as_i64().ok_or("spec.size is missing")?;
    obj["spec"] = serde_json::json!({ "dimensions": { "size": size } });
    obj["apiVersion"] = to.into();
    Ok(obj)
}

/// A validator that needs only the review (`data.size` must be a number), a converter that
/// needs only the object (Widgets), and one that is handed the member (Gadgets).
fn review_only_webhooks(webhooks: &Webhooks) {
    webhooks
        .for_::<Widget>()
        .with_review_converter(to_v2)
        .register()
        .unwrap();
    webhooks
        .for_::<Gadget>()
        .with_converter(|obj, to, _cluster| to_v2(obj, to))
        .register()
        .unwrap();
    check_validator(webhooks);
}

/// The review-only validator on [`CHECK`]: `data.size`, when present, must be a number.
fn check_validator(webhooks: &Webhooks) {
    webhooks
        .for_::<k8s_openapi::api::core::v1::ConfigMap>()
        .validate_path(CHECK)
        .with_review_validator(|req| async move {
            let size = req
                .object
                .as_ref()
                .and_then(|cm| cm.data.as_ref())
                .and_then(|d| d.get("size"));
            match size {
                Some(size) if size.parse::<u32>().is_err() => {
                    Err(format!("{REFUSAL}, not {size:?} (cluster {})", req.cluster_name()).into())
                }
                _ => Ok(()),
            }
        })
        .register()
        .unwrap();
}

/// One replica: a sharded manager over every member, its webhooks and their server.
struct Replica {
    id: String,
    mgr: Manager,
    webhooks: Webhooks,
    server: Running,
    /// Its member configurations writer, if it has one.
    writer: Option<Arc<MemberConfigurations>>,
    token: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), mcr_manager::Error>>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

fn sharding(id: &str) -> Sharding {
    Sharding::new("webhook-test")
        .identity(id)
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_millis(1500))
        .renew_period(Duration::from_millis(500))
}

/// Replica `id`'s manager: sharded, over `members`, not yet running.
async fn sharded_manager(id: &str, host: &TestCluster, members: &[TestCluster]) -> Manager {
    sharded_manager_with(id, host, members, TestCluster::client).await
}

/// [`sharded_manager`], reaching each member through `client(member)`.
async fn sharded_manager_with(
    id: &str,
    host: &TestCluster,
    members: &[TestCluster],
    client: impl Fn(&TestCluster) -> kube::Client,
) -> Manager {
    let provider = Arc::new(ClustersProvider::new());
    for c in members {
        provider
            .add(Cluster::new(c.name(), client(c)))
            .await
            .unwrap();
    }
    Manager::builder(host.client())
        .provider(provider)
        .sharding(sharding(id))
        .build()
}

/// Starts replica `id`; `extra` is added to its manager before it runs.
async fn replica(
    id: &str,
    host: &TestCluster,
    fleet: &Fleet,
    extra: impl FnOnce(&Manager, &Webhooks, &Running) -> Option<Arc<MemberConfigurations>>,
) -> Replica {
    replica_with(id, host, fleet, TestCluster::client, extra).await
}

/// [`replica`], reaching each member through `client(member)`.
async fn replica_with(
    id: &str,
    host: &TestCluster,
    fleet: &Fleet,
    client: impl Fn(&TestCluster) -> kube::Client,
    extra: impl FnOnce(&Manager, &Webhooks, &Running) -> Option<Arc<MemberConfigurations>>,
) -> Replica {
    let mgr = sharded_manager_with(id, host, fleet.clusters(), client).await;
    let webhooks = Webhooks::new(&mgr);
    configmap_webhooks(&webhooks);
    review_only_webhooks(&webhooks);
    let server = serve(webhooks.clone(), ServerOptions::default()).await;
    let writer = extra(&mgr, &webhooks, &server);
    let token = CancellationToken::new();
    let run = {
        let (mgr, token) = (mgr.clone(), token.clone());
        tokio::spawn(async move { mgr.run_until(token).await })
    };
    Replica {
        id: id.to_owned(),
        mgr,
        webhooks,
        server,
        writer,
        token,
        run,
    }
}

/// The members engaged by each replica, once every member is engaged by exactly one and every
/// replica engages some (with these names and identities, the split is fixed).
async fn settled(replicas: &[&Replica], all: &BTreeSet<String>) -> Vec<BTreeSet<String>> {
    let mut split = Vec::new();
    mcr_envtest::wait::eventually(
        "every member engaged by exactly one replica, every replica by some",
        WAIT,
        || {
            split = replicas
                .iter()
                .map(|r| {
                    r.mgr
                        .fleet()
                        .names()
                        .into_iter()
                        .map(|n| n.to_string())
                        .collect::<BTreeSet<_>>()
                })
                .collect();
            let total: usize = split.iter().map(BTreeSet::len).sum();
            let union: BTreeSet<String> = split.iter().flatten().cloned().collect();
            total == all.len() && union == *all && split.iter().all(|s| !s.is_empty())
        },
    )
    .await;
    split
}

fn names(fleet: &Fleet) -> BTreeSet<String> {
    fleet.names().into_iter().map(|n| n.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_fails_reviews_of_members_it_does_not_own_and_answers_review_only_ones() {
    common::init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(4)
        .name_prefix("member")
        .start()
        .await
        .unwrap();
    let all = names(&fleet);
    let r1 = replica("r1", &host, &fleet, |_, _, _| None).await;
    let r2 = replica("r2", &host, &fleet, |_, _, _| None).await;
    let split = settled(&[&r1, &r2], &all).await;

    let create = body(&fixture("configmap-create.json"));
    for (r, owned) in [(&r1, &split[0]), (&r2, &split[1])] {
        let mut conn = connect(r.server.addr, &r.server.pki.ca_pem).await;
        for member in &all {
            let path = format!("/clusters/{member}{VALIDATE}");
            let (status, review) = conn.post(&path, create.clone()).await;
            if owned.contains(member) {
                assert_eq!(status, 200, "{}: {member}: {review}", r.id);
                assert_eq!(review["response"]["allowed"], true, "{}: {review}", r.id);
            } else {
                assert_eq!(
                    status, 503,
                    "{} does not own {member}: the review must fail so the failurePolicy decides, not be answered: {review}",
                    r.id
                );
                let message = review["response"]["status"]["message"]
                    .as_str()
                    .unwrap_or_default();
                assert!(message.contains(member.as_str()), "{message}");
            }
        }
        // The review-only validator: this replica answers for every member, owned or not,
        // and decides right.
        let invalid = body(&fixture("configmap-create-invalid.json"));
        for member in &all {
            let path = format!("/clusters/{member}{CHECK}");
            let (status, review) = conn.post(&path, create.clone()).await;
            assert_eq!(status, 200, "{}: {member}: {review}", r.id);
            assert_eq!(review["response"]["allowed"], true, "{}: {review}", r.id);
            let (status, review) = conn.post(&path, invalid.clone()).await;
            assert_eq!(status, 200, "{}: {member}: {review}", r.id);
            assert_eq!(review["response"]["allowed"], false, "{}: {review}", r.id);
            assert_eq!(
                review["response"]["status"]["message"],
                format!("data.size must be a number, not \"large\" (cluster {member})"),
                "{}",
                r.id
            );
        }
        // Conversion: Widgets need only the object, so every replica converts them for every
        // member; Gadgets are handed the member, so only its owner converts them.
        let widgets = body(&fixture("conversion-review.json"));
        let mut gadgets = fixture("conversion-review.json");
        for object in gadgets["request"]["objects"].as_array_mut().unwrap() {
            object["kind"] = "Gadget".into();
        }
        let gadgets = body(&gadgets);
        for member in &all {
            let path = format!("/clusters/{member}/convert");
            let (status, review) = conn.post(&path, widgets.clone()).await;
            assert_eq!(status, 200, "{}: {member}: {review}", r.id);
            assert_eq!(
                review["response"]["result"]["status"], "Success",
                "{review}"
            );
            let (status, review) = conn.post(&path, gadgets.clone()).await;
            if owned.contains(member) {
                assert_eq!(status, 200, "{}: {member}: {review}", r.id);
                assert_eq!(
                    review["response"]["result"]["status"], "Success",
                    "{review}"
                );
            } else {
                assert_eq!(status, 503, "{}: {member}: {review}", r.id);
            }
        }
        // A member no replica knows fails the same way.
        let (status, review) = conn
            .post(&format!("/clusters/member-9{VALIDATE}"), create.clone())
            .await;
        assert_eq!(status, 503, "{review}");
    }
    let _ = (&r1.webhooks, &r1.run, &r2.run);
}

const CONFIG: &str = "configmaps.webhooks.mcr.test";

/// The URL of the first validating webhook in `client`'s cluster, if configured.
async fn config_url(client: &kube::Client) -> Option<String> {
    let api: kube::Api<ValidatingWebhookConfiguration> = kube::Api::all(client.clone());
    let config = api.get_opt(CONFIG).await.ok()??;
    config.webhooks?.first()?.client_config.url.clone()
}

/// Each replica writes its own URL into the members it owns (the per-replica design).
fn writer(
    id: &str,
) -> impl FnOnce(&Manager, &Webhooks, &Running) -> Option<Arc<MemberConfigurations>> {
    let base = format!("https://{id}.webhooks.example.test:9443");
    move |mgr: &Manager, webhooks: &Webhooks, _: &Running| {
        let writer = Arc::new(
            MemberConfigurations::new(
                webhooks.clone(),
                base,
                b"ca".to_vec(),
                ConfigOptions::new(CONFIG),
            )
            .unwrap(),
        );
        mgr.add(writer.clone()).unwrap();
        Some(writer)
    }
}

/// Waits until every member in `split[i]` has replica `ids[i]`'s URL.
async fn urls_follow_owners(fleet: &Fleet, ids: &[&str], split: &[BTreeSet<String>]) {
    for (id, owned) in ids.iter().zip(split) {
        for member in owned {
            let client = fleet.get(member).unwrap().client();
            let want =
                format!("https://{id}.webhooks.example.test:9443/clusters/{member}{VALIDATE}");
            mcr_envtest::wait::eventually_async(
                &format!("{member}'s configuration to call its owner {id}"),
                WAIT,
                || {
                    let (client, want) = (client.clone(), want.clone());
                    async move { config_url(&client).await.as_deref() == Some(want.as_str()) }
                },
            )
            .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_swaps_the_url_and_never_deletes_the_configuration() {
    common::init_tracing();
    // Counts each member's deletes of webhook configurations: the emulator's request counters.
    if !mcr_envtest::require_emulator("counts the deletes each member received") {
        return;
    }
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(4)
        .name_prefix("member")
        .start()
        .await
        .unwrap();
    for c in fleet.clusters() {
        common::admission_types(&c.client()).await;
    }
    let all = names(&fleet);
    let r1 = replica("r1", &host, &fleet, writer("r1")).await;
    let split = settled(&[&r1], &all).await;
    urls_follow_owners(&fleet, &["r1"], &split).await;

    // r2 joins: the members it takes over get its URL; none loses its configuration.
    let mut r2 = replica("r2", &host, &fleet, writer("r2")).await;
    let split = settled(&[&r1, &r2], &all).await;
    urls_follow_owners(&fleet, &["r1", "r2"], &split).await;
    // r1 has decided about every member it handed over (so any delete it would send is sent).
    let r1_writer = r1.writer.clone().unwrap();
    mcr_envtest::wait::eventually("r1 to record the members it handed to r2", WAIT, || {
        let statuses = r1_writer.member_statuses();
        split[1].iter().all(|member| {
            statuses.iter().any(|s| {
                s.name.as_str() == member
                    && matches!(s.state, mcr_core::MemberState::Elsewhere { .. })
            })
        })
    })
    .await;
    for c in fleet.clusters() {
        assert_eq!(
            c.request_count("delete", "validatingwebhookconfigurations"),
            0,
            "{}: a handoff deleted the configuration",
            c.name()
        );
        assert!(config_url(&c.client()).await.is_some(), "{}", c.name());
    }

    // r2 stops: its members go back to r1, again without a delete.
    r2.token.cancel();
    tokio::time::timeout(WAIT, &mut r2.run)
        .await
        .expect("r2 stops in time")
        .unwrap()
        .unwrap();
    let split = settled(&[&r1], &all).await;
    urls_follow_owners(&fleet, &["r1"], &split).await;
    for c in fleet.clusters() {
        assert_eq!(
            c.request_count("delete", "validatingwebhookconfigurations")
                + c.request_count("delete", "mutatingwebhookconfigurations"),
            0,
            "{}: a replica that stopped deleted the configuration",
            c.name()
        );
    }
}

/// Holds the writes of webhook configurations made through the clients it wraps, while it is
/// closed, as if they were on their way to a slow apiserver: a held write is delivered when
/// the gate opens, whether or not its sender still waits for the answer (cutting a request
/// that has left cannot unsend it). Counts the held writes and records their answers.
#[derive(Clone)]
struct Gate {
    open: Arc<tokio::sync::watch::Sender<bool>>,
    held: Arc<std::sync::atomic::AtomicUsize>,
    answers: Arc<parking_lot::Mutex<Vec<(String, u16)>>>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            open: Arc::new(tokio::sync::watch::Sender::new(true)),
            held: Arc::default(),
            answers: Arc::default(),
        }
    }

    fn set_open(&self, open: bool) {
        self.open.send_replace(open);
    }

    fn held(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `client`, its writes of webhook configurations held while the gate is closed.
    fn wrap(&self, member: &str, client: kube::Client) -> kube::Client {
        let (gate, member) = (self.clone(), member.to_owned());
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let (gate, client, member) = (gate.clone(), client.clone(), member.clone());
            async move {
                let write = req.method() != http::Method::GET
                    && req.uri().path().contains("webhookconfigurations");
                if !write || *gate.open.borrow() {
                    return client.send(req).await;
                }
                gate.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (tx, rx) = tokio::sync::oneshot::channel();
                let mut open = gate.open.subscribe();
                tokio::spawn(async move {
                    let _ = open.wait_for(|open| *open).await;
                    let answer = client.send(req).await;
                    let status = answer.as_ref().map_or(0, |r| r.status().as_u16());
                    gate.answers.lock().push((member, status));
                    let _ = tx.send(answer);
                });
                rx.await.unwrap_or_else(|_| {
                    Err(kube::Error::Service("the gate dropped the write".into()))
                })
            }
        });
        kube::Client::new(service, "default")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_owners_late_write_never_outlives_the_new_owners_configuration() {
    common::init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = Fleet::builder()
        .clusters(4)
        .name_prefix("member")
        .start()
        .await
        .unwrap();
    for c in fleet.clusters() {
        common::admission_types(&c.client()).await;
    }
    let all = names(&fleet);
    // r1 owns every member, and reaches each through a gate.
    let gate = Gate::new();
    let gated = {
        let gate = gate.clone();
        move |c: &TestCluster| gate.wrap(c.name(), c.client())
    };
    let r1 = replica_with("r1", &host, &fleet, gated, writer("r1")).await;
    let split = settled(&[&r1], &all).await;
    urls_follow_owners(&fleet, &["r1"], &split).await;

    // r1 converges again (a new CA bundle), and every write it sends is held on its way.
    gate.set_open(false);
    let r1_writer = r1.writer.clone().unwrap();
    r1_writer
        .set_ca_bundle(common::Pki::new().ca_pem.into_bytes())
        .unwrap();
    mcr_envtest::wait::eventually(
        "r1's writes to every member to be on their way",
        WAIT,
        || gate.held() >= all.len(),
    )
    .await;

    // r2 joins and takes members over: r1 releases them (their converges are cut, but the
    // writes already sent are still on their way), r2 writes its URL into them.
    let r2 = replica("r2", &host, &fleet, writer("r2")).await;
    let split = settled(&[&r1, &r2], &all).await;
    urls_follow_owners(&fleet, &["r2"], &split[1..]).await;

    // r1's old writes land now, after r2's.
    let held = gate.held();
    gate.set_open(true);
    mcr_envtest::wait::eventually("r1's held writes to be answered", WAIT, || {
        gate.answers.lock().len() >= held
    })
    .await;
    let answers = gate.answers.lock().clone();
    let late: Vec<_> = answers
        .iter()
        .filter(|(member, _)| split[1].contains(member))
        .collect();
    assert!(
        !late.is_empty(),
        "no late write reached a member r2 owns: {answers:?}"
    );
    // Each was conditioned on what r1 had read, before r2's write: refused.
    assert!(
        late.iter().all(|(_, status)| *status == 409),
        "an old owner's late write was taken: {late:?}"
    );
    // So the members r2 owns have r2's URL, without waiting for any converge.
    for member in &split[1] {
        let client = fleet.get(member).unwrap().client();
        let want = format!("https://r2.webhooks.example.test:9443/clusters/{member}{VALIDATE}");
        assert_eq!(
            config_url(&client).await.as_deref(),
            Some(want.as_str()),
            "{member} calls the old owner after its late write"
        );
    }
    // And they keep it: the next converges of r2 (and r1, which owns the others) agree.
    urls_follow_owners(&fleet, &["r1", "r2"], &split).await;
    eprintln!("late writes of the old owner: {late:?}");
}

// ---------------------------------------------------------------------------------------
// Three replicas behind one address, with a kill and a join, while the members write.

/// The label the one-address test's configurations select (the cluster's own ConfigMaps are
/// not sent to the webhook).
const WRITES: &str = "mcr-webhook-writes";
/// The validator's refusal of a marked write (`data.size` not a number).
const REFUSAL: &str = "data.size must be a number";

/// A replica on its own tokio runtime, so that killing it (shutting the runtime down) drops
/// everything it runs at once (server, manager, Leases), with nothing graceful.
struct Process {
    id: String,
    mgr: Manager,
    /// Its webhook server's own address (behind the one address).
    addr: std::net::SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Process {
    /// Starts replica `id`: a sharded manager over `fleet`'s members; a webhook server with
    /// the certificate in `pki` serving a review-only validator; and member configurations
    /// calling `base` (the one address).
    async fn start(
        id: &str,
        host: &TestCluster,
        fleet: &Fleet,
        pki: &common::Pki,
        base: &str,
    ) -> Process {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("replica-{id}"))
            .enable_all()
            .build()
            .unwrap();
        let (host, members) = (host.clone(), fleet.clusters().to_vec());
        let (id2, certs, base) = (id.to_owned(), pki.reloader(), base.to_owned());
        let ca = pki.ca_pem.clone().into_bytes();
        let (mgr, addr) = runtime
            .spawn(async move {
                let mgr = sharded_manager(&id2, &host, &members).await;
                let webhooks = Webhooks::new(&mgr);
                check_validator(&webhooks);
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
                        match_labels: Some([(WRITES.to_string(), "yes".to_string())].into()),
                        ..Default::default()
                    },
                );
                mgr.add(Arc::new(
                    MemberConfigurations::new(webhooks, base, ca, options).unwrap(),
                ))
                .unwrap();
                let run = mgr.clone();
                tokio::spawn(async move { run.run_until(CancellationToken::new()).await });
                (mgr, addr)
            })
            .await
            .unwrap();
        Process {
            id: id.to_owned(),
            mgr,
            addr,
            runtime: Some(runtime),
        }
    }

    /// Killed: its runtime is shut down, dropping its server, manager and Lease renewals.
    fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    fn owned(&self) -> BTreeSet<String> {
        self.mgr
            .fleet()
            .names()
            .into_iter()
            .map(|n| n.to_string())
            .collect()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Every write of the members, by outcome.
#[derive(Debug, Default)]
struct Tally {
    /// Valid writes admitted.
    admitted: usize,
    /// Marked writes refused by the validator.
    denied: usize,
    /// Writes refused because the call failed: the failurePolicy (`Fail`) decided.
    failed_calls: Vec<String>,
    /// Valid writes refused by a review answer: refused by mistake.
    wrongly_refused: Vec<String>,
    /// Marked writes admitted: not validated.
    unvalidated: Vec<String>,
    /// Anything else.
    other: Vec<String>,
}

impl Tally {
    fn total(&self) -> usize {
        self.admitted
            + self.denied
            + self.failed_calls.len()
            + self.wrongly_refused.len()
            + self.unvalidated.len()
            + self.other.len()
    }
}

/// How one write went: `Ok` admitted, `Err` refused with the message, for a failed call
/// (the failurePolicy decided) `Err` starting with "failed calling webhook".
type Outcome = Result<(), String>;

/// How a member writes: through its own kube-apiserver (real control planes), or, on the
/// emulator, by sending the review the apiserver would send to the one address.
enum Writer {
    Apiserver(kube::Api<k8s_openapi::api::core::v1::ConfigMap>),
    ByHand {
        member: String,
        addr: std::net::SocketAddr,
        ca: Vec<u8>,
        conn: Option<mcr_webhook::testing::ReviewClient>,
    },
}

impl Writer {
    async fn write(&mut self, cm: &k8s_openapi::api::core::v1::ConfigMap) -> Outcome {
        match self {
            Writer::Apiserver(api) => {
                let params = kube::api::PostParams::default();
                let create = api.create(&params, cm);
                match tokio::time::timeout(Duration::from_secs(30), create).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(kube::Error::Api(status))) => Err(status.message),
                    Ok(Err(other)) => Err(format!("(not an API answer) {other}")),
                    Err(_) => Err("(not an API answer) no answer within 30s".into()),
                }
            }
            Writer::ByHand {
                member,
                addr,
                ca,
                conn,
            } => {
                let review = mcr_webhook::testing::admission_review("w", "CREATE", cm);
                let path = format!("/clusters/{member}{CHECK}");
                if conn.is_none() {
                    *conn = mcr_webhook::testing::ReviewClient::connect(*addr, ca)
                        .await
                        .ok();
                }
                let answer = match conn.as_mut() {
                    Some(c) => c.post(&path, &review).await,
                    None => return Err("failed calling webhook: cannot connect".into()),
                };
                match answer {
                    Ok((200, answer)) if answer["response"]["allowed"] == true => Ok(()),
                    Ok((200, answer)) => Err(answer["response"]["status"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()),
                    Ok((status, _)) => Err(format!("failed calling webhook: HTTP {status}")),
                    Err(err) => {
                        *conn = None;
                        Err(format!("failed calling webhook: {err}"))
                    }
                }
            }
        }
    }
}

/// Writes ConfigMaps into `member` until `stop`: every other one marked (an invalid
/// `data.size`), counting each outcome in `tally`.
async fn keep_writing(
    mut writer: Writer,
    member: String,
    tally: Arc<parking_lot::Mutex<Tally>>,
    stop: CancellationToken,
) {
    let mut i = 0u32;
    while !stop.is_cancelled() {
        i += 1;
        let marked = i.is_multiple_of(2);
        let size = if marked { "large" } else { "3" };
        let cm = common::labelled(&format!("w-{i}"), WRITES, size);
        let outcome = writer.write(&cm).await;
        let what = format!("{member} w-{i} (size {size})");
        let mut tally = tally.lock();
        match outcome {
            Ok(()) if marked => tally.unvalidated.push(what),
            Ok(()) => tally.admitted += 1,
            Err(m) if m.contains(REFUSAL) && marked => tally.denied += 1,
            Err(m) if m.contains(REFUSAL) => tally.wrongly_refused.push(format!("{what}: {m}")),
            Err(m) if m.contains("failed calling webhook") => {
                tally.failed_calls.push(format!("{what}: {m}"));
            }
            Err(m) => tally.other.push(format!("{what}: {m}")),
        }
    }
}

/// Every member engaged by exactly one of `replicas`, and every replica agreeing which.
fn each_owned_once(replicas: &[&Process], all: &BTreeSet<String>) -> bool {
    all.iter().all(|member| {
        let owners: Vec<&str> = replicas
            .iter()
            .filter(|r| r.owned().contains(member))
            .map(|r| r.id.as_str())
            .collect();
        let [owner] = owners[..] else { return false };
        replicas
            .iter()
            .all(|r| match r.mgr.fleet().owner(&member.as_str().into()) {
                mcr_core::Ownership::Owned => r.id == owner,
                mcr_core::Ownership::Elsewhere { owner: Some(seen) } => seen == owner,
                _ => false,
            })
    })
}

fn owners(replicas: &[&Process]) -> String {
    replicas
        .iter()
        .map(|r| format!("{}: {:?}", r.id, r.owned()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_behind_one_address_with_a_kill_and_a_join_refuse_no_write_by_mistake() {
    common::init_tracing();
    let real = mcr_envtest::backend().is_real();
    let (host, fleet) = tokio::join!(
        TestCluster::start("host"),
        Fleet::builder().clusters(2).name_prefix("member").start()
    );
    let (host, fleet) = (host.unwrap(), fleet.unwrap());
    for c in fleet.clusters() {
        common::admission_types(&c.client()).await;
    }
    let all = names(&fleet);
    let pki = common::Pki::new();
    let frontend = common::Frontend::start().await;
    let base = format!("https://{}", frontend.addr);

    let r1 = Process::start("r1", &host, &fleet, &pki, &base).await;
    let r2 = Process::start("r2", &host, &fleet, &pki, &base).await;
    let r3 = Process::start("r3", &host, &fleet, &pki, &base).await;
    frontend.set(&[r1.addr, r2.addr, r3.addr]);
    mcr_envtest::wait::eventually("each member engaged by exactly one replica", WAIT, || {
        each_owned_once(&[&r1, &r2, &r3], &all)
    })
    .await;
    eprintln!("owners: {}", owners(&[&r1, &r2, &r3]));
    // Every member has the configuration calling the one address, and (on real control
    // planes) its apiserver calls it.
    for member in fleet.clusters() {
        let client = member.client();
        let want = format!("{base}/clusters/{}{CHECK}", member.name());
        mcr_envtest::wait::eventually_async(
            &format!("{}'s configuration", member.name()),
            WAIT,
            || {
                let (client, want) = (client.clone(), want.clone());
                async move { config_url(&client).await.as_deref() == Some(want.as_str()) }
            },
        )
        .await;
        if real {
            let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
                kube::Api::namespaced(client.clone(), "default");
            mcr_envtest::wait::eventually_async(
                &format!("{}'s apiserver to call the webhook", member.name()),
                WAIT,
                || {
                    let api = api.clone();
                    async move {
                        let probe = common::labelled("probe", WRITES, "x");
                        let dry = kube::api::PostParams {
                            dry_run: true,
                            ..Default::default()
                        };
                        matches!(api.create(&dry, &probe).await,
                            Err(kube::Error::Api(s)) if s.message.contains(REFUSAL))
                    }
                },
            )
            .await;
        }
    }

    // The members write throughout; a watcher counts every moment a configuration is gone.
    let tally = Arc::new(parking_lot::Mutex::new(Tally::default()));
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for member in fleet.clusters() {
        let writer = if real {
            Writer::Apiserver(kube::Api::namespaced(member.client(), "default"))
        } else {
            Writer::ByHand {
                member: member.name().to_owned(),
                addr: frontend.addr,
                ca: pki.ca_pem.clone().into_bytes(),
                conn: None,
            }
        };
        tasks.push(tokio::spawn(keep_writing(
            writer,
            member.name().to_owned(),
            tally.clone(),
            stop.clone(),
        )));
    }
    let lost = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watcher = {
        let (clients, lost, stop) = (
            fleet
                .clusters()
                .iter()
                .map(TestCluster::client)
                .collect::<Vec<_>>(),
            lost.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                for client in &clients {
                    if config_url(client).await.is_none() {
                        lost.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let writes = || tally.lock().total();
    let more_writes = |n: usize| {
        let from = writes();
        let tally = tally.clone();
        async move {
            mcr_envtest::wait::eventually(&format!("{n} more writes"), WAIT, || {
                tally.lock().total() >= from + n
            })
            .await;
        }
    };
    more_writes(20).await;

    // The owner of member-1 is killed: its members go to the others.
    let (victim, rest): (Vec<Process>, Vec<Process>) = [r1, r2, r3]
        .into_iter()
        .partition(|r| r.owned().contains("member-1"));
    let victim = victim.into_iter().next().unwrap();
    let victim_id = victim.id.clone();
    let [a, b]: [Process; 2] = rest.try_into().ok().unwrap();
    victim.kill();
    // Its endpoint goes (connections to it fail meanwhile, and the failurePolicy decides).
    frontend.set(&[a.addr, b.addr]);
    mcr_envtest::wait::eventually(
        &format!("{victim_id}'s members to be taken over"),
        WAIT,
        || each_owned_once(&[&a, &b], &all),
    )
    .await;
    eprintln!("{victim_id} killed; owners: {}", owners(&[&a, &b]));
    more_writes(20).await;

    // r4 joins: it takes its share.
    let before = (a.owned(), b.owned());
    let r4 = Process::start("r4", &host, &fleet, &pki, &base).await;
    frontend.set(&[a.addr, b.addr, r4.addr]);
    mcr_envtest::wait::eventually("r4 to take its share", WAIT, || {
        each_owned_once(&[&a, &b, &r4], &all) && (a.owned(), b.owned()) != before
    })
    .await;
    eprintln!("r4 joined; owners: {}", owners(&[&a, &b, &r4]));
    more_writes(20).await;

    stop.cancel();
    for task in tasks {
        task.await.unwrap();
    }
    watcher.await.unwrap();
    let tally = std::mem::take(&mut *tally.lock());
    eprintln!(
        "{} writes: {} admitted, {} refused by the validator, {} decided by the failurePolicy (failed calls), {} refused by mistake, {} admitted unvalidated, {} other; configurations seen missing {} times",
        tally.total(),
        tally.admitted,
        tally.denied,
        tally.failed_calls.len(),
        tally.wrongly_refused.len(),
        tally.unvalidated.len(),
        tally.other.len(),
        lost.load(std::sync::atomic::Ordering::SeqCst)
    );
    for failed in &tally.failed_calls {
        eprintln!("failed call: {failed}");
    }
    assert!(
        tally.wrongly_refused.is_empty(),
        "valid writes refused: {:?}",
        tally.wrongly_refused
    );
    assert!(
        tally.unvalidated.is_empty(),
        "marked writes admitted: {:?}",
        tally.unvalidated
    );
    assert!(tally.other.is_empty(), "{:?}", tally.other);
    assert_eq!(
        lost.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a configuration went missing"
    );
    assert!(tally.admitted > 0 && tally.denied > 0, "{tally:?}");
    for member in fleet.clusters() {
        assert_eq!(
            config_url(&member.client()).await,
            Some(format!("{base}/clusters/{}{CHECK}", member.name())),
            "{}",
            member.name()
        );
    }
}
