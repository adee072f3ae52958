//! The webhook configurations written into members, and (MCR_ENVTEST=real) real
//! kube-apiservers calling the webhook server for the host and two members, and through a
//! rotation of the serving CA while the members write.

mod common;

use std::{collections::BTreeMap, sync::Arc};

use common::{Env, WAIT, admission_types, configmap_webhooks, serve};
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::ConfigMap,
    },
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{Api, Client, api::PostParams};
use mcr_envtest::wait::eventually_async;
use mcr_webhook::{ConfigOptions, MemberConfigurations, ServerOptions, Webhooks};

const NAME: &str = "configmaps.webhooks.mcr.test";
const LABEL: &str = "mcr-webhook-test";

fn options() -> ConfigOptions {
    let mut options = ConfigOptions::new(NAME);
    options.object_selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(LABEL.to_string(), "yes".to_string())])),
        ..Default::default()
    });
    options
}

async fn config_url(client: &Client) -> Option<String> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let config = api.get_opt(NAME).await.ok()??;
    config.webhooks?.first()?.client_config.url.clone()
}

#[tokio::test]
async fn members_get_the_configuration_on_engage_and_lose_it_when_they_leave() {
    let env = Env::start_named("member", 2).await;
    for member in env.fleet.clusters() {
        admission_types(&member.client()).await;
    }
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let ca = b"-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n".to_vec();
    env.mgr
        .add(Arc::new(
            MemberConfigurations::new(
                webhooks,
                "https://webhooks.example.test:9443/",
                ca.clone(),
                options(),
            )
            .unwrap(),
        ))
        .unwrap();
    let manager = env.run_engaged().await;

    for name in ["member-1", "member-2"] {
        let client = env.fleet.get(name).unwrap().client();
        let want =
            format!("https://webhooks.example.test:9443/clusters/{name}/validate--v1-configmap");
        eventually_async(&format!("the configuration in {name}"), WAIT, || {
            let client = client.clone();
            let want = want.clone();
            async move { config_url(&client).await.as_deref() == Some(want.as_str()) }
        })
        .await;
        let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .get(NAME)
            .await
            .unwrap();
        let hook = &validating.webhooks.unwrap()[0];
        // Pinned: a webhook's name must not change between releases (its hash is the first
        // 8 hex digits of sha256("/validate--v1-configmap")).
        assert_eq!(
            hook.name,
            "validate--v1-configmap-62231f71.configmaps.webhooks.mcr.test"
        );
        assert_eq!(hook.client_config.ca_bundle.as_ref().unwrap().0, ca);
        assert_eq!(hook.side_effects, "None");
        assert_eq!(hook.admission_review_versions, ["v1"]);
        let rule = &hook.rules.as_ref().unwrap()[0];
        assert_eq!(
            rule.resources.as_deref(),
            Some(&["configmaps".to_string()][..])
        );
        assert_eq!(rule.api_groups.as_deref(), Some(&[String::new()][..]));
        // The two configurations are written one after the other: wait for the second too.
        let mutating_api = Api::<MutatingWebhookConfiguration>::all(client);
        eventually_async(
            &format!("the mutating configuration in {name}"),
            WAIT,
            || {
                let api = mutating_api.clone();
                async move { api.get_opt(NAME).await.ok().flatten().is_some() }
            },
        )
        .await;
        let mutating = mutating_api.get(NAME).await.unwrap();
        assert_eq!(
            mutating.webhooks.unwrap()[0].client_config.url.as_deref(),
            Some(
                format!("https://webhooks.example.test:9443/clusters/{name}/mutate--v1-configmap")
                    .as_str()
            )
        );
    }

    // member-2 leaves the fleet: its configuration goes, member-1 keeps its own.
    env.provider.remove(&"member-2".into());
    let member2 = env.fleet.get("member-2").unwrap().client();
    eventually_async("member-2's configuration to be removed", WAIT, || {
        let client = member2.clone();
        async move {
            Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .get_opt(NAME)
                .await
                .unwrap()
                .is_none()
                && Api::<MutatingWebhookConfiguration>::all(client)
                    .get_opt(NAME)
                    .await
                    .unwrap()
                    .is_none()
        }
    })
    .await;

    // Shutting the manager down leaves member-1's configuration in place.
    env.token.cancel();
    manager.await.unwrap().unwrap();
    let member1 = env.fleet.get("member-1").unwrap().client();
    assert!(
        config_url(&member1).await.is_some(),
        "shutdown removed member-1's configuration"
    );
}

