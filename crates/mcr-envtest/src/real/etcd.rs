//! One `etcd` per test process, shared by every real API server (each under its own
//! `--etcd-prefix`): one etcd costs ~1 s and tens of MiB, so a fleet pays for it once.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::OnceCell;

use super::assets::Assets;
use super::process::{Guarded, free_port};
use crate::Error;

/// How long etcd may take to answer `/health`.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The shared etcd. It lives until the process exits; its guard then kills it and deletes its
/// data directory.
#[derive(Debug)]
pub(crate) struct Etcd {
    /// `http://127.0.0.1:<port>`.
    pub(crate) url: String,
    /// The process's directory: etcd's data and every API server's directory. The etcd guard
    /// deletes it when this process ends, however it ends.
    pub(crate) root: PathBuf,
    _process: Mutex<Guarded>,
}

static SHARED: OnceCell<Etcd> = OnceCell::const_new();

/// The process's etcd, started on first use.
pub(crate) async fn shared(assets: &Assets) -> Result<&'static Etcd, Error> {
    SHARED.get_or_try_init(|| start(assets)).await
}

async fn start(assets: &Assets) -> Result<Etcd, Error> {
    let started = Instant::now();
    let dir: PathBuf = tempfile::Builder::new()
        .prefix("mcr-envtest-")
        .tempdir()?
        .keep();
    let client_port = free_port()?;
    let peer_port = free_port()?;
    let url = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let args: Vec<String> = vec![
        format!("--data-dir={}", dir.join("data").display()),
        "--name=mcr-envtest".into(),
        format!("--listen-client-urls={url}"),
        format!("--advertise-client-urls={url}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=mcr-envtest={peer}"),
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ];
    let log = dir.join("etcd.log");
    let mut process = Guarded::spawn("etcd", &assets.etcd, &args, &log, Some(&dir))?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = process.exited() {
            return Err(Error::ControlPlane(format!(
                "etcd exited during start ({status}); its log ends with:\n{}",
                process.log_tail()
            )));
        }
        if healthy(client_port).await {
            break;
        }
        if Instant::now() > deadline {
            let tail = process.log_tail();
            drop(process);
            return Err(Error::ControlPlane(format!(
                "etcd did not become healthy within {READY_TIMEOUT:?}; its log ends with:\n{tail}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::info!(%url, elapsed = ?started.elapsed(), "shared etcd is up");
    Ok(Etcd {
        url,
        root: dir,
        _process: Mutex::new(process),
    })
}

/// Whether `GET /health` on the client port says healthy.
async fn healthy(port: u16) -> bool {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(Duration::from_secs(5), attempt).await {
        Ok(Ok(answer)) => String::from_utf8_lossy(&answer).contains("\"health\":\"true\""),
        _ => false,
    }
}
