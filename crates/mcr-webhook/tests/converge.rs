//! Each member's webhook configurations are a reconciled resource: converged to our entries on
//! engagement, on a new CA bundle, on every change of the objects (hand edits repaired) and on
//! a resync (what the watch missed repaired); other parties' webhooks and the objects' other
//! fields left alone; exactly our entries removed when the member leaves, whatever else
//! changed, retried while it fails and reported apart, never holding a CA rotation.
//! (Handoffs and an old owner's late write are in `sharded.rs`.)

mod common;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use common::{Env, WAIT, admission_types, configmap_webhooks};
use k8s_openapi::{
    ByteString,
    api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhook, ValidatingWebhookConfiguration,
        WebhookClientConfig,
    },
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use mcr_core::MemberState;
use mcr_envtest::wait::{eventually, eventually_async};
use mcr_webhook::{ConfigOptions, MemberConfigurations, Webhooks};

const NAME: &str = "configmaps.converge.mcr.test";
const OURS: &str = "validate--v1-configmap-62231f71.configmaps.converge.mcr.test";
const THEIRS: &str = "audit.other-party.example.com";
const BASE: &str = "https://webhooks.example.test:9443";

/// Repairs triggered by a watch event come well within this; the resync of these tests is
/// [`RESYNC`], twice as long, so only the watch can repair in time.
const BY_WATCH: Duration = Duration::from_secs(30);
const RESYNC: Duration = Duration::from_secs(60);

fn options() -> ConfigOptions {
    let mut options = ConfigOptions::new(NAME);
    options.object_selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "mcr-webhook-converge".to_string(),
            "yes".to_string(),
        )])),
        ..Default::default()
    });
    options
}

/// `members` members with a writer converging their configurations (CA bundle `ca`).
async fn fleet(
    members: usize,
    ca: &[u8],
    tune: impl FnOnce(MemberConfigurations) -> MemberConfigurations,
) -> (Env, Arc<MemberConfigurations>) {
    let (env, writer, _) = fleet_with_webhooks(members, ca, tune).await;
    (env, writer)
}

async fn fleet_with_webhooks(
    members: usize,
    ca: &[u8],
    tune: impl FnOnce(MemberConfigurations) -> MemberConfigurations,
) -> (Env, Arc<MemberConfigurations>, Webhooks) {
    common::init_tracing();
    let env = Env::start_named("member", members).await;
    for member in env.fleet.clusters() {
        admission_types(&member.client()).await;
    }
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let writer = Arc::new(tune(
        MemberConfigurations::new(webhooks.clone(), BASE, ca.to_vec(), options()).unwrap(),
    ));
    env.mgr.add(writer.clone()).unwrap();
    (env, writer, webhooks)
}

fn validating(client: &Client) -> Api<ValidatingWebhookConfiguration> {
    Api::all(client.clone())
}

fn mutating(client: &Client) -> Api<MutatingWebhookConfiguration> {
    Api::all(client.clone())
}

/// Our validating webhook in `client`'s cluster, if there.
async fn ours(client: &Client) -> Option<ValidatingWebhook> {
    let config = validating(client).get_opt(NAME).await.ok()??;
    config.webhooks?.into_iter().find(|h| h.name == OURS)
}

/// Whether our webhook is there, calling its member's route and trusting `ca`.
async fn converged(client: &Client, member: &str, ca: &[u8]) -> bool {
    let want = format!("{BASE}/clusters/{member}/validate--v1-configmap");
    ours(client).await.is_some_and(|h| {
        h.client_config.url.as_deref() == Some(want.as_str())
            && h.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()) == Some(ca)
    })
}

async fn until_converged(client: &Client, member: &str, ca: &[u8], within: Duration, what: &str) {
    eventually_async(what, within, || async move {
        converged(client, member, ca).await
    })
    .await;
}

/// Another party's webhook, valid for kube-apiserver, selecting nothing of the tests.
fn theirs() -> ValidatingWebhook {
    ValidatingWebhook {
        name: THEIRS.into(),
        admission_review_versions: vec!["v1".into()],
        side_effects: "None".into(),
        failure_policy: Some("Ignore".into()),
        client_config: WebhookClientConfig {
            url: Some("https://audit.other-party.example.com/validate".into()),
            ca_bundle: Some(ByteString(b"their CA".to_vec())),
            service: None,
        },
        object_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("never".to_string(), "set".to_string())])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Edits the validating configuration in `client`'s cluster by hand (a read and a replace,
