//! What callers can make the server hold, each limit hit by a test: TLS handshakes in progress
//! (apart from established connections), HTTP/2 streams per connection, request-body bytes
//! per connection and per process, and converter threads (a pool of their own, so that
//! `tokio::fs` is never starved).

mod common;

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use common::{Env, Running, body, configmap_webhooks, connect, fixture, serve};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use kube::CustomResource;
use mcr_webhook::{ServerOptions, Webhooks};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const VALIDATE: &str = "/validate--v1-configmap";

/// Long enough that no deadline of the server closes anything while a test runs: only the
/// limit under test can refuse.
const LONG: Duration = Duration::from_secs(600);

/// How long a test waits for the server to answer or close: far shorter than [`LONG`].
const ANSWER: Duration = Duration::from_secs(30);

fn patient(mut options: ServerOptions) -> ServerOptions {
    options.handshake_timeout = LONG;
    options.header_read_timeout = LONG;
    options.handler_timeout = LONG;
    options.idle_timeout = LONG;
    options
}

async fn server(options: ServerOptions) -> (Env, Running) {
    let env = Env::start_named("member", 0).await;
    let webhooks = Webhooks::new(&env.mgr);
    configmap_webhooks(&webhooks);
    let s = serve(webhooks, options).await;
    (env, s)
}

/// A well-behaved client is answered, on a new connection.
async fn answered(s: &Running) {
    let mut conn = connect(s.addr, &s.pki.ca_pem).await;
    let (status, review) = conn
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200, "{review}");
    assert_eq!(review["response"]["allowed"], true, "{review}");
}

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
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(s.addr).await?;
    tls_connector(&s.pki.ca_pem, alpn)
        .connect(
            rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            tcp,
        )
        .await
}

/// Whether the server closes `stream` (EOF or reset) within [`ANSWER`].
async fn closed_by_server(mut stream: impl tokio::io::AsyncRead + Unpin) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(ANSWER, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn bare_tcp_connections_take_no_connection_slot() {
    let mut options = patient(ServerOptions::default());
    options.max_connections = 2;
    let (_env, s) = server(options).await;
    // Ten callers that connect and never start a TLS handshake: before the handshake they
    // are nobody, and hold none of the two slots of established connections.
    let mut bare = Vec::new();
    for _ in 0..10 {
        bare.push(tokio::net::TcpStream::connect(s.addr).await.unwrap());
    }
    tokio::time::timeout(ANSWER, answered(&s))
        .await
        .expect("a client completing its handshake was not answered");
    drop(bare);
}

#[tokio::test]
async fn past_the_handshake_cap_the_oldest_handshake_is_cut_and_established_connections_answered() {
    let mut options = patient(ServerOptions::default());
    options.max_handshakes = 4;
    let (_env, s) = server(options).await;
    let mut established = connect(s.addr, &s.pki.ca_pem).await;
    // Four handshakes that never start hold the four slots (connected one after the other,
    // so the server accepts them in this order) ...
    let mut bare = Vec::new();
    for _ in 0..4 {
        bare.push(tokio::net::TcpStream::connect(s.addr).await.unwrap());
    }
    // ... so a fifth connection cuts the oldest of them ...
    let fifth = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let oldest = bare.remove(0);
    assert!(
        closed_by_server(oldest).await,
        "the oldest handshake in progress was kept past the cap"
    );
    // ... and a client that completes its handshake is answered, though callers that never
    // do keep opening connections: each cuts the oldest, not the newest.
    drop(fifth);
    for _ in 0..3 {
        bare.push(tokio::net::TcpStream::connect(s.addr).await.unwrap());
        answered(&s).await;
    }
    // The established connection is answered throughout.
    let (status, review) = established
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200, "{review}");
    assert_eq!(review["response"]["allowed"], true, "{review}");
}

#[tokio::test]
async fn past_the_connection_cap_established_connections_are_closed_and_open_ones_answered() {
    let mut options = patient(ServerOptions::default());
    options.max_connections = 2;
    let (_env, s) = server(options).await;
    let mut open = connect(s.addr, &s.pki.ca_pem).await;
    let silent = tls(&s, &[]).await.unwrap();
    // Both slots are taken once both handshakes completed; the well-behaved one is answered.
    let (status, _) = open
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200);
    // The third connection completes its handshake, and is closed.
    let third = tls(&s, &[]).await.unwrap();
    assert!(
        closed_by_server(third).await,
        "a connection past the cap was kept open"
    );
    let (status, review) = open
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(review["response"]["allowed"], true, "{review}");
    drop(silent);
    mcr_envtest::wait::eventually_async("a new connection to be served", ANSWER, || async {
        let Ok(mut conn) = common::connect_as(s.addr, &s.pki.ca_pem, None).await else {
            return false;
        };
        conn.0
            .post(VALIDATE, &fixture("configmap-create.json"))
            .await
            .is_ok_and(|(status, _)| status == 200)
    })
    .await;
}

