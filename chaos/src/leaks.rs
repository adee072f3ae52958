//! Per-cluster state, read only through the manager's public surface: `engaged_clusters`,
//! `cluster_statuses`, the `/clusters` and `/metrics` endpoints, each member's cache, and the
//! number of live tasks on the manager's runtime.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use mcr_manager::Manager;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// What the manager shows of the members.
pub async fn seen(mgr: &Manager, world: &World) -> Result<Seen> {
    let addr = mgr
        .http_addr()
        .context("the manager serves no HTTP endpoint")?;
    let index = |name: &str| world.index_of(name);
    let mut out = Seen {
        engaged: mgr
            .engaged_clusters()
            .iter()
            .filter_map(|n| index(n.as_str()))
            .collect(),
        statuses: mgr
            .cluster_statuses()
            .iter()
            .filter(|s| !s.name.is_host())
            .filter_map(|s| index(s.name.as_str()))
            .collect(),
        ..Seen::default()
    };
    for line in http_get(addr, "/clusters").await?.lines() {
        if let Some((name, _)) = line.rsplit_once(' ')
            && let Some(m) = index(name)
        {
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
    Ok(out)
}

/// The value of `key="..."` in a metric line (escapes left as they are: names here have none).
fn label<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!("{key}=\""))? + key.len() + 2;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// Per live member engaged, the number of informers its cache runs (two controllers on the
/// same type and selector share one).
pub fn informers(mgr: &Manager, world: &World) -> Vec<(usize, usize)> {
    mgr.engaged_clusters()
        .iter()
        .filter_map(|name| {
            let m = world.index_of(name.as_str())?;
            let cluster = mgr.fleet().get(name).ok()?;
            Some((m, cluster.cache().informer_count()))
        })
        .collect()
}

/// Live tasks on the manager's runtime.
pub fn tasks(rt: &tokio::runtime::Runtime) -> usize {
    rt.metrics().num_alive_tasks()
}
