//! Caller authentication for member routes: with `ServerOptions::client_auth`, a member's
//! route answers only a caller whose client certificate (signed by the client CA) names that
//! member, so member A's apiserver cannot borrow B's `Cluster` by calling B's route.

mod common;

use std::{collections::BTreeMap, sync::Arc};

use common::{Env, Pki, WAIT, body, configmap_webhooks, connect_as, fixture, labelled, serve};
use k8s_openapi::{
    api::{admissionregistration::v1::ValidatingWebhookConfiguration, core::v1::ConfigMap},
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{Api, api::PostParams};
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use mcr_envtest::{TestCluster, wait::eventually_async};
use mcr_manager::Manager;
use mcr_webhook::{ClientAuth, ConfigOptions, MemberConfigurations, ServerOptions, Webhooks};
use tokio_util::sync::CancellationToken;

const VALIDATE: &str = "/validate--v1-configmap";

#[tokio::test]
async fn a_member_route_answers_only_that_members_client_certificate() {
    let env = Env::start_named("member", 2).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let _manager = env.run_engaged().await;
    let clients = Pki::new();
    let mut options = ServerOptions::default();
    options.client_auth = Some(ClientAuth::from_ca_pem(clients.ca_pem.as_bytes()).unwrap());
    let s = serve(webhooks, options).await;
    let member1 = clients.issue_client("member-1");
    let member2 = clients.issue_client("member-2");
    let review = body(&fixture("configmap-create.json"));

    // member-1's apiserver on its own route: answered.
    let mut conn = connect_as(s.addr, &s.pki.ca_pem, Some(&member1))
        .await
        .unwrap();
    let (status, answer) = conn
        .post(&format!("/clusters/member-1{VALIDATE}"), review.clone())
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");

    // member-1's apiserver on member-2's route: refused before any handler runs (a failed
    // call, never an answer), and so is a caller with no certificate.
    let (status, answer) = conn
        .post(&format!("/clusters/member-2{VALIDATE}"), review.clone())
        .await;
    assert_eq!(status, 403, "member-1 called member-2's route: {answer}");
    let mut anonymous = connect_as(s.addr, &s.pki.ca_pem, None).await.unwrap();
    let (status, _) = anonymous
        .post(&format!("/clusters/member-1{VALIDATE}"), review.clone())
        .await;
    assert_eq!(
        status, 403,
        "a caller without a certificate called a member route"
    );

    // member-2's own certificate on member-2's route: answered.
    let mut conn = connect_as(s.addr, &s.pki.ca_pem, Some(&member2))
        .await
        .unwrap();
    let (status, answer) = conn
        .post(&format!("/clusters/member-2{VALIDATE}"), review.clone())
        .await;
    assert_eq!(status, 200, "{answer}");

    // A member certificate on the host's route: refused (the host is not a member).
    let (status, _) = conn.post(VALIDATE, review.clone()).await;
    assert_eq!(
        status, 403,
        "a member's certificate called the host's route"
    );

    // Without a host identity, the host's route needs no certificate.
    let (status, answer) = anonymous.post(VALIDATE, review.clone()).await;
    assert_eq!(status, 200, "{answer}");

    // A certificate from another CA does not get through the handshake.
    let stranger = Pki::new().issue_client("member-1");
    let refused = async {
        let mut conn = connect_as(s.addr, &s.pki.ca_pem, Some(&stranger)).await?;
        // TLS 1.3 reports a refused client certificate on the first read.
        conn.0
            .request(
                "POST",
                &format!("/clusters/member-1{VALIDATE}"),
                "application/json",
                review.clone(),
            )
            .await
    }
    .await;
    assert!(
        refused.is_err(),
        "a certificate from another CA was accepted"
    );

    // With a host identity, the host's routes answer only that certificate.
    let mut options = ServerOptions::default();
    options.client_auth = Some(
        ClientAuth::from_ca_pem(clients.ca_pem.as_bytes())
            .unwrap()
            .host_identity("host-apiserver"),
    );
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let s = serve(webhooks, options).await;
    let mut anonymous = connect_as(s.addr, &s.pki.ca_pem, None).await.unwrap();
    let (status, _) = anonymous.post(VALIDATE, review.clone()).await;
    assert_eq!(status, 403, "an anonymous caller called the host's route");
    let host = clients.issue_client("host-apiserver");
    let mut conn = connect_as(s.addr, &s.pki.ca_pem, Some(&host))
        .await
        .unwrap();
    let (status, answer) = conn.post(VALIDATE, review.clone()).await;
    assert_eq!(status, 200, "{answer}");
    let (status, _) = conn
        .post(&format!("/clusters/member-1{VALIDATE}"), review)
        .await;
    assert_eq!(
        status, 403,
        "the host's certificate called a member's route"
    );
}

/// Writes, into `dir`, `identity`'s client certificate and key, the kubeconfig giving them to
/// every webhook (user `*`), and the `AdmissionConfiguration` naming that kubeconfig for both
/// webhook admission plugins; returns the path of the last.
fn admission_config(dir: &std::path::Path, identity: &(String, String)) -> std::path::PathBuf {
    let (cert, key) = (dir.join("client.crt"), dir.join("client.key"));
    std::fs::write(&cert, &identity.0).unwrap();
    std::fs::write(&key, &identity.1).unwrap();
    let kubeconfig = dir.join("webhooks.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: '*'\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let plugin = |name: &str| {
        format!(
            "- name: {name}\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        )
    };
    let path = dir.join("admission.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{}{}",
            plugin("ValidatingAdmissionWebhook"),
            plugin("MutatingAdmissionWebhook")
        ),
    )
    .unwrap();
    path
}

/// The message of a refused create.
async fn refusal(api: &Api<ConfigMap>, params: &PostParams, cm: &ConfigMap) -> Option<String> {
    match api.create(params, cm).await {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some(status.message),
        Err(other) => Some(other.to_string()),
    }
}

#[tokio::test]
async fn real_apiservers_present_their_members_certificate_and_cannot_borrow_another_members_route()
{
    if !mcr_envtest::backend().is_real() {
        let line = "SKIPPED on the emulator: real_apiservers_present_their_members_certificate_and_cannot_borrow_another_members_route: the emulator does not call admission webhooks (run with MCR_ENVTEST=real)\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return;
    }
    common::init_tracing();
    const LABEL: &str = "mcr-webhook-auth";
    // Each member's kube-apiserver presents a client certificate naming the member, signed by
    // the CA the webhook server trusts for callers.
    let clients = Pki::new();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let configs = [
        admission_config(dirs[0].path(), &clients.issue_client("member-1")),
        admission_config(dirs[1].path(), &clients.issue_client("member-2")),
    ];
    let (host, member1, member2) = tokio::join!(
        TestCluster::start("host"),
        TestCluster::start_with_admission_config("member-1", &configs[0]),
        TestCluster::start_with_admission_config("member-2", &configs[1]),
    );
    let (host, member1, member2) = (host.unwrap(), member1.unwrap(), member2.unwrap());
    let provider = Arc::new(ClustersProvider::new());
    for member in [&member1, &member2] {
        provider
            .add(Cluster::new(member.name(), member.client()))
            .await
            .unwrap();
    }
    let mgr = Manager::new(host.client(), Some(provider));
    let webhooks = Webhooks::new(&mgr);
    configmap_webhooks(&webhooks);
    let mut options = ServerOptions::default();
    options.client_auth = Some(ClientAuth::from_ca_pem(clients.ca_pem.as_bytes()).unwrap());
    let s = serve(webhooks.clone(), options).await;
    let base = format!("https://{}", s.addr);
    let mut config = ConfigOptions::new("configmaps.auth.mcr.test");
    config.object_selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(LABEL.to_string(), "yes".to_string())])),
        ..Default::default()
    });
    mgr.add(Arc::new(
        MemberConfigurations::new(
            webhooks.clone(),
            base.clone(),
            s.pki.ca_pem.clone().into_bytes(),
            config,
        )
        .unwrap(),
    ))
    .unwrap();
    let token = CancellationToken::new();
    let _run = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });
    let _stop = token.drop_guard();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };

    // Each member's apiserver, presenting its own certificate, is answered on its own route.
    for member in [&member1, &member2] {
        let name = member.name();
        let api: Api<ConfigMap> = Api::namespaced(member.client(), "default");
        let reason = format!("data.size must be a number, not \"large\" (cluster {name})");
        eventually_async(
            &format!("{name}'s apiserver to be answered by the webhook"),
            WAIT,
            || {
                let (api, dry, reason) = (api.clone(), dry.clone(), reason.clone());
                async move {
                    refusal(&api, &dry, &labelled("probe", LABEL, "large"))
                        .await
                        .is_some_and(|m| m.contains(&reason))
                }
            },
        )
        .await;
        let created = api
            .create(&PostParams::default(), &labelled("valid", LABEL, "3"))
            .await
            .unwrap();
        assert_eq!(
            created.data.unwrap().get("owner").map(String::as_str),
            Some(name),
            "{name}: the defaulter ran for {name}"
        );
    }

    // An administrator of member-1 points a webhook of member-1 at member-2's route: member-1's
    // apiserver presents member-1's certificate there and is refused (403) before any handler
    // runs, so its writes are decided by the failurePolicy (Fail: refused) and never by
    // member-2's handler with member-2's Cluster.
    let mut borrowing = ConfigOptions::new("borrowed.auth.mcr.test");
    borrowing.object_selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([("borrow".to_string(), "yes".to_string())])),
        ..Default::default()
    });
    let borrowed = mcr_webhook::validating_configuration(
        &webhooks,
        &format!("{base}/clusters/member-2"),
        s.pki.ca_pem.as_bytes(),
        &borrowing,
    )
    .unwrap()
    .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(member1.client())
        .create(&PostParams::default(), &borrowed)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(member1.client(), "default");
    eventually_async(
        "member-1's apiserver to call member-2's route",
        WAIT,
        || {
            let (api, dry) = (api.clone(), dry.clone());
            async move {
                refusal(&api, &dry, &labelled("borrow", "borrow", "large"))
                    .await
                    .is_some()
            }
        },
    )
    .await;
    let message = refusal(&api, &dry, &labelled("borrow", "borrow", "large"))
        .await
        .unwrap_or_default();
    assert!(
        message.contains("failed calling webhook") && !message.contains("cluster member-2"),
        "member-1's apiserver was answered on member-2's route: {message}"
    );
    // A valid object is refused as well: the call failed, no handler decided.
    let valid = refusal(&api, &dry, &labelled("borrow", "borrow", "3")).await;
    assert!(
        valid
            .as_deref()
            .is_some_and(|m| m.contains("failed calling webhook")),
        "{valid:?}"
    );
    eprintln!("member-1 on member-2's route: {message}");
}

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