fn cm(name: &str, size: &str) -> ConfigMap {
    common::labelled(name, LABEL, size)
}

#[tokio::test]
async fn real_apiservers_call_the_webhook_for_the_host_and_two_members() {
    if !mcr_envtest::backend().is_real() {
        let line = "SKIPPED on the emulator: real_apiservers_call_the_webhook_for_the_host_and_two_members: the emulator does not call admission webhooks (run with MCR_ENVTEST=real)\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return;
    }
    let env = Env::start_named("member", 2).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let s = serve(webhooks.clone(), ServerOptions::default()).await;
    let base = format!("https://{}", s.addr);
    let ca = s.pki.ca_pem.clone().into_bytes();
    env.mgr
        .add(Arc::new(
            MemberConfigurations::new(webhooks.clone(), base.clone(), ca.clone(), options())
                .unwrap(),
        ))
        .unwrap();
    // The host's configuration: what an operator applies, built by the same functions.
    let host = env.host.client();
    let validating = mcr_webhook::validating_configuration(&webhooks, &base, &ca, &options())
        .unwrap()
        .unwrap();
    let mutating = mcr_webhook::mutating_configuration(&webhooks, &base, &ca, &options())
        .unwrap()
        .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(host.clone())
        .create(&PostParams::default(), &validating)
        .await
        .unwrap();
    Api::<MutatingWebhookConfiguration>::all(host.clone())
        .create(&PostParams::default(), &mutating)
        .await
        .unwrap();
    let _manager = env.run_engaged().await;

    let clusters = [
        ("<host>", host),
        ("member-1", env.fleet.get("member-1").unwrap().client()),
        ("member-2", env.fleet.get("member-2").unwrap().client()),
    ];
    for (name, client) in clusters {
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let owner = if name == "<host>" { "team-a" } else { name };
        // The apiserver reads webhook configurations through an informer: dry-run until the
        // webhook answers.
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        eventually_async(
            &format!("{name}'s apiserver to call the mutating webhook"),
            WAIT,
            || {
                let api = api.clone();
                let dry = dry.clone();
                async move {
                    api.create(&dry, &cm("probe", "1"))
                        .await
                        .ok()
                        .and_then(|c| c.data)
                        .is_some_and(|d| d.get("owner").map(String::as_str) == Some(owner))
                }
            },
        )
        .await;
        let created = api
            .create(&PostParams::default(), &cm("defaulted", "2"))
            .await
            .unwrap();
        assert_eq!(
            created.data.unwrap().get("owner").map(String::as_str),
            Some(owner),
            "{name}: the mutating webhook's patch was applied"
        );
        eventually_async(
            &format!("{name}'s apiserver to call the validating webhook"),
            WAIT,
            || {
                let api = api.clone();
                let dry = dry.clone();
                async move { api.create(&dry, &cm("probe", "large")).await.is_err() }
            },
        )
        .await;
        let err = api
            .create(&PostParams::default(), &cm("invalid", "large"))
            .await
            .unwrap_err();
        let kube::Error::Api(status) = err else {
            panic!("{name}: {err}")
        };
        assert!(
            status.message.contains(&format!(
                "data.size must be a number, not \"large\" (cluster {name})"
            )),
            "{name}: {}",
            status.message
        );
        assert!(api.get_opt("invalid").await.unwrap().is_none());
    }
}

mod kubeadm {
    use kube::CustomResource;
    use serde::{Deserialize, Serialize};

