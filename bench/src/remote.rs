//! The emulator in a separate process: a `mcr-envtest` server serving a fleet over HTTPS, and
//! kube clients built from the kubeconfigs it writes. Used where a scenario must not count the
//! emulator's CPU or memory against the controller process (B2, B2m, B4, B5 remote).

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt, TryStreamExt, stream};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::load;

/// The `mcr-envtest` server process; killed on drop.
pub struct Server {
    child: Child,
    dir: PathBuf,
}

impl Server {
    /// Starts `bin --clusters n --name-prefix member --kubeconfig-dir dir` (emptying `dir`
    /// first) and returns once it serves.
    pub fn start(bin: &Path, n: usize, dir: &Path) -> Result<Server> {
        Server::start_named(bin, n, dir, "member")
    }

    /// [`Server::start`] with clusters named `<prefix>-1` .. `<prefix>-n`.
    pub fn start_named(bin: &Path, n: usize, dir: &Path, prefix: &str) -> Result<Server> {
        Server::spawn(bin, n, dir, prefix, false, &[])
    }

    /// [`Server::start_named`] with every cluster on one port (`--shared-port`: each at the
    /// path prefix `/clusters/<name>` of its server URL), for fleets larger than a port and a
    /// socket each allow (B13).
    pub fn start_shared_port(bin: &Path, n: usize, dir: &Path, prefix: &str) -> Result<Server> {
        Server::spawn(bin, n, dir, prefix, false, &["--shared-port"])
    }

    /// [`Server::start_named`]; with `real`, the server starts real `kube-apiserver` + `etcd`
    /// control planes (`MCR_ENVTEST=real`) instead of emulated clusters. They are guarded by
    /// the server process: killing it stops them.
    pub fn start_backend(
        bin: &Path,
        n: usize,
        dir: &Path,
        prefix: &str,
        real: bool,
    ) -> Result<Server> {
        Server::spawn(bin, n, dir, prefix, real, &[])
    }

    fn spawn(
        bin: &Path,
        n: usize,
        dir: &Path,
        prefix: &str,
        real: bool,
        extra: &[&str],
    ) -> Result<Server> {
        if !bin.exists() {
            bail!(
                "{} not found: build it with `cargo build --release -p mcr-envtest --features cli`",
                bin.display()
            );
        }
        let _ = std::fs::remove_dir_all(dir);
        let mut command = Command::new(bin);
        if real {
            command.env("MCR_ENVTEST", "real");
        }
        let mut child = command
            .args(["--clusters", &n.to_string(), "--name-prefix", prefix])
            .args(extra)
            .arg("--kubeconfig-dir")
            .arg(dir)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("server stdout")?;
        let server = Server {
            child,
            dir: dir.to_path_buf(),
        };
        let mut lines = BufReader::new(stdout).lines();
        loop {
            match lines.next() {
                Some(line) => {
                    if line?.starts_with("serving until") {
                        break;
                    }
                }
                None => bail!("mcr-envtest exited before serving"),
            }
        }
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(server)
    }

    /// The kubeconfig directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A client for the cluster of one kubeconfig file.
pub async fn client_for(path: &Path) -> Result<kube::Client> {
    let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// The `*.kubeconfig` files of `dir`, sorted by name.
pub fn kubeconfigs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "kubeconfig"))
        .collect();
    out.sort();
    Ok(out)
}

/// The number at the end of `member-<n>` (for ordering the clusters as the server numbered
/// them).
fn index(name: &str) -> usize {
    name.rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Named clients for every cluster of `dir`, in the server's order (`member-1`, `member-2`,
/// ...). By convention the first one is the mcr host cluster and the rest are the fleet.
pub async fn clients(dir: &Path) -> Result<Vec<(String, kube::Client)>> {
    let mut named = Vec::new();
    for path in kubeconfigs(dir)? {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .context("kubeconfig file name")?
            .to_string();
        named.push((name, client_for(&path).await?));
    }
    named.sort_by_key(|(name, _)| index(name));
    Ok(named)
}

/// Splits [`clients`] into the host (the first) and the fleet (the rest).
pub async fn host_and_fleet(dir: &Path) -> Result<(kube::Client, Vec<(String, kube::Client)>)> {
    let mut all = clients(dir).await?;
    if all.is_empty() {
        bail!("no kubeconfig in {}", dir.display());
    }
    let (_, host) = all.remove(0);
    Ok((host, all))
}

/// Creates `objects` ConfigMaps (value 0) in every one of `clients`, 16 clusters at a time.
pub async fn populate(clients: &[kube::Client], objects: usize) -> Result<()> {
    stream::iter(clients.iter().cloned())
        .map(|c| load::create_objects(c, objects))
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// How often [`populate_fleet`] tries one cluster before giving up.
const ATTEMPTS: u32 = 5;

/// Creates `objects` ConfigMaps (value 0) in the cluster of every kubeconfig file in
/// `paths`, for fleets of thousands (B4, B11, B13): 16 clusters at a time, one request at a
/// time per cluster (so one connection each), each client built when its cluster's turn
/// comes and dropped as soon as its cluster is written, closing its connections. At most 16
/// loader connections and clients exist at once, where [`populate`] keeps up to 8 idle pooled
/// connections per cluster until the caller drops the clients (20,000 connections for a
/// 2,500-cluster server, its whole file-descriptor limit). A cluster that fails (e.g. a
/// connect timeout on a loaded machine) is retried up to [`ATTEMPTS`] times, 2 s apart;
/// objects already created are kept.
pub async fn populate_fleet(paths: &[PathBuf], objects: usize) -> Result<()> {
    stream::iter(paths)
        .map(|path| async move {
            let mut attempt = 1;
            loop {
                let created = match client_for(path).await {
                    Ok(c) => create_missing(&c, objects).await,
                    Err(err) => Err(err),
                };
                match created {
                    Ok(()) => return Ok(()),
                    Err(err) if attempt >= ATTEMPTS => {
                        return Err(err.context(format!("after {ATTEMPTS} attempts")));
                    }
                    Err(_) => {
                        attempt += 1;
                        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    }
                }
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Creates `cm-0` .. `cm-{n-1}` (value 0) one after the other; one that already exists (from
/// an earlier attempt) is left as it is.
async fn create_missing(client: &kube::Client, n: usize) -> Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), load::NS);
    for i in 0..n {
        let name = load::object_name(i);
        match api
            .create(&PostParams::default(), &load::config_map(&name, 0))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(err) => return Err(err).with_context(|| format!("creating {name}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_members_by_number() {
        let mut names = vec!["member-10", "member-2", "member-1"];
        names.sort_by_key(|n| index(n));
        assert_eq!(names, ["member-1", "member-2", "member-10"]);
    }
}
