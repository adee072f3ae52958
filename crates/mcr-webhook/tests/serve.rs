//! The webhook server over HTTPS, answering AdmissionReview / ConversionReview bodies shaped as
//! kube-apiserver sends them (tests/fixtures), for the host and for members.

mod common;

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use common::{Env, Running, body, configmap_webhooks, connect, fixture, serve};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, CustomResource,
    api::{ObjectMeta, PostParams},
    core::admission::AdmissionResponse,
};
use mcr_webhook::{ServerOptions, Webhooks};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const VALIDATE: &str = "/validate--v1-configmap";
const MUTATE: &str = "/mutate--v1-configmap";

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug)]
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

fn widget_webhooks(webhooks: &Webhooks) {
    webhooks
        .for_::<Widget>()
        .with_converter(|mut obj, to, _cluster| {
            if to != "example.com/v2" {
                return Err(format!("cannot convert to {to}"));
            }
            let size = obj["spec"]["size"].as_i64().ok_or("spec.size is missing")?;
            obj["spec"] = json!({ "dimensions": { "size": size } });
            obj["apiVersion"] = to.into();
            Ok(obj)
        })
        .register()
        .unwrap();
}

async fn host_only() -> (Env, Running) {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    widget_webhooks(&webhooks);
    let running = serve(webhooks, ServerOptions::default()).await;
    (env, running)
}

fn patch_of(response: &Value) -> Value {
    let raw: Vec<u8> = match &response["patch"] {
        Value::Array(bytes) => bytes.iter().map(|b| b.as_u64().unwrap() as u8).collect(),
        other => panic!("patch is not a byte array: {other}"),
    };
    serde_json::from_slice(&raw).unwrap()
}

#[tokio::test]
async fn a_defaulter_answers_with_a_json_patch() {
    let (_env, s) = host_only().await;
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let (status, review) = conn
        .post(MUTATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200, "{review}");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let response = &review["response"];
    assert_eq!(response["uid"], "0df28fbd-5f5f-4f6e-a2c2-1c3a4a9c0e01");
    assert_eq!(response["allowed"], true, "{review}");
    assert_eq!(response["patchType"], "JSONPatch");
    assert_eq!(
        patch_of(response),
        json!([{ "op": "add", "path": "/data/owner", "value": "team-a" }])
    );

    // An object that already has its defaults: allowed, no patch.
    let (_, review) = conn
        .post(MUTATE, body(&fixture("configmap-update.json")))
        .await;
    assert_eq!(review["response"]["allowed"], true, "{review}");
    assert!(review["response"].get("patch").is_none(), "{review}");

    // DELETE carries no object: allowed unchanged.
    let (_, review) = conn
        .post(MUTATE, body(&fixture("configmap-delete.json")))
        .await;
    assert_eq!(review["response"]["allowed"], true, "{review}");
    assert_eq!(
        review["response"]["uid"],
        "c4d5e6f7-0a1b-4c2d-9e3f-4a5b6c7d8e04"
    );
    assert!(review["response"].get("patch").is_none(), "{review}");
}

#[tokio::test]
async fn a_validator_allows_and_refuses_with_the_uid_and_a_message() {
    let (_env, s) = host_only().await;
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let (status, review) = conn
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(review["response"]["allowed"], true, "{review}");

    let (status, review) = conn
        .post(VALIDATE, body(&fixture("configmap-create-invalid.json")))
        .await;
    assert_eq!(status, 200);
    let response = &review["response"];
    assert_eq!(response["uid"], "3b7e1f6a-8c1d-4a55-9d7e-6f0c2b9a7d02");
    assert_eq!(response["allowed"], false, "{review}");
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    assert_eq!(
        response["status"]["message"],
        "data.size must be a number, not \"large\" (cluster <host>)"
    );
}

