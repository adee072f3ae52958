//! Webhooks of a sharded fleet: several replicas over one host and one set of members, each
//! replica engaging only the members it owns. A review for a member a replica cannot serve
//! must fail (HTTP 503, so the webhook's `failurePolicy` decides), never be denied; and a
//! member handed from one replica to another keeps its webhook configuration throughout.

mod common;

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use common::{DEADLINE, Running, body, configmap_webhooks, connect, fixture, serve};
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
                Some(size) if size.parse::<u32>().is_err() => Err(format!(
                    "data.size must be a number, not {size:?} (cluster {})",
                    req.cluster_name()
                )
                .into()),
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

/// Starts replica `id`; `extra` is added to its manager before it runs.
async fn replica(
    id: &str,
    host: &TestCluster,
    fleet: &Fleet,
    extra: impl FnOnce(&Manager, &Webhooks, &Running) -> Option<Arc<MemberConfigurations>>,
) -> Replica {
    let provider = Arc::new(ClustersProvider::new());
    for c in fleet.clusters() {
        provider
            .add(Cluster::new(c.name(), c.client()))
            .await
            .unwrap();
    }
    let mgr = Manager::builder(host.client())
        .provider(provider)
        .sharding(sharding(id))
        .build();
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
        DEADLINE,
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
        let writer = Arc::new(MemberConfigurations::new(
            webhooks.clone(),
            base,
            b"ca".to_vec(),
            ConfigOptions::new(CONFIG),
        ));
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
                DEADLINE,
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
    mcr_envtest::wait::eventually("r1 to record the members it handed to r2", DEADLINE, || {
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
    tokio::time::timeout(DEADLINE, &mut r2.run)
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
