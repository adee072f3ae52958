//! The deadlines of connections: every phase of a connection has one (handshake, protocol
//! detection, HTTP/1 and HTTP/2 request heads, idle keep-alive). The caps on what callers can
//! hold are tested in `limits.rs`.

mod common;

use std::{sync::Arc, time::Duration};

use common::{Env, Running, body, configmap_webhooks, connect, fixture, labelled, serve};
use futures::StreamExt;
use mcr_webhook::{ServerOptions, Webhooks};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const VALIDATE: &str = "/validate--v1-configmap";

/// How long a test waits for the server to close a connection: 100 times the 200 ms limits
/// the tests configure, and shorter than any default limit (hyper's own 30 s header timeout,
/// the server's 120 s idle timeout), so only the configured limit can pass it.
const CLOSE_DEADLINE: Duration = Duration::from_secs(20);

/// Reads until the server closes the stream (EOF or reset) within [`CLOSE_DEADLINE`]; returns
/// what it sent.
async fn closed_by_server(stream: impl tokio::io::AsyncRead + Unpin, what: &str) -> Vec<u8> {
    closed_by_server_within(stream, what, CLOSE_DEADLINE).await
}

/// [`closed_by_server`] with its own deadline.
async fn closed_by_server_within(
    mut stream: impl tokio::io::AsyncRead + Unpin,
    what: &str,
    deadline: Duration,
) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(deadline, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept {what} open for {deadline:?}");
    got
}

/// Whether the server has neither sent anything on `stream` nor closed it: a read finds
/// nothing within 200 ms.
async fn still_open(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> bool {
    let mut buf = [0u8; 1];
    tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf))
        .await
        .is_err()
}

/// A TLS client trusting the test CA, offering `alpn`.
fn tls_connector(ca_pem: &str, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn tls(
    s: &Running,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    tls_connector(&s.pki.ca_pem, alpn)
        .connect(
            rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            tcp,
        )
        .await
        .unwrap()
}

async fn server(options: ServerOptions) -> (Env, Running) {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let s = serve(webhooks, options).await;
    (env, s)
}

fn short_limits() -> ServerOptions {
    let mut options = ServerOptions::default();
    options.handshake_timeout = Duration::from_millis(200);
    options.header_read_timeout = Duration::from_millis(200);
    options
}

/// A well-behaved client is answered.
async fn answered(s: &Running) {
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let (status, review) = conn
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200, "{review}");
    assert_eq!(review["response"]["allowed"], true, "{review}");
}

#[tokio::test]
async fn a_client_silent_after_the_tls_handshake_is_closed() {
    let (_env, s) = server(short_limits()).await;
    for alpn in [&[][..], &[&b"http/1.1"[..]][..], &[&b"h2"[..]][..]] {
        let stream = tls(&s, alpn).await;
        closed_by_server(
            stream,
            &format!("a connection silent after its TLS handshake (ALPN {alpn:?})"),
        )
        .await;
    }
    answered(&s).await;
}

/// The HTTP/2 connection preface, an empty SETTINGS frame, and a HEADERS frame for stream 1
/// without END_HEADERS: the header block is never finished.
fn http2_unfinished_headers() -> Vec<u8> {
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS: length 0, type 0x4, flags 0, stream 0.
    bytes.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
    // HEADERS: length 2, type 0x1, flags 0 (neither END_HEADERS nor END_STREAM), stream 1;
    // HPACK `:method: POST` (static index 3) and `:scheme: https` (index 7).
    bytes.extend_from_slice(&[0, 0, 2, 0x1, 0, 0, 0, 0, 1, 0x83, 0x87]);
    bytes
}

#[tokio::test]
async fn an_http2_client_that_never_ends_its_headers_is_closed() {
    let (_env, s) = server(short_limits()).await;
    let mut stream = tls(&s, &[b"h2"]).await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    stream.write_all(&http2_unfinished_headers()).await.unwrap();
    stream.flush().await.unwrap();
    closed_by_server(
        stream,
        "an HTTP/2 connection with an unfinished header block",
    )
    .await;
    answered(&s).await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let mut options = ServerOptions::default();
    options.idle_timeout = Duration::from_millis(200);
    // Longer than CLOSE_DEADLINE: only the idle timeout can close the connection in time
    // (hyper's HTTP/1 header timer also runs between requests).
    options.header_read_timeout = Duration::from_secs(120);
    let (_env, s) = server(options).await;
    let mut stream = tls(&s, &[b"http/1.1"]).await;
    let review = body(&fixture("configmap-create.json"));
    let mut request = format!(
        "POST {VALIDATE} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        review.len()
    )
    .into_bytes();
    request.extend_from_slice(&review);
    stream.write_all(&request).await.unwrap();
    stream.flush().await.unwrap();
    // The answer, then (keep-alive, nothing more asked) the close.
    let got = closed_by_server(stream, "an idle keep-alive connection").await;
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains("\"allowed\":true"), "{got}");
}

#[tokio::test]
async fn an_http2_client_is_answered_on_one_connection() {
    let mut options = short_limits();
    options.http2_keep_alive_interval = Duration::from_millis(50);
    let (_env, s) = server(options).await;
    let stream = tls(&s, &[b"h2"]).await;
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    for _ in 0..3 {
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("https://127.0.0.1{VALIDATE}"))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(body(&fixture(
                "configmap-create.json",
            ))))
            .unwrap();
        sender.ready().await.unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.version(), http::Version::HTTP_2);
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        let review: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(review["response"]["allowed"], true, "{review}");
    }
}