#[tokio::test]
async fn bad_requests_get_the_review_shape_with_the_uid_when_known() {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    widget_webhooks(&webhooks);
    let mut options = ServerOptions::default();
    options.max_body_bytes = 64 * 1024;
    let s = serve(webhooks, options).await;
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;

    // Not JSON.
    let (status, review) = conn.post(VALIDATE, "{not json").await;
    assert_eq!(status, 200);
    assert_eq!(review["kind"], "AdmissionReview");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["uid"], "");
    assert_eq!(review["response"]["status"]["code"], 400);
    let message = review["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("not an admission.k8s.io/v1 AdmissionReview"),
        "{message}"
    );

    // A review whose object is not a ConfigMap: refused, with its uid.
    let mut wrong = fixture("configmap-create.json");
    wrong["request"]["object"]["data"] = json!(["not", "a", "map"]);
    let (status, review) = conn.post(VALIDATE, body(&wrong)).await;
    assert_eq!(status, 200);
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(
        review["response"]["uid"],
        "0df28fbd-5f5f-4f6e-a2c2-1c3a4a9c0e01"
    );
    assert_eq!(review["response"]["status"]["code"], 400);

    // Not application/json.
    let (status, review) = conn
        .0
        .request(
            "POST",
            VALIDATE,
            "text/plain",
            body(&fixture("configmap-create.json")),
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 400);

    // Too large: refused before parsing, the connection stays usable.
    let mut big = fixture("configmap-create.json");
    big["request"]["object"]["data"]["blob"] = json!("x".repeat(100 * 1024));
    let (status, review) = conn.post(VALIDATE, body(&big)).await;
    assert_eq!(status, 200);
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 413, "{review}");
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let (_, review) = conn
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(review["response"]["allowed"], true, "{review}");

    // Unknown path, wrong method.
    let (status, _) = conn.post("/validate--v1-secret", "{}").await;
    assert_eq!(status, 404);
    let (status, _) = conn
        .0
        .request("GET", VALIDATE, "application/json", Bytes::new())
        .await
        .unwrap();
    assert_eq!(status, 405);
}

#[tokio::test]
async fn a_panicking_handler_answers_500_for_that_request_only() {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    widget_webhooks(&webhooks);
    webhooks
        .admission::<ConfigMap, _, _>("/explode", |req| async move {
            if req.name == "settings" {
                panic!("handler bug");
            }
            AdmissionResponse::from(&*req)
        })
        .unwrap();
    let mut options = ServerOptions::default();
    options.handler_timeout = Duration::from_millis(300);
    webhooks
        .admission::<ConfigMap, _, _>("/hang", |_req| async move {
            std::future::pending::<AdmissionResponse>().await
        })
        .unwrap();
    let s = serve(webhooks, options).await;
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;

    let (status, review) = conn
        .post("/explode", body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 500);
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(
        review["response"]["status"]["message"],
        "the webhook handler panicked"
    );

    // The same connection, the same server: the next request is answered.
    let (status, review) = conn
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(review["response"]["allowed"], true);

    // A handler that never answers: 504 once the handler timeout passes.
    let (status, review) = conn
        .post("/hang", body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 504, "{review}");
    assert_eq!(review["response"]["allowed"], false);
    let (status, _) = conn
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn conversion_converts_every_object_in_order_or_fails_the_review() {
    let (_env, s) = host_only().await;
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let (status, review) = conn
        .post("/convert", body(&fixture("conversion-review.json")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(review["kind"], "ConversionReview");
    let response = &review["response"];
    assert_eq!(response["uid"], "e2f1a0b9-7c6d-4e5f-8a9b-0c1d2e3f4a05");
    assert_eq!(response["result"]["status"], "Success", "{review}");
    let objects = response["convertedObjects"].as_array().unwrap();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0]["metadata"]["name"], "w1");
    assert_eq!(objects[1]["metadata"]["name"], "w2");
    assert_eq!(objects[1]["apiVersion"], "example.com/v2");
    assert_eq!(objects[1]["spec"], json!({ "dimensions": { "size": 5 } }));

    let mut review_in = fixture("conversion-review.json");
    review_in["request"]["desiredAPIVersion"] = json!("example.com/v3");
    let (_, review) = conn.post("/convert", body(&review_in)).await;
    assert_eq!(review["response"]["result"]["status"], "Failure");
    let message = review["response"]["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("cannot convert to example.com/v3"),
        "{message}"
    );

    review_in["request"]["objects"][0]["kind"] = json!("Gadget");
    let (_, review) = conn.post("/convert", body(&review_in)).await;
    let message = review["response"]["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("no converter for kind \"Gadget\""),
        "{message}"
    );
}

