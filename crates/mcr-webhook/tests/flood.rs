//! The memory bound of a webhook server that anyone can reach, with the default limits: a
//! flood of callers that hold every kind of slot at once (handshakes never finished, idle
//! connections, HTTP/2 streams with large header blocks and bodies that never end) and the
//! server's memory measured from outside: the server runs in a process of its own (this test
//! binary again, running [`flood_server`]) and the test reads its peak resident memory
//! (`VmHWM`) in `/proc`.

mod common;

use std::{
    convert::Infallible,
    io::{BufRead, Write},
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use common::{Env, body, configmap_webhooks, fixture};
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use mcr_webhook::{ServerOptions, Webhooks};

const SERVER_ENV: &str = "MCR_WEBHOOK_FLOOD_SERVER";
const VALIDATE: &str = "/validate--v1-configmap";
const MIB: u64 = 1024 * 1024;

/// The bound the guide states for the default limits: what a flood may add to the memory of
/// the process (chapter "Webhooks", section "Limits").
const BOUND: u64 = 160 * MIB;

/// The server of the flood, in a process of its own: run by
/// [`a_flood_from_anyone_keeps_the_server_under_its_memory_bound`], which starts this binary
/// with [`SERVER_ENV`] set. It prints its address and the path of its CA, then serves with
/// the default limits until its standard input closes (the test ended).
#[test]
#[ignore = "the server process of a_flood_from_anyone_keeps_the_server_under_its_memory_bound"]
fn flood_server() {
    let Some(dir) = std::env::var_os(SERVER_ENV) else {
        eprintln!("flood_server runs only as the server of the flood test");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let env = Env::start_named("member", 0).await;
        let webhooks = Webhooks::new(&env.mgr);
        configmap_webhooks(&webhooks);
        let s = common::serve(webhooks, ServerOptions::default()).await;
        let ca = std::path::Path::new(&dir).join("ca.crt");
        std::fs::write(&ca, &s.pki.ca_pem).unwrap();
        println!("SERVING {} {}", s.addr, ca.display());
        std::io::stdout().flush().unwrap();
        // Until the test closes our standard input.
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            while std::io::stdin()
                .lock()
                .read_line(&mut line)
                .is_ok_and(|n| n > 0)
            {}
        })
        .await
        .unwrap();
        drop(s);
        drop(env);
    });
}

/// The server process; killed when dropped.
struct Server {
    child: Child,
    addr: std::net::SocketAddr,
    ca_pem: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "flood_server", "--ignored", "--nocapture"])
            .env(SERVER_ENV, dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines
            .find_map(|l| l.ok().filter(|l| l.starts_with("SERVING ")))
            .expect("the server process did not start");
        // Keep reading what it prints, so its writes never fail.
        std::thread::spawn(move || lines.for_each(drop));
        let mut words = line.split_whitespace().skip(1);
        let addr = words.next().unwrap().parse().unwrap();
        let ca_pem = std::fs::read_to_string(words.next().unwrap()).unwrap();
        Server {
            child,
            addr,
            ca_pem,
            _dir: dir,
        }
    }

    /// A field of `/proc/<pid>/status`, in bytes.
    fn status(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("no {field} in {status}"));
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }

    /// Resets the peak of resident memory to the current value.
    fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").unwrap();
    }
}