/// One HTTP/2 frame: (type, flags, stream, payload).
async fn read_frame(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> (u8, u8, u32, Vec<u8>) {
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).await.unwrap();
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.unwrap();
    (head[3], head[4], id, payload)
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut bytes = len.to_be_bytes()[1..].to_vec();
    bytes.push(kind);
    bytes.push(flags);
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// HPACK: a literal field without indexing, its name from the static table (`index`).
fn literal(index: u8, value: &str) -> Vec<u8> {
    let mut out = if index < 15 {
        vec![index]
    } else {
        vec![0x0f, index - 15]
    };
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
    out
}

/// The header block of a review's POST (no body yet).
fn post_headers() -> Vec<u8> {
    // `:method: POST` (static index 3), `:scheme: https` (7), `:path` (4), `:authority` (1),
    // `content-type` (31).
    let mut block = vec![0x83, 0x87];
    block.extend(literal(4, VALIDATE));
    block.extend(literal(1, "127.0.0.1"));
    block.extend(literal(31, "application/json"));
    block
}

#[tokio::test]
async fn http2_streams_past_the_limit_are_refused() {
    let mut options = patient(ServerOptions::default());
    options.max_concurrent_streams = 4;
    let (_env, s) = server(options).await;
    let mut stream = tls(&s, &[b"h2"]).await.unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(0x4, 0, 0, &[]));
    stream.write_all(&hello).await.unwrap();
    // The server's settings announce the limit; acknowledge them.
    let (kind, flags, _, settings) = tokio::time::timeout(ANSWER, read_frame(&mut stream))
        .await
        .unwrap();
    assert_eq!(
        (kind, flags),
        (0x4, 0),
        "the server's first frame is its SETTINGS"
    );
    let announced: Vec<(u16, u32)> = settings
        .chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect();
    assert!(
        announced.contains(&(0x3, 4)),
        "SETTINGS_MAX_CONCURRENT_STREAMS 4 not announced: {announced:?}"
    );
    stream.write_all(&frame(0x4, 0x1, 0, &[])).await.unwrap();
    // Five requests whose bodies never come (END_HEADERS, not END_STREAM): four are open,
    // waiting for their bodies; the fifth is refused.
    for id in [1, 3, 5, 7, 9] {
        stream
            .write_all(&frame(0x1, 0x4, id, &post_headers()))
            .await
            .unwrap();
    }
    stream.flush().await.unwrap();
    let refused = tokio::time::timeout(ANSWER, async {
        loop {
            let (kind, _, id, payload) = read_frame(&mut stream).await;
            if kind == 0x3 {
                return (id, u32::from_be_bytes(payload[..4].try_into().unwrap()));
            }
        }
    })
    .await
    .expect("no stream was refused");
    // RST_STREAM on the fifth, REFUSED_STREAM (0x7).
    assert_eq!(refused, (9, 0x7));
    answered(&s).await;
}

type Sender = hyper::client::conn::http2::SendRequest<BoxBody<Bytes, Infallible>>;

async fn http2(s: &Running) -> Sender {
    let stream = tls(s, &[b"h2"]).await.unwrap();
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    sender
}

/// A valid review padded with blanks to `len` bytes.
fn review_of(len: usize) -> Bytes {
    let mut review = serde_json::to_vec(&fixture("configmap-create.json")).unwrap();
    assert!(review.len() <= len);
    review.resize(len, b' ');
    Bytes::from(review)
}

/// Where a streamed body's frames are sent.
type BodyTx = futures::channel::mpsc::UnboundedSender<Result<Frame<Bytes>, Infallible>>;

/// A POST whose body is sent through the returned channel; `declared`: with a
/// `content-length`.
fn streaming(declared: Option<usize>) -> (http::Request<BoxBody<Bytes, Infallible>>, BodyTx) {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("https://127.0.0.1{VALIDATE}"))
        .header("content-type", "application/json");
    if let Some(len) = declared {
        req = req.header("content-length", len);
    }
    (req.body(StreamBody::new(rx).boxed()).unwrap(), tx)
}

/// Sends `req` and reads its answer: (status, review).
async fn send(
    sender: &mut Sender,
    req: http::Request<BoxBody<Bytes, Infallible>>,
) -> Result<(u16, serde_json::Value), hyper::Error> {
    sender.ready().await?;
    let resp = tokio::time::timeout(ANSWER, sender.send_request(req))
        .await
        .expect("no answer")?;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await?.to_bytes();
    Ok((status, serde_json::from_slice(&bytes).unwrap_or_default()))
}