const FLOOD_LABEL: &str = "mcr-webhook-flood";

/// Creates `cm` through the host's kube-apiserver: `Ok` if admitted, the refusal otherwise.
async fn create(
    api: &kube::Api<k8s_openapi::api::core::v1::ConfigMap>,
    cm: &k8s_openapi::api::core::v1::ConfigMap,
    dry_run: bool,
) -> Result<(), String> {
    let params = kube::api::PostParams {
        dry_run,
        ..Default::default()
    };
    match api.create(&params, cm).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(other) => Err(other.to_string()),
    }
}

/// On real control planes: the host's kube-apiserver gets a configuration calling the
/// server's host route, and calls it (its refusal of an invalid ConfigMap says so).
async fn host_apiserver_calls(
    env: &Env,
    webhooks: &Webhooks,
    s: &Running,
) -> kube::Api<k8s_openapi::api::core::v1::ConfigMap> {
    let mut options = mcr_webhook::ConfigOptions::new("flood.webhooks.mcr.test");
    options.object_selector = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([(FLOOD_LABEL.to_string(), "yes".to_string())].into()),
            ..Default::default()
        },
    );
    let config = mcr_webhook::validating_configuration(
        webhooks,
        &format!("https://{}", s.addr),
        s.pki.ca_pem.as_bytes(),
        &options,
    )
    .unwrap()
    .unwrap();
    kube::Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(
        env.host.client(),
    )
    .create(&Default::default(), &config)
    .await
    .unwrap();
    let api = kube::Api::namespaced(env.host.client(), "default");
    mcr_envtest::wait::eventually_async(
        "the host's apiserver to call the webhook",
        common::WAIT,
        || {
            let api = api.clone();
            async move {
                create(&api, &labelled("probe", FLOOD_LABEL, "large"), true)
                    .await
                    .is_err_and(|m| m.contains(FLOOD_REFUSAL))
            }
        },
    )
    .await;
    api
}

/// The validator's refusal of `size: large` on the host.
const FLOOD_REFUSAL: &str = "data.size must be a number, not \"large\" (cluster <host>)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_tls_connections_is_closed_and_reviews_still_answered() {
    const SILENT: usize = 1000;
    /// How long the server leaves a silent connection open: the checks run within it. Opening
    /// the flood took 10 s once on a loaded CI machine (real control planes, debug build), so
    /// this is three times that; the test then checks that the flood was indeed still open.
    const SILENT_FOR: Duration = Duration::from_secs(30);
    let mut options = ServerOptions::default();
    options.header_read_timeout = SILENT_FOR;
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let s = serve(webhooks.clone(), options).await;
    // On real control planes, the reviews also come from the host's kube-apiserver.
    let apiserver = if mcr_envtest::backend().is_real() {
        Some(host_apiserver_calls(&env, &webhooks, &s).await)
    } else {
        None
    };
    let connector = tls_connector(&s.pki.ca_pem, &[]);
    let flood_started = std::time::Instant::now();
    let mut opened = futures::stream::iter(0..SILENT)
        .map(|_| {
            let connector = connector.clone();
            let addr = s.addr;
            async move {
                let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                connector
                    .connect(
                        rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
                        tcp,
                    )
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(50)
        .collect::<Vec<_>>()
        .await;
    assert_eq!(opened.len(), SILENT);
    let flood_opened = flood_started.elapsed();

    // The flood holds a thousand connections: a review is still answered, on a new
    // connection, and through the host's kube-apiserver: an invalid ConfigMap refused by the
    // validator, a valid one admitted.
    answered(&s).await;
    if let Some(api) = &apiserver {
        let refused = create(api, &labelled("invalid", FLOOD_LABEL, "large"), false).await;
        assert!(
            refused.as_ref().is_err_and(|m| m.contains(FLOOD_REFUSAL)),
            "the host's apiserver during the flood: {refused:?}"
        );
        let admitted = create(api, &labelled("valid", FLOOD_LABEL, "3"), false).await;
        assert_eq!(admitted, Ok(()), "the host's apiserver during the flood");
    }
    // Answered while the whole flood was open: no silent connection has been closed yet.
    let checked = flood_started.elapsed();
    let open = futures::stream::iter(opened.iter_mut())
        .map(still_open)
        .buffer_unordered(SILENT)
        .filter(|open| std::future::ready(*open))
        .count()
        .await;
    assert_eq!(
        open, SILENT,
        "silent connections still open when the checks ended, {checked:?} after the flood began ({flood_opened:?} to open it)"
    );

    // Every silent connection is closed by the server.
    let closed = futures::stream::iter(opened)
        .map(|stream| {
            closed_by_server_within(
                stream,
                "a silent connection of the flood",
                SILENT_FOR + CLOSE_DEADLINE,
            )
        })
        .buffer_unordered(SILENT)
        .count()
        .await;
    assert_eq!(closed, SILENT);
    answered(&s).await;
    eprintln!(
        "flood of {SILENT}: opened in {flood_opened:?}, answered within {checked:?}, all closed after {:?}",
        flood_started.elapsed()
    );
}