/// as `kubectl edit` does).
async fn edit(client: &Client, change: impl Fn(&mut ValidatingWebhookConfiguration)) {
    let api = validating(client);
    eventually_async("a hand edit to go through", WAIT, || {
        let (api, change) = (api.clone(), &change);
        async move {
            let Ok(mut config) = api.get(NAME).await else {
                return false;
            };
            change(&mut config);
            config.metadata.managed_fields = None;
            api.replace(NAME, &PostParams::default(), &config)
                .await
                .is_ok()
        }
    })
    .await;
}

/// Labels the validating configuration (as `kubectl label` does).
async fn label(client: &Client) {
    let patch = serde_json::json!({"metadata": {"labels": {"touched-by": "hand"}}});
    validating(client)
        .patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn hand_edits_are_repaired_and_other_webhooks_and_fields_left_alone() {
    let (first, second) = (common::Pki::new().ca_pem, common::Pki::new().ca_pem);
    let ca = first.as_bytes();
    let (env, writer) = fleet(1, ca, |w| w.resync(RESYNC)).await;
    let _manager = env.run_engaged().await;
    let client = env.fleet.get("member-1").unwrap().client();
    until_converged(&client, "member-1", ca, WAIT, "the first converge").await;

    // Someone labels the object and adds a webhook of their own to it.
    label(&client).await;
    edit(&client, |c| {
        c.webhooks.get_or_insert_default().push(theirs())
    })
    .await;

    // A hand edit of our webhook's CA bundle is repaired by the converge its watch event
    // wakes, well before the resync.
    edit(&client, |c| {
        for h in c.webhooks.iter_mut().flatten() {
            if h.name == OURS {
                h.client_config.ca_bundle = Some(ByteString(b"not ours".to_vec()));
            }
        }
    })
    .await;
    until_converged(&client, "member-1", ca, BY_WATCH, "our caBundle repaired").await;

    // Our webhook taken out of the list: put back.
    edit(&client, |c| {
        c.webhooks
            .get_or_insert_default()
            .retain(|h| h.name != OURS);
    })
    .await;
    until_converged(&client, "member-1", ca, BY_WATCH, "our webhook put back").await;

    // The mutating configuration deleted: created again.
    mutating(&client)
        .delete(NAME, &Default::default())
        .await
        .unwrap();
    eventually_async("the mutating configuration recreated", BY_WATCH, || {
        let api = mutating(&client);
        async move { api.get_opt(NAME).await.ok().flatten().is_some() }
    })
    .await;

    // A new CA bundle: ours converged to it, theirs and the label untouched throughout.
    let next = second.as_bytes();
    writer.set_ca_bundle(next.to_vec()).unwrap();
    until_converged(&client, "member-1", next, WAIT, "the new CA bundle").await;
    eventually("the writer to report the new bundle written", WAIT, || {
        writer.has_written_ca_bundle(next)
    })
    .await;
    let config = validating(&client).get(NAME).await.unwrap();
    let kept = config
        .webhooks
        .iter()
        .flatten()
        .find(|h| h.name == THEIRS)
        .expect("another party's webhook was removed");
    assert_eq!(
        kept.client_config.url.as_deref(),
        Some("https://audit.other-party.example.com/validate")
    );
    assert_eq!(
        kept.client_config
            .ca_bundle
            .as_ref()
            .map(|b| b.0.as_slice()),
        Some(&b"their CA"[..])
    );
    assert_eq!(
        config
            .metadata
            .labels
            .unwrap_or_default()
            .get("touched-by")
            .map(String::as_str),
        Some("hand"),
        "the object's label was removed"
    );
}

#[tokio::test]
async fn a_member_that_leaves_after_its_configuration_was_touched_loses_exactly_our_entries() {
    let ca = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
    let (env, writer) = fleet(2, ca, |w| w).await;
    let _manager = env.run_engaged().await;
    let client = env.fleet.get("member-2").unwrap().client();
    until_converged(&client, "member-2", ca, WAIT, "member-2's configuration").await;
    eventually_async("member-2's mutating configuration", WAIT, || {
        let api = mutating(&client);
        async move { api.get_opt(NAME).await.ok().flatten().is_some() }
    })
    .await;

    // Touched by hand: a label (as `kubectl label`), and another party's webhook.
    label(&client).await;
    edit(&client, |c| {
        c.webhooks.get_or_insert_default().push(theirs())
    })
    .await;

    // member-2 leaves the fleet: our webhooks go, whatever changed; theirs and the label stay;
    // the mutating configuration, which held only ours, is deleted.
    env.provider.remove(&"member-2".into());
    eventually_async("our webhooks to be removed from member-2", WAIT, || {
        let client = client.clone();
        async move {
            let Ok(Some(config)) = validating(&client).get_opt(NAME).await else {
                return false;
            };
            let names: Vec<_> = config
                .webhooks
                .iter()
                .flatten()
                .map(|h| h.name.clone())
                .collect();
            names == [THEIRS]
                && mutating(&client)
                    .get_opt(NAME)
                    .await
                    .is_ok_and(|m| m.is_none())
        }
    })
    .await;
    let config = validating(&client).get(NAME).await.unwrap();
    assert_eq!(
        config
            .metadata
            .labels
            .unwrap_or_default()
            .get("touched-by")
            .map(String::as_str),
        Some("hand")
    );
    eventually(
        "member-2's record to go once its cleanup is done",
        WAIT,
        || {
            !writer
                .member_statuses()
                .iter()
                .any(|s| s.name == "member-2")
        },
    )
    .await;
    // member-1 keeps its own.
    let member1 = env.fleet.get("member-1").unwrap().client();
    assert!(converged(&member1, "member-1", ca).await);
}

#[tokio::test]
async fn a_departed_members_failing_cleanup_is_retried_reported_apart_and_never_holds_a_ca_rotation()
 {
    // The cleanup's failures are injected errors, which only the emulator offers.
    if !mcr_envtest::require_emulator("injects errors into a member's writes") {
        return;
    }
    let (old, new) = (common::Pki::new().ca_pem, common::Pki::new().ca_pem);
    let (old, new) = (old.as_bytes(), new.as_bytes());
    let (env, writer) = fleet(2, old, |w| w).await;
    let _manager = env.run_engaged().await;
    let member2 = env.fleet.get("member-2").unwrap().clone();
    let client = member2.client();
    until_converged(&client, "member-2", old, WAIT, "member-2's configuration").await;
    eventually("both members converged", WAIT, || {
        writer.has_written_ca_bundle(old)
    })
    .await;

    // member-2 leaves while its apiserver refuses every write of the configurations.
    for verb in ["delete", "update"] {
        for resource in [
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ] {
            member2.inject_error(
                mcr_envtest::ErrorRule::new(503)
                    .verb(verb)
                    .resource(resource),
            );
        }
    }
    env.provider.remove(&"member-2".into());
    eventually("the failing cleanup to be retried", WAIT, || {
        member2.request_count("delete", "validatingwebhookconfigurations") >= 2
    })
    .await;
    let failing_cleanup = |statuses: &[mcr_core::MemberStatus]| {
        statuses.iter().any(|s| {
            s.name == "member-2"
                && &*s.provider == "webhook-configurations-cleanup"
                && matches!(&s.state, MemberState::Failed { reason, retry_in: Some(_) }
                    if reason.contains("member left the fleet") && reason.contains("503"))
        })
    };
    eventually("the failing cleanup to show, apart", WAIT, || {
        failing_cleanup(&writer.member_statuses())
    })
    .await;
    // The manager reports it with the provider's members: member-2 is not engaged any more,
    // yet shows as failed in `cluster_statuses`.
    assert!(failing_cleanup(&env.mgr.member_statuses()));
    let status = env
        .mgr
        .cluster_statuses()
        .into_iter()
        .find(|s| s.name == "member-2");
    assert!(
        matches!(&status, Some(s) if !s.is_healthy() && matches!(s.member, Some(MemberState::Failed { .. }))),
        "{status:?}"
    );

    // A CA rotation is not held by the departed member: member-1 takes the new bundle and the
    // writer says so, while member-2's cleanup still fails.
    writer.set_ca_bundle(new.to_vec()).unwrap();
    let member1 = env.fleet.get("member-1").unwrap().client();
    until_converged(
        &member1,
        "member-1",
        new,
        WAIT,
        "member-1 on the new bundle",
    )
    .await;
    eventually("the rotation's condition", WAIT, || {
        writer.has_written_ca_bundle(new)
    })
    .await;
    assert!(
        failing_cleanup(&writer.member_statuses()),
        "the cleanup was expected to still fail"
    );

    // The member's apiserver takes writes again: the cleanup completes.
    member2.clear_faults();
    eventually("the cleanup to end", WAIT, || {
        !writer
            .member_statuses()
            .iter()
            .any(|s| s.name == "member-2")
    })
    .await;
    assert!(validating(&client).get_opt(NAME).await.unwrap().is_none());
    assert!(mutating(&client).get_opt(NAME).await.unwrap().is_none());
}

#[tokio::test]
async fn the_resync_repairs_what_the_watch_missed() {
    // The watches are broken by injected errors, which only the emulator offers.
    if !mcr_envtest::require_emulator("injects errors into a member's watches") {
        return;
    }
    let ca = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
    let (env, _writer) = fleet(1, ca, |w| w.resync(Duration::from_millis(500))).await;
    let member = env.fleet.get("member-1").unwrap().clone();
    // No watch or list of the configurations ever works in this member.
    for verb in ["watch", "list"] {
        for resource in [
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ] {
            member.inject_error(
                mcr_envtest::ErrorRule::new(500)
                    .verb(verb)
                    .resource(resource),
            );
        }
    }
    let _manager = env.run_engaged().await;
    let client = member.client();
    until_converged(&client, "member-1", ca, WAIT, "the first converge").await;
    edit(&client, |c| {
        c.webhooks
            .get_or_insert_default()
            .retain(|h| h.name != OURS);
    })
    .await;
    until_converged(
        &client,
        "member-1",
        ca,
        WAIT,
        "our webhook put back by the resync",
    )
    .await;
    assert_eq!(
        member.request_count("watch", "validatingwebhookconfigurations"),
        0
    );
}

#[tokio::test]
async fn a_converge_with_nothing_to_change_writes_nothing() {
    let ca = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
    let (env, writer, webhooks) =
        fleet_with_webhooks(1, ca, |w| w.resync(Duration::from_millis(200))).await;
    let _manager = env.run_engaged().await;
    let member = env.fleet.get("member-1").unwrap().clone();
    let client = member.client();
    until_converged(&client, "member-1", ca, WAIT, "the first converge").await;
    eventually("the writer to report it", WAIT, || {
        writer.has_written_ca_bundle(ca)
    })
    .await;
    // What the API server stores is what the writer wants, field for field (kube-apiserver's
    // defaults included), so a converge finds nothing to write.
    let base = format!("{BASE}/clusters/member-1");
    let want = mcr_webhook::validating_configuration(&webhooks, &base, ca, &options())
        .unwrap()
        .unwrap();
    let stored = validating(&client).get(NAME).await.unwrap();
    assert_eq!(stored.webhooks, want.webhooks);
    let want = mcr_webhook::mutating_configuration(&webhooks, &base, ca, &options())
        .unwrap()
        .unwrap();
    let stored = mutating(&client).get(NAME).await.unwrap();
    assert_eq!(stored.webhooks, want.webhooks);
    if mcr_envtest::backend().is_real() {
        return;
    }
    // On the emulator, counted: resyncs read both objects and write nothing.
    let written = |m: &mcr_envtest::TestCluster| {
        ["create", "update", "patch", "delete"]
            .iter()
            .flat_map(|verb| {
                [
                    "validatingwebhookconfigurations",
                    "mutatingwebhookconfigurations",
                ]
                .map(|r| m.request_count(verb, r))
            })
            .sum::<u64>()
    };
    let before = written(&member);
    let reads = member.request_count("get", "validatingwebhookconfigurations");
    eventually("five resyncs", WAIT, || {
        member.request_count("get", "validatingwebhookconfigurations") >= reads + 5
    })
    .await;
    assert_eq!(
        written(&member),
        before,
        "a resync wrote what had not changed"
    );
}

#[tokio::test]
async fn the_resync_is_at_most_a_minute() {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    let writer = MemberConfigurations::new(webhooks, BASE, b"ca".to_vec(), options())
        .unwrap()
        .resync(Duration::from_secs(600));
    let shown = format!("{writer:?}");
    assert!(shown.contains("resync: 60s"), "{shown}");
    let writer = writer.resync(Duration::from_secs(30));
    assert!(format!("{writer:?}").contains("resync: 30s"));
}