const KIB: usize = 1024;

type Answer = tokio::task::JoinHandle<Result<(u16, serde_json::Value), hyper::Error>>;

/// Of two requests whose bodies are not finished, one is refused (HTTP 429, with `message`):
/// its index, the refusal, and the other request's answer still to come.
async fn one_refused(mut answers: [Answer; 2], message: &str) -> (usize, Answer) {
    let (first, i, _) = tokio::time::timeout(ANSWER, futures::future::select_all(&mut answers))
        .await
        .expect("neither request was refused");
    let (status, review) = first.unwrap().unwrap();
    assert_eq!(status, 429, "{review}");
    assert_eq!(review["response"]["status"]["code"], 429, "{review}");
    let got = review["response"]["status"]["message"].as_str().unwrap();
    assert!(got.contains(message), "{got}");
    let [a, b] = answers;
    (i, if i == 0 { b } else { a })
}

#[tokio::test]
async fn bodies_past_a_connections_budget_are_refused_and_the_others_answered() {
    let mut options = patient(ServerOptions::default());
    options.max_body_bytes = 700 * KIB;
    options.max_connection_request_bytes = 1024 * KIB;
    let (_env, s) = server(options).await;
    let sender = http2(&s).await;
    // Two requests on one connection, 600 KiB each declared, 100 KiB sent: their bytes are
    // counted when their heads arrive, and both do not fit in the connection's 1 MiB.
    let full = review_of(600 * KIB);
    let mut bodies = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..2 {
        let (req, body) = streaming(Some(600 * KIB));
        body.unbounded_send(Ok(Frame::data(full.slice(..100 * KIB))))
            .unwrap();
        let mut sender = sender.clone();
        answers.push(tokio::spawn(async move { send(&mut sender, req).await }));
        bodies.push(body);
    }
    // One is refused at once (a failed call: the failurePolicy decides) ...
    let (refused, other) = one_refused(
        answers.try_into().unwrap(),
        "the connection holds requests up to its limit of 1048576 bytes",
    )
    .await;
    // ... and the other, completed, is answered.
    let body = bodies.remove(1 - refused);
    body.unbounded_send(Ok(Frame::data(full.slice(100 * KIB..))))
        .unwrap();
    drop(body);
    let (status, review) = other.await.unwrap().unwrap();
    assert_eq!(status, 200, "{review}");
    assert_eq!(review["response"]["allowed"], true, "{review}");
    // The connection's budget is free again.
    let again = http::Request::builder()
        .method("POST")
        .uri(format!("https://127.0.0.1{VALIDATE}"))
        .header("content-type", "application/json")
        .body(Full::new(review_of(600 * KIB)).boxed())
        .unwrap();
    let (status, review) = send(&mut sender.clone(), again).await.unwrap();
    assert_eq!(status, 200, "{review}");
}

#[tokio::test]
async fn bodies_past_the_process_budget_are_refused_on_any_connection() {
    let mut options = patient(ServerOptions::default());
    options.max_body_bytes = 900 * KIB;
    options.max_request_bytes_in_flight = 1024 * KIB;
    let (_env, s) = server(options).await;
    // A, on one connection: 800 KiB declared, nothing sent yet. B, on another, without a
    // declared length: 400 KiB sent, counted as they arrive, its end not sent yet. Both do
    // not fit in the server's 1 MiB.
    let full = review_of(800 * KIB);
    let (a, a_body) = streaming(Some(800 * KIB));
    let mut first = http2(&s).await;
    let a = tokio::spawn(async move { send(&mut first, a).await });
    let (b, b_body) = streaming(None);
    let part = review_of(400 * KIB);
    for chunk in part.chunks(16 * KIB) {
        b_body
            .unbounded_send(Ok(Frame::data(Bytes::copy_from_slice(chunk))))
            .unwrap();
    }
    let mut second = http2(&s).await;
    let b = tokio::spawn(async move { send(&mut second, b).await });
    let (refused, other) = one_refused(
        [a, b],
        "the webhook server holds requests up to its limit of 1048576 bytes",
    )
    .await;
    // The other, completed, is answered.
    if refused == 0 {
        drop(b_body);
    } else {
        a_body.unbounded_send(Ok(Frame::data(full))).unwrap();
        drop(a_body);
    }
    let (status, review) = other.await.unwrap().unwrap();
    assert_eq!(status, 200, "{review}");
    assert_eq!(review["response"]["allowed"], true, "{review}");
}