    #[derive(CustomResource, Deserialize, Serialize, Clone, Debug)]
    #[kube(
        group = "controlplane.cluster.x-k8s.io",
        version = "v1beta1",
        kind = "KubeadmControlPlane",
        namespaced,
        schema = "disabled"
    )]
    pub struct KubeadmControlPlaneSpec {
        pub replicas: Option<i32>,
    }

    #[derive(CustomResource, Deserialize, Serialize, Clone, Debug)]
    #[kube(
        group = "controlplane.cluster.x-k8s.io",
        version = "v1beta1",
        kind = "KubeadmControlPlaneTemplate",
        namespaced,
        schema = "disabled"
    )]
    pub struct KubeadmControlPlaneTemplateSpec {
        pub template: Option<serde_json::Value>,
    }
}

#[tokio::test]
async fn webhook_names_are_unique_stable_and_at_most_63_characters() {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    for register in [
        webhooks
            .for_::<kubeadm::KubeadmControlPlane>()
            .with_validator(|_req| async { Ok(()) })
            .with_defaulter(|o, _req| async { Ok(o) })
            .register(),
        webhooks
            .for_::<kubeadm::KubeadmControlPlaneTemplate>()
            .with_validator(|_req| async { Ok(()) })
            .with_defaulter(|o, _req| async { Ok(o) })
            .register(),
    ] {
        register.unwrap();
    }
    let ca = b"ca".to_vec();
    let validating = mcr_webhook::validating_configuration(&webhooks, "https://x", &ca, &options())
        .unwrap()
        .unwrap();
    let mutating = mcr_webhook::mutating_configuration(&webhooks, "https://x", &ca, &options())
        .unwrap()
        .unwrap();
    let mut names: Vec<String> = validating
        .webhooks
        .unwrap()
        .into_iter()
        .map(|h| h.name)
        .chain(mutating.webhooks.unwrap().into_iter().map(|h| h.name))
        .collect();
    for name in &names {
        let (label, suffix) = name.split_once('.').unwrap();
        assert_eq!(suffix, NAME, "{name}");
        assert!(label.len() <= 63, "{label} has {} characters", label.len());
        assert!(
            label.starts_with("validate-controlplane-cluster-x-k8s-io-v1beta1-kubeadm")
                || label.starts_with("mutate-controlplane-cluster-x-k8s-io-v1beta1-kubeadm"),
            "the name keeps a readable prefix: {label}"
        );
        assert!(
            label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-'),
            "{label} is not a DNS label"
        );
    }
    let all = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all, "webhook names collide: {names:?}");
    // Stable: the same path gives the same name whatever the URL (every replica, every
    // member); the exact form is pinned in the test above.
    let again = mcr_webhook::validating_configuration(&webhooks, "https://y", &ca, &options())
        .unwrap()
        .unwrap();
    let first = &again.webhooks.unwrap()[0].name;
    assert!(names.contains(first));
}

#[tokio::test]
async fn options_that_would_make_invalid_webhook_names_are_refused_when_the_writer_is_built() {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    // A valid object name (a DNS subdomain of 250 characters), but the webhooks' names,
    // `<label>.<name>`, would pass kube-apiserver's 253: every write would be refused (422).
    let name = format!(
        "{}.{}.{}.{}.example.com",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(46)
    );
    assert_eq!(name.len(), 250);
    let err = MemberConfigurations::new(
        webhooks.clone(),
        "https://x",
        b"ca".to_vec(),
        ConfigOptions::new(name.clone()),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("has 250 characters"), "{err}");
    assert!(err.contains("at most 189"), "{err}");
    let err = mcr_webhook::validating_configuration(
        &webhooks,
        "https://x",
        b"ca",
        &ConfigOptions::new(name),
    )
    .unwrap_err();
    assert!(err.to_string().contains("at most 189"), "{err}");
}

/// The caBundle of both configurations in `client`'s cluster, if both are there.
async fn ca_bundles(client: &Client) -> Option<(Vec<u8>, Vec<u8>)> {
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(NAME)
        .await
        .ok()??;
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(NAME)
        .await
        .ok()??;
    let ca = |c: &k8s_openapi::api::admissionregistration::v1::WebhookClientConfig| {
        c.ca_bundle
            .as_ref()
            .map(|b| b.0.clone())
            .unwrap_or_default()
    };
    Some((
        ca(&validating.webhooks?.first()?.client_config),
        ca(&mutating.webhooks?.first()?.client_config),
    ))
}