/// A converter of the object alone: stamps the version it converted to into `spec`.
fn stamp(mut obj: serde_json::Value, to: &str) -> Result<serde_json::Value, String> {
    obj["apiVersion"] = to.into();
    obj["spec"]["convertedTo"] = to.rsplit('/').next().unwrap_or(to).into();
    Ok(obj)
}

fn conversion_review() -> bytes::Bytes {
    body(&fixture("conversion-review.json"))
}

#[tokio::test]
async fn conversion_routes_take_callers_without_a_certificate_and_run_only_converters_of_the_object()
 {
    let env = Env::start_named("member", 1).await;
    let _manager = env.run_engaged().await;
    let clients = Pki::new();
    let mut options = ServerOptions::default();
    options.client_auth = Some(
        ClientAuth::from_ca_pem(clients.ca_pem.as_bytes())
            .unwrap()
            .host_identity("host-apiserver"),
    );
    let webhooks = Webhooks::new(&env.mgr);
    webhooks
        .for_::<Widget>()
        .with_review_converter(stamp)
        .register()
        .unwrap();
    let s = serve(webhooks, options.clone()).await;

    // kube-apiserver calls conversion webhooks without a client certificate: a member's
    // conversion route, and the host's (even with a host identity), answer such a caller.
    let mut anonymous = connect_as(s.addr, &s.pki.ca_pem, None).await.unwrap();
    for path in ["/clusters/member-1/convert", "/convert"] {
        let (status, answer) = anonymous.post(path, conversion_review()).await;
        assert_eq!(status, 200, "{path}: {answer}");
        assert_eq!(
            answer["response"]["result"]["status"], "Success",
            "{answer}"
        );
        assert_eq!(
            answer["response"]["convertedObjects"][0]["spec"]["convertedTo"], "v2",
            "{answer}"
        );
    }
    // A certificate names its caller: another member's is refused, as on every route.
    let member2 = clients.issue_client("member-2");
    let mut conn = connect_as(s.addr, &s.pki.ca_pem, Some(&member2))
        .await
        .unwrap();
    let (status, _) = conn
        .post("/clusters/member-1/convert", conversion_review())
        .await;
    assert_eq!(
        status, 403,
        "member-2's certificate on member-1's conversion route"
    );
    // The admission routes still need the member's certificate.
    let (status, _) = anonymous
        .post(
            &format!("/clusters/member-1{VALIDATE}"),
            body(&fixture("configmap-create.json")),
        )
        .await;
    assert_eq!(status, 404, "no admission webhook is registered here");

    // A converter handed the member's cluster is not run for a caller who could be anyone.
    let webhooks = Webhooks::new(&env.mgr);
    webhooks
        .for_::<Widget>()
        .with_converter(|obj, to, _cluster| stamp(obj, to))
        .register()
        .unwrap();
    let s = serve(webhooks, options).await;
    let mut anonymous = connect_as(s.addr, &s.pki.ca_pem, None).await.unwrap();
    let (status, answer) = anonymous
        .post("/clusters/member-1/convert", conversion_review())
        .await;
    assert_eq!(status, 403, "{answer}");
    let message = answer["response"]["result"]["message"].as_str().unwrap();
    assert!(message.contains("with_review_converter"), "{message}");
    let member1 = clients.issue_client("member-1");
    let mut conn = connect_as(s.addr, &s.pki.ca_pem, Some(&member1))
        .await
        .unwrap();
    let (status, answer) = conn
        .post("/clusters/member-1/convert", conversion_review())
        .await;
    assert_eq!(status, 200, "the member's own certificate: {answer}");
}