#[tokio::test]
async fn requests_whose_bodies_never_come_hold_their_heads_in_the_budget() {
    let mut options = patient(ServerOptions::default());
    options.max_request_bytes_in_flight = 40 * KIB;
    let (_env, s) = server(options).await;
    let sender = http2(&s).await;
    // Requests with an 8 KiB header and no body yet: each holds about 10 KiB (its head and
    // its state), so the fifth does not fit in 40 KiB and is refused at once.
    let mut bodies = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..5 {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Frame<Bytes>, Infallible>>();
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("https://127.0.0.1{VALIDATE}"))
            .header("content-type", "application/json")
            .header("x-large", "x".repeat(8 * KIB))
            .body(StreamBody::new(rx).boxed())
            .unwrap();
        let mut sender = sender.clone();
        answers.push(tokio::spawn(async move { send(&mut sender, req).await }));
        bodies.push(tx);
    }
    let (first, _, mut others) = tokio::time::timeout(ANSWER, futures::future::select_all(answers))
        .await
        .expect("no request was refused");
    let (status, review) = first.unwrap().unwrap();
    assert_eq!(status, 429, "{review}");
    let message = review["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("the webhook server holds requests up to its limit of 40960 bytes"),
        "{message}"
    );
    // The others are answered once their bodies come.
    let review = body(&fixture("configmap-create.json"));
    for tx in bodies {
        let _ = tx.unbounded_send(Ok(Frame::data(review.clone())));
    }
    for answer in others.drain(..) {
        let (status, review) = answer.await.unwrap().unwrap();
        assert!(status == 200 || status == 429, "{status} {review}");
    }
}

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

/// Converters that block until released, counting how many run at once (and the most ever).
#[derive(Default)]
struct Blocking {
    running: AtomicUsize,
    most: AtomicUsize,
    released: parking_lot::Mutex<bool>,
    wake: parking_lot::Condvar,
}

impl Blocking {
    fn convert(&self) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let mut released = self.released.lock();
        while !*released {
            self.wake.wait(&mut released);
        }
        drop(released);
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    fn release(&self) {
        *self.released.lock() = true;
        self.wake.notify_all();
    }
}

struct Release(Arc<Blocking>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// The server's runtime has 4 blocking threads, as few as a busy process may have free: a
/// converter on tokio's blocking pool would take them all.
#[test]
fn slow_converters_hold_at_most_the_pools_threads_and_never_starve_tokio_fs() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let env = Env::start_named("member", 0).await;
        let webhooks = Webhooks::new(&env.mgr);
        let blocking = Arc::new(Blocking::default());
        // Released however the test ends (a failed assertion too), so nothing stays blocked.
        let _release = Release(blocking.clone());
        let converter = blocking.clone();
        webhooks
            .for_::<Widget>()
            .with_review_converter(move |mut obj, to| {
                converter.convert();
                obj["apiVersion"] = to.into();
                Ok(obj)
            })
            .register()
            .unwrap();
        let mut options = patient(ServerOptions::default());
        options.converter_threads = 3;
        options.handler_timeout = Duration::from_millis(300);
        let s = serve(webhooks, options).await;
        let review = body(&fixture("conversion-review.json"));
        // Twelve conversions, each on a connection of its own: three take the pool's threads
        // (and are cut at the handler timeout, their converters still running), the others
        // are refused at once.
        let mut statuses = Vec::new();
        for _ in 0..12 {
            let mut conn = connect(s.addr, &s.pki.ca_pem).await;
            let (status, answer) =
                tokio::time::timeout(ANSWER, conn.post("/convert", review.clone()))
                    .await
                    .expect("a conversion was not answered");
            if status == 503 {
                let message = answer["response"]["result"]["message"].as_str().unwrap();
                assert!(
                    message.contains("all 3 converter threads are busy"),
                    "{message}"
                );
            }
            statuses.push(status);
        }
        // tokio's blocking pool is untouched: a file is read while every converter is stuck.
        let file = s.pki.cert_path();
        let read = tokio::time::timeout(ANSWER, tokio::fs::read(&file)).await;
        assert!(
            read.is_ok_and(|r| r.is_ok()),
            "tokio::fs starved by stuck converters"
        );
        assert_eq!(
            statuses.iter().filter(|s| **s == 504).count(),
            3,
            "{statuses:?}"
        );
        assert_eq!(
            statuses.iter().filter(|s| **s == 503).count(),
            9,
            "{statuses:?}"
        );
        assert_eq!(blocking.running.load(Ordering::SeqCst), 3);
        // Released, the converters return, their threads free, and conversions are answered.
        blocking.release();
        mcr_envtest::wait::eventually("the converters to return", ANSWER, || {
            blocking.running.load(Ordering::SeqCst) == 0
        })
        .await;
        let mut conn = connect(s.addr, &s.pki.ca_pem).await;
        let (status, answer) = conn.post("/convert", review).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(blocking.most.load(Ordering::SeqCst), 3);
    });
}