async fn every_member_trusts(env: &Env, bundle: &str, what: &str) {
    for member in env.fleet.clusters() {
        let client = member.client();
        let want = bundle.as_bytes().to_vec();
        eventually_async(&format!("{}: {what}", member.name()), WAIT, || {
            let (client, want) = (client.clone(), want.clone());
            async move { ca_bundles(&client).await == Some((want.clone(), want)) }
        })
        .await;
    }
}

fn replace_file(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn a_rotated_ca_bundle_reaches_every_member_without_a_restart() {
    let env = Env::start_named("member", 2).await;
    for member in env.fleet.clusters() {
        admission_types(&member.client()).await;
    }
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let (old, new) = (common::Pki::new(), common::Pki::new());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ca.crt");
    replace_file(&path, old.ca_pem.as_bytes());
    let writer = Arc::new(
        MemberConfigurations::new(
            webhooks,
            "https://webhooks.example.test:9443",
            old.ca_pem.clone().into_bytes(),
            options(),
        )
        .unwrap()
        .ca_bundle_file(&path, std::time::Duration::from_millis(50)),
    );
    env.mgr.add(writer.clone()).unwrap();
    let _manager = env.run_engaged().await;
    every_member_trusts(&env, &old.ca_pem, "the first CA").await;

    // A rotation, step 1: trust both CAs (the server still presents the old certificate).
    // Until every member has the new bundle, the statuses must not all say `engaged`: the
    // rotation's next step waits on them.
    let both = format!("{}{}", old.ca_pem, new.ca_pem);
    assert_eq!(
        writer.set_ca_bundle(both.clone().into_bytes()).ok(),
        Some(true)
    );
    let statuses = writer.member_statuses();
    assert!(
        !statuses
            .iter()
            .all(|s| s.state == mcr_core::MemberState::Engaged),
        "a new CA bundle is not written yet, and every member is `engaged`: {statuses:?}"
    );
    replace_file(&path, both.as_bytes());
    every_member_trusts(&env, &both, "both CAs").await;

    // Something that is not a CA bundle is refused, and never written.
    assert!(writer.set_ca_bundle(b"not a certificate".to_vec()).is_err());
    assert!(
        writer
            .set_ca_bundle(b"-----BEGIN CERTIFICATE-----\ntruncated".to_vec())
            .is_err()
    );

    // Step 2, once the server presents the new certificate: the new CA only.
    replace_file(&path, new.ca_pem.as_bytes());
    every_member_trusts(&env, &new.ca_pem, "the new CA only").await;
    assert!(
        writer
            .member_statuses()
            .iter()
            .all(|s| s.state == mcr_core::MemberState::Engaged),
        "{:?}",
        writer.member_statuses()
    );
}

/// A label the rotation test's validator refuses.
const MARKER: &str = "mcr-webhook-test/refuse";
const REFUSAL: &str = "carries the refuse marker";
/// A host route that refuses everything: what the canary configuration calls.
const CANARY: &str = "/canary";
const CANARY_NAME: &str = "canary.webhooks.mcr.test";
const CANARY_LABEL: &str = "mcr-webhook-test/canary";

/// The four phases of a CA rotation, in order.
const PHASES: [&str; 4] = [
    "CA A",
    "trusting A and B",
    "serving from B",
    "trusting B only",
];

/// A member's writes in one phase, by outcome.
#[derive(Debug, Default)]
struct Counts {
    /// Valid writes admitted.
    admitted: usize,
    /// Marked writes refused by the validator.
    refused: usize,
    /// Valid writes refused by the validator's answer.
    wrongly_refused: Vec<String>,
    /// Marked writes admitted: not validated.
    unvalidated: Vec<String>,
    /// Writes refused because the webhook call failed (the `Fail` policy decided).
    failed_calls: Vec<String>,
    /// Anything else.
    other: Vec<String>,
}

impl Counts {
    fn total(&self) -> usize {
        self.admitted
            + self.refused
            + self.wrongly_refused.len()
            + self.unvalidated.len()
            + self.failed_calls.len()
            + self.other.len()
    }
}

/// Every member's writes, by (member, phase).
type Tally = parking_lot::Mutex<BTreeMap<(String, usize), Counts>>;

/// How a member writes: through its kube-apiserver (real control planes), or, on the emulator
/// (which calls no webhook), as kube-apiserver would on a new connection: read the member's
/// configuration, and send the review to its URL over a new connection trusting exactly its
/// caBundle. A new connection for every review is the strictest case: each checks the
/// certificate of the moment against the bundle of the moment.
enum Writer {
    Apiserver(Api<ConfigMap>),
    ByHand(Api<ValidatingWebhookConfiguration>),
}

impl Writer {
    /// `Ok` admitted; `Err` refused with its message, starting with "failed calling webhook"
    /// when the call failed.
    async fn write(&mut self, cm: &ConfigMap) -> Result<(), String> {
        let bound = std::time::Duration::from_secs(30);
        match self {
            Writer::Apiserver(api) => {
                match tokio::time::timeout(bound, api.create(&PostParams::default(), cm)).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(kube::Error::Api(status))) => Err(status.message),
                    Ok(Err(other)) => Err(format!("(not an API answer) {other}")),
                    Err(_) => Err(format!("(not an API answer) none within {bound:?}")),
                }
            }
            Writer::ByHand(configs) => {
                let config = match configs.get_opt(NAME).await {
                    Ok(config) => config,
                    Err(err) => return Err(format!("(not an API answer) {err}")),
                };
                // No configuration: the write is admitted unchecked.
                let Some(hook) = config
                    .and_then(|c| c.webhooks)
                    .and_then(|w| w.into_iter().next())
                else {
                    return Ok(());
                };
                let url = hook.client_config.url.unwrap_or_default();
                let bundle = hook
                    .client_config
                    .ca_bundle
                    .map(|b| b.0)
                    .unwrap_or_default();
                let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
                let addr: std::net::SocketAddr = uri
                    .authority()
                    .map(|a| a.as_str())
                    .unwrap_or_default()
                    .parse()
                    .map_err(|e| format!("{url}: {e}"))?;
                let failed = |err: &(dyn std::error::Error + 'static)| {
                    format!(
                        "failed calling webhook {url}: {}",
                        mcr_core::ErrorChain(err)
                    )
                };
                let review = mcr_webhook::testing::admission_review("w", "CREATE", cm);
                let call = async {
                    let mut client = mcr_webhook::testing::ReviewClient::connect(addr, &bundle)
                        .await
                        .map_err(|e| failed(&e))?;
                    client
                        .post(uri.path(), &review)
                        .await
                        .map_err(|e| failed(&e))
                };
                match tokio::time::timeout(bound, call).await {
                    Ok(Ok((200, answer))) if answer["response"]["allowed"] == true => Ok(()),
                    Ok(Ok((200, answer))) => Err(answer["response"]["status"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()),
                    Ok(Ok((status, answer))) => Err(format!(
                        "failed calling webhook {url}: HTTP {status}: {answer}"
                    )),
                    Ok(Err(err)) => Err(err),
                    Err(_) => Err(format!(
                        "failed calling webhook {url}: no answer within {bound:?}"
                    )),
                }
            }
        }
    }
}

