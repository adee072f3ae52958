//! Per-cluster state, read only through the manager's public surface: `engaged_clusters`,
//! `cluster_statuses`, each member's cache and the live tasks of the manager process (its
//! `stats`), and the `/clusters` and `/metrics` endpoints.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::child;
use crate::manager::Stats;
use crate::world::World;

/// Gauges whose per-cluster series must vanish with the cluster.
const GAUGES: &[&str] = &[
    "mcr_queue_depth",
    "mcr_cluster_synced",
    "mcr_watch_restarts",
];

/// `GET path` on the manager's HTTP endpoint; the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut out = String::new();
        stream.read_to_string(&mut out).await?;
        anyhow::Ok(out)
    };
    let out = tokio::time::timeout(Duration::from_secs(10), fetch)
        .await
        .with_context(|| format!("GET {path}: no answer in 10 s"))??;
    let Some((head, body)) = out.split_once("\r\n\r\n") else {
        bail!("GET {path}: no header end");
    };
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or_default());
    }
    Ok(body.to_owned())
}

/// The members (indices) a manager view still shows, by where it shows them.
#[derive(Debug, Default)]
pub struct Seen {
    /// `Manager::engaged_clusters`.
    pub engaged: BTreeSet<usize>,
    /// `Manager::cluster_statuses`.
    pub statuses: BTreeSet<usize>,
    /// Lines of `/clusters`.
    pub endpoint: BTreeSet<usize>,
    /// Per-cluster gauge series in `/metrics`.
    pub gauges: BTreeSet<usize>,
    /// `mcr_engaged_clusters` of each controller.
    pub engaged_gauge: Vec<u64>,
}

impl Seen {
    /// Every member shown anywhere.
    pub fn any(&self) -> BTreeSet<usize> {
        let mut all = self.engaged.clone();
        all.extend(&self.statuses);
        all.extend(&self.endpoint);
        all.extend(&self.gauges);
        all
    }
}

/// What the manager shows of the members, and its stats.
pub async fn seen(mgr: &mut child::Manager, world: &World) -> Result<(Seen, Stats)> {
    let stats = mgr.stats().await?;
    let addr = mgr.addr;
    let index = |name: &str| world.index_of(name);
    let mut out = Seen {
        engaged: stats.engaged.iter().filter_map(|n| index(n)).collect(),
        statuses: stats.statuses.iter().filter_map(|n| index(n)).collect(),
        ..Seen::default()
    };
    // `<name> synced|unsynced [credential fields]`.
    for line in http_get(addr, "/clusters").await?.lines() {
        let end = [" synced", " unsynced"]
            .iter()
            .filter_map(|state| line.find(state))
            .min();
        if let Some(m) = end.and_then(|end| index(&line[..end])) {
            out.endpoint.insert(m);
        }
    }
    for line in http_get(addr, "/metrics").await?.lines() {
        if line.starts_with("mcr_engaged_clusters{") {
            let value = line.rsplit(' ').next().unwrap_or_default();
            out.engaged_gauge.push(value.parse().unwrap_or(u64::MAX));
        }
        if !GAUGES.iter().any(|g| line.starts_with(&format!("{g}{{"))) {
            continue;
        }
        if let Some(m) = label(line, "cluster").and_then(index) {
            out.gauges.insert(m);
        }
    }
    Ok((out, stats))
}

/// The value of `key="..."` in a metric line (escapes left as they are: names here have none).
fn label<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!("{key}=\""))? + key.len() + 2;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// Per engaged member, the number of informers its cache runs (two controllers on the same
/// type and selector share one).
pub fn informers(stats: &Stats, world: &World) -> Vec<(usize, usize)> {
    stats
        .informers
        .iter()
        .filter_map(|(name, n)| Some((world.index_of(name)?, *n)))
        .collect()
}