#[tokio::test]
async fn member_routes_hand_the_member_to_the_handler_and_fail_for_strangers() {
    let env = Env::start_named("member", 2).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    widget_webhooks(&webhooks);
    env.run_engaged().await;
    let s = serve(webhooks, ServerOptions::default()).await;
    // member-1 blocks the name `settings`; member-2 does not.
    let blocklist = ConfigMap {
        metadata: ObjectMeta {
            name: Some("blocklist".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some([("names".to_string(), "settings".to_string())].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(env.fleet.get("member-1").unwrap().client(), "default")
        .create(&PostParams::default(), &blocklist)
        .await
        .unwrap();

    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let create = body(&fixture("configmap-create.json"));
    let (_, review) = conn
        .post(&format!("/clusters/member-1{VALIDATE}"), create.clone())
        .await;
    assert_eq!(review["response"]["allowed"], false, "{review}");
    assert_eq!(
        review["response"]["status"]["message"],
        "settings is blocked in member-1"
    );
    let (_, review) = conn
        .post(&format!("/clusters/member-2{VALIDATE}"), create.clone())
        .await;
    assert_eq!(review["response"]["allowed"], true, "{review}");
    let (_, review) = conn.post(VALIDATE, create.clone()).await;
    assert_eq!(
        review["response"]["allowed"], true,
        "the host has no blocklist: {review}"
    );

    let (_, review) = conn
        .post(&format!("/clusters/member-2{MUTATE}"), create.clone())
        .await;
    assert_eq!(
        patch_of(&review["response"]),
        json!([{ "op": "add", "path": "/data/owner", "value": "member-2" }])
    );

    let (status, review) = conn
        .post(&format!("/clusters/member-9{VALIDATE}"), create.clone())
        .await;
    // Not served here: the call fails (503) so the failurePolicy decides; never a denial.
    assert_eq!(status, 503, "{review}");
    assert_eq!(
        review["response"]["uid"],
        "0df28fbd-5f5f-4f6e-a2c2-1c3a4a9c0e01"
    );
    assert_eq!(review["response"]["status"]["code"], 503);
    let message = review["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("cluster \"member-9\" is not engaged"),
        "{message}"
    );

    // A member that leaves is refused from then on.
    env.provider.remove(&"member-2".into());
    let fleet = env.mgr.fleet().clone();
    mcr_envtest::wait::eventually("member-2 to leave", common::WAIT, || {
        fleet.get(&"member-2".into()).is_err()
    })
    .await;
    let (status, review) = conn
        .post(&format!("/clusters/member-2{VALIDATE}"), create)
        .await;
    assert_eq!(status, 503, "{review}");
    let _ = &s.server;
}

#[tokio::test]
async fn a_rotated_certificate_reaches_new_connections_and_open_ones_keep_working() {
    let (_env, s) = host_only().await;
    let first = s.server.certificates().generation();
    let mut open = connect(s.addr, &s.pki.ca_pem).await;
    let old_leaf = open.peer().to_vec();

    let new_leaf = s.pki.issue("serving-2");
    let certs = s.server.certificates().clone();
    mcr_envtest::wait::eventually("the new certificate to load", common::WAIT, || {
        certs.generation() > first
    })
    .await;
    let mut fresh = connect(s.addr, &s.pki.ca_pem).await;
    assert!(
        fresh.peer() == new_leaf,
        "a new connection gets the new certificate"
    );
    let (_, review) = fresh
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(review["response"]["allowed"], true);

    // The connection opened before the rotation is still served, on its old session.
    let (status, review) = open
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(review["response"]["allowed"], true);
    assert!(
        open.peer() == old_leaf,
        "the open connection kept its session"
    );

    // A broken file keeps the certificate in use.
    std::fs::write(s.pki.key_path(), b"-----BEGIN PRIVATE KEY-----\nnope\n").unwrap();
    assert!(certs.reload().is_err());
    let fresh = connect(s.addr, &s.pki.ca_pem).await;
    assert!(
        fresh.peer() == new_leaf,
        "a broken key file replaced the certificate"
    );
}

/// Reads until the server closes the stream (EOF or reset), within a deadline 100 times the
/// configured 200 ms, and shorter than hyper's own 30 s header timeout, so only the
/// configured limit can pass it.
async fn closed_by_server(mut stream: impl tokio::io::AsyncRead + Unpin) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept a stalled connection open");
    got
}

#[tokio::test]
async fn stalled_handshakes_and_headers_are_cut_off() {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let mut options = ServerOptions::default();
    options.handshake_timeout = Duration::from_millis(200);
    options.header_read_timeout = Duration::from_millis(200);
    let s = serve(webhooks, options).await;

    // A client that opens TCP and never says hello.
    let tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    closed_by_server(tcp).await;

    // A client that completes TLS, then sends half a request head.
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut s.pki.ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(
        &mut tls,
        b"POST /validate--v1-configmap HTTP/1.1\r\nhost: x\r\n",
    )
    .await
    .unwrap();
    let answer = closed_by_server(tls).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );

    // The server still serves well-behaved clients.
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let (status, _) = conn
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_converter_is_cut_by_the_handler_timeout() {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    // The converter blocks its thread until the test lets it go (drops the sender).
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = std::sync::Mutex::new(held);
    webhooks
        .for_::<Widget>()
        .with_converter(move |mut obj, to, _cluster| {
            let _ = held.lock().map(|rx| rx.recv());
            obj["apiVersion"] = to.into();
            Ok(obj)
        })
        .register()
        .unwrap();
    let mut options = ServerOptions::default();
    options.handler_timeout = Duration::from_millis(300);
    let s = serve(webhooks, options).await;
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    // 100 times the handler timeout: only the handler timeout can answer within it.
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        conn.post("/convert", body(&fixture("conversion-review.json"))),
    )
    .await;
    drop(release);
    let (status, review) =
        answer.expect("a blocking converter held the answer past the handler timeout");
    assert_eq!(status, 504, "{review}");
    assert_eq!(review["kind"], "ConversionReview");

    // Released, the converter answers again.
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let (status, review) = conn
        .post("/convert", body(&fixture("conversion-review.json")))
        .await;
    assert_eq!(status, 200, "{review}");
    assert_eq!(
        review["response"]["result"]["status"], "Success",
        "{review}"
    );
}

#[tokio::test]
async fn a_review_this_replica_cannot_serve_fails_whatever_its_body() {
    let env = Env::start_named("member", 1).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    env.run_engaged().await;
    let s = serve(webhooks, ServerOptions::default()).await;
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    // member-9 is not engaged here: whatever the body (not JSON, not a review, the wrong
    // content type), the call fails (503) and the failurePolicy decides; it is never
    // answered "denied", which would refuse a valid write on a replica that cannot judge it.
    for (content_type, body) in [
        ("application/json", Bytes::from_static(b"{not json")),
        ("application/json", Bytes::from_static(b"[1, 2]")),
        ("text/plain", body(&fixture("configmap-create.json"))),
    ] {
        let (status, review) = conn
            .0
            .request(
                "POST",
                &format!("/clusters/member-9{VALIDATE}"),
                content_type,
                body.clone(),
            )
            .await
            .unwrap();
        assert_eq!(status, 503, "{content_type} {body:?}: {review}");
        assert_eq!(review["response"]["status"]["code"], 503, "{review}");
    }
    // The engaged member's route still refuses a body that is not a review (and says why).
    let (status, review) = conn
        .post(&format!("/clusters/member-1{VALIDATE}"), "{not json")
        .await;
    assert_eq!(status, 200, "{review}");
    assert_eq!(review["response"]["status"]["code"], 400, "{review}");
}