/// Writes ConfigMaps into `member` until `stop` (and not while `paused`), every other one
/// marked, counting each outcome under the phase it ended in.
async fn keep_writing(
    mut writer: Writer,
    member: String,
    phase: Arc<std::sync::atomic::AtomicUsize>,
    tally: Arc<Tally>,
    mut paused: tokio::sync::watch::Receiver<bool>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut i = 0u32;
    while !stop.is_cancelled() {
        if paused.wait_for(|paused| !paused).await.is_err() {
            return;
        }
        i += 1;
        let marked = i.is_multiple_of(2);
        let mut cm = cm(&format!("w-{i}"), "1");
        if marked {
            cm.metadata
                .labels
                .get_or_insert_default()
                .insert(MARKER.into(), "yes".into());
        }
        let outcome = writer.write(&cm).await;
        let now = phase.load(std::sync::atomic::Ordering::SeqCst);
        let what = format!(
            "{member} w-{i} ({}, {})",
            if marked { "marked" } else { "valid" },
            PHASES[now]
        );
        let mut tally = tally.lock();
        let counts = tally.entry((member.clone(), now)).or_default();
        match outcome {
            Ok(()) if marked => counts.unvalidated.push(what),
            Ok(()) => counts.admitted += 1,
            Err(m) if m.contains(REFUSAL) && marked => counts.refused += 1,
            Err(m) if m.contains(REFUSAL) => counts.wrongly_refused.push(format!("{what}: {m}")),
            Err(m) if m.contains("failed calling webhook") => {
                counts.failed_calls.push(format!("{what}: {m}"));
            }
            Err(m) => counts.other.push(format!("{what}: {m}")),
        }
    }
}

