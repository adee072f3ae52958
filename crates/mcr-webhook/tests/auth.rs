//! Caller authentication for member routes: with `ServerOptions::client_auth`, a member's
//! route answers only a caller whose client certificate (signed by the client CA) names that
//! member, so member A's apiserver cannot borrow B's `Cluster` by calling B's route.

mod common;

use common::{Env, Pki, body, configmap_webhooks, connect_as, fixture, serve};
use mcr_webhook::{ClientAuth, ServerOptions, Webhooks};

const VALIDATE: &str = "/validate--v1-configmap";

#[tokio::test]
async fn a_member_route_answers_only_that_members_client_certificate() {
    let env = Env::start(2).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let _manager = env.run().await;
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
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("/clusters/member-1{VALIDATE}"))
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(review.clone()))
            .unwrap();
        conn.sender.ready().await.map_err(std::io::Error::other)?;
        conn.sender
            .send_request(req)
            .await
            .map_err(std::io::Error::other)
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