#[tokio::test]
async fn a_real_apiserver_converts_through_a_member_route_with_client_authentication_on() {
    if !mcr_envtest::backend().is_real() {
        let line = "SKIPPED on the emulator: a_real_apiserver_converts_through_a_member_route_with_client_authentication_on: the emulator does not call conversion webhooks (run with MCR_ENVTEST=real)\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return;
    }
    common::init_tracing();
    // The hardening of the security chapter: the member's apiserver presents its certificate
    // to admission webhooks, and the server authenticates callers.
    let clients = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let admission = admission_config(dir.path(), &clients.issue_client("member-1"));
    let member = TestCluster::start_with_admission_config("member-1", &admission)
        .await
        .unwrap();
    let provider = Arc::new(ClustersProvider::new());
    provider
        .add(Cluster::new(member.name(), member.client()))
        .await
        .unwrap();
    let mgr = Manager::new(member.client(), Some(provider));
    let webhooks = Webhooks::new(&mgr);
    webhooks
        .for_::<Widget>()
        .with_review_converter(stamp)
        .register()
        .unwrap();
    let mut options = ServerOptions::default();
    options.client_auth = Some(ClientAuth::from_ca_pem(clients.ca_pem.as_bytes()).unwrap());
    let s = serve(webhooks, options).await;
    let token = CancellationToken::new();
    let _run = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });
    let _stop = token.drop_guard();

    // Widgets stored as v1, served as v2 through the member's conversion route.
    let schema = serde_json::json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": schema},
                    {"name": "v2", "served": true, "storage": false, "schema": schema}
                ],
                "conversion": {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {
                        "url": format!("https://{}/clusters/member-1/convert", s.addr),
                        "caBundle": k8s_openapi::ByteString(s.pki.ca_pem.clone().into_bytes()),
                    }
                }}
            }
        }))
        .unwrap();
    mcr_test_support::install_crd(&member.client(), &crd).await;
    let v1: Api<Widget> = Api::namespaced(member.client(), "default");
    let mut widget = Widget::new("w1", WidgetSpec { size: 3 });
    widget.metadata.namespace = Some("default".into());
    v1.create(&PostParams::default(), &widget).await.unwrap();
    let v2 = kube::api::ApiResource {
        group: "example.com".into(),
        version: "v2".into(),
        api_version: "example.com/v2".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let v2: Api<kube::api::DynamicObject> = Api::namespaced_with(member.client(), "default", &v2);
    let read = v2.get("w1").await;
    let read = read.unwrap_or_else(|err| panic!("reading the widget as v2: {err}"));
    assert_eq!(read.data["spec"]["convertedTo"], "v2", "{:?}", read.data);
    assert_eq!(read.data["spec"]["size"], 3);
}