/// The test's canary configuration in a member: calls [`CANARY`] (which refuses) for
/// ConfigMaps labelled `{CANARY_LABEL}: {step}`.
fn canary(base: &str, ca: &[u8], step: usize) -> ValidatingWebhookConfiguration {
    use k8s_openapi::{
        ByteString,
        api::admissionregistration::v1::{
            RuleWithOperations, ValidatingWebhook, WebhookClientConfig,
        },
    };
    ValidatingWebhookConfiguration {
        metadata: kube::api::ObjectMeta {
            name: Some(CANARY_NAME.into()),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: CANARY_NAME.into(),
            client_config: WebhookClientConfig {
                url: Some(format!("{base}{CANARY}")),
                ca_bundle: Some(ByteString(ca.to_vec())),
                service: None,
            },
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![String::new()]),
                api_versions: Some(vec!["v1".into()]),
                operations: Some(vec!["CREATE".into()]),
                resources: Some(vec!["configmaps".into()]),
                scope: Some("*".into()),
            }]),
            object_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(CANARY_LABEL.into(), step.to_string())])),
                ..Default::default()
            }),
            failure_policy: Some("Fail".into()),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            ..Default::default()
        }]),
    }
}

/// Waits until every member's apiserver uses its configuration as it is now. The configuration
/// showing a bundle is not enough: kube-apiserver reads webhook configurations through a
/// watch, a moment later. It reads them in the order they were written, so once a canary
/// configuration written after the bundle is in effect (a dry-run ConfigMap it selects is
/// refused by [`CANARY`]), the bundle is too.
async fn apiservers_use_it(env: &Env, base: &str, ca: &[u8], step: usize, what: &str) {
    for member in env.fleet.clusters() {
        let client = member.client();
        let params = kube::api::PatchParams::apply("mcr-webhook-test").force();
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .patch(
                CANARY_NAME,
                &params,
                &kube::api::Patch::Apply(canary(base, ca, step)),
            )
            .await
            .unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        eventually_async(
            &format!("{}'s apiserver to use {what}", member.name()),
            WAIT,
            || {
                let api = api.clone();
                async move {
                    let mut probe = ConfigMap::default();
                    probe.metadata.name = Some(format!("canary-{step}"));
                    probe.metadata.labels =
                        Some(BTreeMap::from([(CANARY_LABEL.into(), step.to_string())]));
                    let dry = PostParams {
                        dry_run: true,
                        ..Default::default()
                    };
                    matches!(api.create(&dry, &probe).await,
                        Err(kube::Error::Api(s)) if s.message.contains("canary"))
                }
            },
        )
        .await;
    }
}

/// Waits until `writer` says every member has `bundle` (the documented condition between
/// the steps of a rotation), then checks that every member's validating configuration trusts
/// exactly that bundle.
async fn every_member_has(env: &Env, writer: &MemberConfigurations, bundle: &str, what: &str) {
    mcr_envtest::wait::eventually(
        &format!("the writer to report {what} written everywhere"),
        WAIT,
        || writer.has_written_ca_bundle(bundle.as_bytes()),
    )
    .await;
    for member in env.fleet.clusters() {
        let written = Api::<ValidatingWebhookConfiguration>::all(member.client())
            .get(NAME)
            .await
            .unwrap()
            .webhooks
            .and_then(|w| w.into_iter().next())
            .and_then(|h| h.client_config.ca_bundle)
            .map(|b| b.0);
        assert_eq!(
            written.as_deref(),
            Some(bundle.as_bytes()),
            "{}: the writer reports {what} written, the configuration holds another bundle",
            member.name()
        );
    }
}