fn connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
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
    config.alpn_protocols = vec![b"h2".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

type Sender = hyper::client::conn::http2::SendRequest<BoxBody<Bytes, Infallible>>;

async fn http2(
    addr: std::net::SocketAddr,
    connector: &tokio_rustls::TlsConnector,
) -> Option<Sender> {
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let tls = connector
        .connect(
            rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            tcp,
        )
        .await
        .ok()?;
    let (sender, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .ok()?;
    tokio::spawn(conn);
    Some(sender)
}

/// What became of the flood's streams: answered 429 (refused for the budgets), answered
/// otherwise, reset (a refusal answered before the body came resets the stream) or never
/// opened (past the connection cap, or the streams' cap for 30 s).
#[derive(Default)]
struct Tally {
    refused: AtomicU64,
    answered: AtomicU64,
    reset: AtomicU64,
}

/// One stream of the flood: a review's POST with an 8 KiB header and a body of (up to)
/// `7 MiB - 1` bytes, declared or not, of which `send` bytes are sent, and no end.
async fn stream(mut sender: Sender, declared: bool, send: u64, tally: Arc<Tally>) {
    let (tx, rx) = futures::channel::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("https://127.0.0.1{VALIDATE}"))
        .header("content-type", "application/json")
        .header("x-flood", "x".repeat(8 * 1024));
    if declared {
        req = req.header("content-length", 7 * MIB - 1);
    }
    let req = req.body(BodyExt::boxed(StreamBody::new(rx))).unwrap();
    if tokio::time::timeout(Duration::from_secs(30), sender.ready())
        .await
        .map_or(true, |r| r.is_err())
    {
        tally.reset.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let response = sender.send_request(req);
    let chunk = Bytes::from(vec![b' '; 64 * 1024]);
    let feed = async {
        let mut tx = tx;
        let mut left = send;
        while left > 0 {
            let n = left.min(chunk.len() as u64);
            if futures::SinkExt::send(&mut tx, Ok(Frame::data(chunk.slice(..n as usize))))
                .await
                .is_err()
            {
                return;
            }
            left -= n;
        }
        // Never ends: hold the stream open.
        std::future::pending::<()>().await;
    };
    tokio::select! {
        response = response => match response {
            Ok(r) if r.status() == 429 => tally.refused.fetch_add(1, Ordering::Relaxed),
            Ok(_) => tally.answered.fetch_add(1, Ordering::Relaxed),
            Err(_) => tally.reset.fetch_add(1, Ordering::Relaxed),
        },
        () = feed => 0,
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_anyone_keeps_the_server_under_its_memory_bound() {
    let defaults = ServerOptions::default();
    let server = Server::start();
    let connector = connector(&server.ca_pem);
    // Warm up: a review answered over HTTP/1 and over HTTP/2.
    let mut conn = common::connect(server.addr, &server.ca_pem).await;
    let (status, _) = conn
        .post(VALIDATE, body(&fixture("configmap-create.json")))
        .await;
    assert_eq!(status, 200);
    drop(conn);
    let baseline = server.status("VmRSS:");
    server.reset_peak();

    // Every connection slot (and more) held by HTTP/2 connections.
    let senders: Vec<Sender> = futures::stream::iter(0..defaults.max_connections + 64)
        .map(|_| http2(server.addr, &connector))
        .buffer_unordered(32)
        .filter_map(std::future::ready)
        .collect()
        .await;
    // Every handshake slot held by connections that never start one.
    let mut bare = Vec::new();
    for _ in 0..defaults.max_handshakes + 64 {
        if let Ok(tcp) = tokio::net::TcpStream::connect(server.addr).await {
            bare.push(tcp);
        }
    }
    let connected = server.status("VmHWM:").saturating_sub(baseline);
    eprintln!(
        "flood: the connections alone grew the server by {} MiB",
        connected / MIB
    );
    // On each, as many streams as it will take, with large heads and bodies that never end.

    let tally = Arc::new(Tally::default());
    let mut streams = Vec::new();
    for (i, sender) in senders.iter().enumerate() {
        for j in 0..defaults.max_concurrent_streams as usize + 1 {
            // A third send no body at all (they hold their heads), a third declare 7 MiB.
            let (declared, send) = match (i + j) % 3 {
                0 => (false, 0),
                1 => (true, MIB),
                _ => (false, MIB),
            };
            streams.push(tokio::spawn(stream(
                sender.clone(),
                declared,
                send,
                tally.clone(),
            )));
        }
    }
    // The flood holds for a while: until every stream was answered or cut, or 60 s.
    let _ = tokio::time::timeout(
        Duration::from_secs(60),
        futures::future::join_all(streams.iter_mut()),
    )
    .await;
    let peak = server.status("VmHWM:");
    let grown = peak.saturating_sub(baseline);
    eprintln!(
        "flood: {} bare connections, {} HTTP/2 connections, {} streams ({} answered 429, {} answered otherwise, {} reset by the server (an early answer resets a stream whose body is still coming) or never opened); the server grew from {} MiB by {} MiB at its peak (bound {} MiB)",
        bare.len(),
        senders.len(),
        streams.len(),
        tally.refused.load(Ordering::Relaxed),
        tally.answered.load(Ordering::Relaxed),
        tally.reset.load(Ordering::Relaxed),
        baseline / MIB,
        grown / MIB,
        BOUND / MIB
    );
    for stream in &streams {
        stream.abort();
    }
    drop(streams);
    drop(senders);
    drop(bare);
    assert!(
        grown <= BOUND,
        "the flood grew the server by {} MiB, past its bound of {} MiB",
        grown / MIB,
        BOUND / MIB
    );
    // And it serves again once the flood is gone.
    mcr_envtest::wait::eventually_async("the server to answer again", common::WAIT, || async {
        let Ok(mut conn) = common::connect_as(server.addr, &server.ca_pem, None).await else {
            return false;
        };
        conn.0
            .post(VALIDATE, &fixture("configmap-create.json"))
            .await
            .is_ok_and(|(status, _)| status == 200)
    })
    .await;
}