/// A CA rotation in the documented order while every member writes: its four phases (serving
/// from CA A; trusting A and B; serving from B; trusting B only) each see writes over the
/// connections already open and, after they are drained, over new ones (new TLS handshakes
/// against the bundle of the moment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_rotation_refuses_no_write_and_fails_no_call() {
    let real = mcr_envtest::backend().is_real();
    let env = Env::start_named("member", 2).await;
    for member in env.fleet.clusters() {
        admission_types(&member.client()).await;
    }
    let webhooks = Webhooks::new(&env.mgr);
    webhooks
        .for_::<ConfigMap>()
        .with_review_validator(|req| async move {
            let marked = req
                .object
                .as_ref()
                .and_then(|cm| cm.metadata.labels.as_ref())
                .is_some_and(|l| l.contains_key(MARKER));
            if marked {
                Err(format!("{} {REFUSAL} (cluster {})", req.name, req.cluster_name()).into())
            } else {
                Ok(())
            }
        })
        .register()
        .unwrap();
    webhooks
        .admission::<ConfigMap, _, _>(CANARY, |req| async move {
            kube::core::admission::AdmissionResponse::from(&*req).deny("canary")
        })
        .unwrap();
    // The server presents a certificate from CA A, and closes a connection idle for 1 s (so
    // the test can drain the apiservers' connections by pausing the writers). The members
    // call it through a relay that counts connections, and trust the bundle in a file.
    let mut server_options = ServerOptions::default();
    server_options.certificate_poll_interval = std::time::Duration::from_secs(1);
    server_options.idle_timeout = std::time::Duration::from_secs(1);
    let s = serve(webhooks.clone(), server_options).await;
    let frontend = common::Frontend::start().await;
    frontend.set(&[s.addr]);
    let (a, b) = (&s.pki, common::Pki::new());
    let base = format!("https://{}", frontend.addr);
    let both = format!("{}{}", a.ca_pem, b.ca_pem);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ca.crt");
    replace_file(&path, a.ca_pem.as_bytes());
    let writer = Arc::new(
        MemberConfigurations::new(
            webhooks,
            base.clone(),
            a.ca_pem.clone().into_bytes(),
            options(),
        )
        .unwrap()
        .ca_bundle_file(&path, std::time::Duration::from_millis(100)),
    );
    env.mgr.add(writer.clone()).unwrap();
    let _manager = env.run_engaged().await;
    every_member_has(&env, &writer, &a.ca_pem, "CA A").await;
    if real {
        apiservers_use_it(&env, &base, both.as_bytes(), 0, "CA A").await;
    }

    // A writer per member, writing throughout.
    let started = std::time::Instant::now();
    let phase = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tally: Arc<Tally> = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let (pause, paused) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for member in env.fleet.clusters() {
        let writer = if real {
            Writer::Apiserver(Api::namespaced(member.client(), "default"))
        } else {
            Writer::ByHand(Api::all(member.client()))
        };
        tasks.push(tokio::spawn(keep_writing(
            writer,
            member.name().to_owned(),
            phase.clone(),
            tally.clone(),
            paused.clone(),
            stop.clone(),
        )));
    }
    // Each phase lasts until every member made PER_PHASE writes over the connections open
    // when it began, and (real control planes: the emulator's writer opens a new connection
    // for every write) PER_PHASE more over new connections, once the open ones are drained.
    const PER_PHASE: usize = 20;
    let members: Vec<String> = env.fleet.names().iter().map(|n| n.to_string()).collect();
    let progress = |now: usize, writes: usize| {
        let (tally, members) = (tally.clone(), members.clone());
        async move {
            mcr_envtest::wait::eventually(
                &format!("{writes} writes per member while {}", PHASES[now]),
                WAIT,
                || {
                    let tally = tally.lock();
                    members.iter().all(|m| {
                        tally
                            .get(&(m.clone(), now))
                            .is_some_and(|c| c.total() >= writes)
                    })
                },
            )
            .await;
        }
    };
    let mut new_connections = [0usize; 4];
    let mut run_phase = async |now: usize| {
        progress(now, PER_PHASE).await;
        if real {
            pause.send_replace(true);
            mcr_envtest::wait::eventually(
                &format!("the apiservers' connections to close while {}", PHASES[now]),
                WAIT,
                || frontend.open() == 0,
            )
            .await;
            let before = frontend.accepted();
            pause.send_replace(false);
            progress(now, 2 * PER_PHASE).await;
            new_connections[now] = frontend.accepted() - before;
        }
    };
    run_phase(0).await;

    // 1. Trust both CAs, and wait until every member has the bundle (and, on real control
    // planes, its apiserver uses it).
    phase.store(1, std::sync::atomic::Ordering::SeqCst);
    replace_file(&path, both.as_bytes());
    every_member_has(&env, &writer, &both, "CAs A and B").await;
    if real {
        apiservers_use_it(&env, &base, both.as_bytes(), 1, "CAs A and B").await;
    }
    run_phase(1).await;

    // 2. Switch the serving certificate to one from CA B; wait until new connections get it.
    phase.store(2, std::sync::atomic::Ordering::SeqCst);
    let leaf_b = b.issue_into(a.dir.path(), "serving-from-b");
    eventually_async("the server to present B's certificate", WAIT, || {
        let (addr, ca) = (s.addr, b.ca_pem.clone());
        let leaf_b = leaf_b.clone();
        async move {
            common::connect_as(addr, &ca, None)
                .await
                .is_ok_and(|c| c.peer() == leaf_b)
        }
    })
    .await;
    run_phase(2).await;

    // 3. Trust only B.
    phase.store(3, std::sync::atomic::Ordering::SeqCst);
    replace_file(&path, b.ca_pem.as_bytes());
    every_member_has(&env, &writer, &b.ca_pem, "CA B only").await;
    if real {
        apiservers_use_it(&env, &base, b.ca_pem.as_bytes(), 3, "CA B only").await;
    }
    run_phase(3).await;
    stop.cancel();
    for task in tasks {
        task.await.unwrap();
    }
    let took = started.elapsed();

    // A client trusting only A is refused now: the rotation did happen.
    assert!(
        common::connect_as(s.addr, &a.ca_pem, None).await.is_err(),
        "the server still presents a certificate from CA A"
    );
    let tally = std::mem::take(&mut *tally.lock());
    let (mut admitted, mut refused) = (0, 0);
    let mut problems = Vec::new();
    for ((member, now), c) in &tally {
        eprintln!(
            "{member}, {}: {} writes: {} valid admitted, {} marked refused, {} valid refused, {} marked admitted, {} failed calls, {} other",
            PHASES[*now],
            c.total(),
            c.admitted,
            c.refused,
            c.wrongly_refused.len(),
            c.unvalidated.len(),
            c.failed_calls.len(),
            c.other.len()
        );
        admitted += c.admitted;
        refused += c.refused;
        problems.extend(
            c.wrongly_refused
                .iter()
                .map(|p| format!("valid refused: {p}")),
        );
        problems.extend(
            c.unvalidated
                .iter()
                .map(|p| format!("marked admitted: {p}")),
        );
        problems.extend(c.failed_calls.iter().map(|p| format!("failed call: {p}")));
        problems.extend(c.other.iter().map(|p| format!("other: {p}")));
    }
    eprintln!(
        "rotation on {}: {} writes in {took:?} ({admitted} valid admitted, {refused} marked refused, {} problems); new connections per phase after draining: {new_connections:?}",
        if real {
            "real control planes"
        } else {
            "the emulator"
        },
        admitted + refused + problems.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "{problems:#?}");
    for member in &members {
        for (now, name) in PHASES.iter().enumerate() {
            let c = tally.get(&(member.clone(), now));
            assert!(
                c.is_some_and(|c| c.admitted > 0 && c.refused > 0),
                "{member} made no progress while {name}: {c:?}"
            );
        }
    }
    if real {
        assert!(
            new_connections.iter().all(|&n| n > 0),
            "a phase saw no new connection: {new_connections:?}"
        );
    }
}
