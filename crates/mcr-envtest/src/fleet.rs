//! A fleet: several emulated clusters started together.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::cluster::Transport;
use crate::shared_port::SharedPort;
use crate::{Backend, Error, TestCluster, real};

/// Several emulated clusters, named `<prefix>-1` .. `<prefix>-n`.
///
/// ```no_run
/// # async fn doc() -> Result<(), mcr_envtest::Error> {
/// let mut fleet = mcr_envtest::Fleet::start(3).await?;
/// assert_eq!(fleet.names(), ["cluster-1", "cluster-2", "cluster-3"]);
/// let extra = fleet.add("late").await?;
/// let client = extra.client();
/// fleet.remove("cluster-1").await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Fleet {
    clusters: Vec<TestCluster>,
    backend: Backend,
    https: bool,
    /// The one port of every cluster, with [`FleetBuilder::shared_port`].
    port: Option<Arc<SharedPort>>,
    kubeconfig_dir: Option<PathBuf>,
}

/// Configures a [`Fleet`]; see [`Fleet::builder`].
///
/// ```no_run
/// # async fn doc() -> Result<(), mcr_envtest::Error> {
/// let fleet = mcr_envtest::Fleet::builder()
///     .clusters(2)
///     .name_prefix("member")
///     .https(true)
///     .kubeconfig_dir("/tmp/fleet")
///     .start()
///     .await?;
/// assert!(fleet.get("member-2").is_some());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FleetBuilder {
    backend: Option<Backend>,
    clusters: usize,
    name_prefix: String,
    https: bool,
    shared_port: bool,
    kubeconfig_dir: Option<PathBuf>,
}

impl Default for FleetBuilder {
    fn default() -> Self {
        Self {
            backend: None,
            clusters: 1,
            name_prefix: "cluster".into(),
            https: false,
            shared_port: false,
            kubeconfig_dir: None,
        }
    }
}

impl FleetBuilder {
    /// How many clusters to start (default 1).
    ///
    /// ```
    /// let builder = mcr_envtest::Fleet::builder().clusters(5);
    /// ```
    pub fn clusters(mut self, n: usize) -> Self {
        self.clusters = n;
        self
    }

    /// The backend to start the clusters on, whatever `MCR_ENVTEST` says (default: the
    /// backend of [`Backend::from_env`]).
    ///
    /// ```
    /// let builder = mcr_envtest::Fleet::builder().backend(mcr_envtest::Backend::Emulator);
    /// ```
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Name prefix (default `cluster`): clusters are `<prefix>-1` .. `<prefix>-n`.
    ///
    /// ```
    /// let builder = mcr_envtest::Fleet::builder().name_prefix("member");
    /// ```
    pub fn name_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.name_prefix = prefix.into();
        self
    }

    /// Serve every cluster over HTTPS too (default: in-process only).
    ///
    /// ```
    /// let builder = mcr_envtest::Fleet::builder().https(true);
    /// ```
    pub fn https(mut self, https: bool) -> Self {
        self.https = https;
        self
    }

    /// Serve every cluster over HTTPS on one port of `127.0.0.1`, told apart by a path prefix:
    /// a cluster's kubeconfig names `https://127.0.0.1:<port>/clusters/<name>` (kube-rs and
    /// client-go keep that path in front of every request). The clusters share the port's CA
    /// and serving certificate; each has its own token, state, faults and counters. Implies
    /// [`https(true)`](Self::https).
    ///
    /// For fleets too large for a port each: a process may hold only so many open files
    /// (often 1,024 by default, 20,000 on CI machines), and a machine has fewer than 65,536
    /// ports. Names must then be URL path segments (letters, digits, `-`, `_`, `.`), else
    /// [`Error::InvalidName`]. A stopped or partitioned cluster drops the connection of each
    /// request for it instead of refusing new connections, since the port serves the others.
    /// The real backend ignores this: each real cluster has its own API server.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let fleet = mcr_envtest::Fleet::builder().clusters(2).shared_port(true).start().await?;
    /// assert!(fleet.clusters()[0].url().unwrap().ends_with("/clusters/cluster-1"));
    /// # Ok(()) }
    /// ```
    pub fn shared_port(mut self, shared: bool) -> Self {
        self.shared_port = shared;
        if shared {
            self.https = true;
        }
        self
    }

    /// Write `<dir>/<name>.kubeconfig` for every cluster (now and on [`Fleet::add`]).
    /// Kubeconfigs need HTTPS, so this implies [`https(true)`](Self::https).
    ///
    /// ```
    /// let builder = mcr_envtest::Fleet::builder().kubeconfig_dir("/tmp/fleet");
    /// ```
    pub fn kubeconfig_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.kubeconfig_dir = Some(dir.into());
        self.https = true;
        self
    }

    /// Starts the clusters (concurrently) and writes kubeconfigs if a directory is set.
    /// On the real backend, more than [`MAX_FLEET`](real::MAX_FLEET) clusters is an
    /// [`Error::FleetTooLarge`].
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let fleet = mcr_envtest::Fleet::builder().clusters(2).start().await?;
    /// # Ok(()) }
    /// ```
    pub async fn start(self) -> Result<Fleet, Error> {
        let backend = match self.backend {
            Some(backend) => backend,
            None => Backend::from_env()?,
        };
        check_cap(backend, self.clusters)?;
        let port = match self.shared_port && !backend.is_real() {
            true => Some(SharedPort::start()?),
            false => None,
        };
        let starts = (1..=self.clusters).map(|i| {
            let transport = transport(self.https, port.as_ref());
            TestCluster::build_on(backend, format!("{}-{i}", self.name_prefix), transport)
        });
        let clusters = futures::future::try_join_all(starts).await?;
        let fleet = Fleet {
            clusters,
            backend,
            https: self.https,
            port,
            kubeconfig_dir: self.kubeconfig_dir,
        };
        if let Some(dir) = &fleet.kubeconfig_dir {
            fleet.write_kubeconfigs(dir)?;
        }
        Ok(fleet)
    }
}

fn transport(https: bool, port: Option<&Arc<SharedPort>>) -> Transport {
    match (https, port) {
        (_, Some(port)) => Transport::Shared(port.clone()),
        (true, None) => Transport::OwnPort,
        (false, None) => Transport::InProcess,
    }
}

fn check_cap(backend: Backend, clusters: usize) -> Result<(), Error> {
    if backend.is_real() && clusters > real::MAX_FLEET {
        return Err(Error::FleetTooLarge {
            requested: clusters,
            max: real::MAX_FLEET,
        });
    }
    Ok(())
}

fn kubeconfig_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.kubeconfig"))
}

impl Fleet {
    /// Starts `n` in-process clusters named `cluster-1` .. `cluster-n`.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let fleet = mcr_envtest::Fleet::start(2).await?;
    /// assert_eq!(fleet.clusters().len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn start(n: usize) -> Result<Fleet, Error> {
        Self::builder().clusters(n).start().await
    }

    /// A builder for other names, HTTPS, and kubeconfig files.
    ///
    /// ```
    /// let builder = mcr_envtest::Fleet::builder();
    /// ```
    pub fn builder() -> FleetBuilder {
        FleetBuilder::default()
    }

    /// The backend the clusters run on.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let fleet = mcr_envtest::Fleet::start(1).await?;
    /// assert_eq!(fleet.backend(), mcr_envtest::backend());
    /// # Ok(()) }
    /// ```
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The clusters, in creation order.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let fleet = mcr_envtest::Fleet::start(2).await?;
    /// for cluster in fleet.clusters() {
    ///     println!("{}", cluster.name());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn clusters(&self) -> &[TestCluster] {
        &self.clusters
    }

    /// The cluster with this name.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let fleet = mcr_envtest::Fleet::start(1).await?;
    /// assert!(fleet.get("cluster-1").is_some());
    /// # Ok(()) }
    /// ```
    pub fn get(&self, name: &str) -> Option<&TestCluster> {
        self.clusters.iter().find(|c| c.name() == name)
    }

    /// The cluster names, in creation order.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let fleet = mcr_envtest::Fleet::start(1).await?;
    /// assert_eq!(fleet.names(), ["cluster-1"]);
    /// # Ok(()) }
    /// ```
    pub fn names(&self) -> Vec<String> {
        self.clusters.iter().map(|c| c.name().to_string()).collect()
    }

    /// Starts one more cluster with the fleet's transport; writes its kubeconfig if the fleet
    /// has a kubeconfig directory.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let mut fleet = mcr_envtest::Fleet::start(1).await?;
    /// let late = fleet.add("late").await?;
    /// # Ok(()) }
    /// ```
    pub async fn add(&mut self, name: &str) -> Result<TestCluster, Error> {
        if self.get(name).is_some() {
            return Err(Error::DuplicateName(name.to_string()));
        }
        check_cap(self.backend, self.clusters.len() + 1)?;
        let transport = transport(self.https, self.port.as_ref());
        let cluster = TestCluster::build_on(self.backend, name.to_string(), transport).await?;
        if let Some(dir) = &self.kubeconfig_dir {
            cluster.write_kubeconfig(&kubeconfig_path(dir, name))?;
        }
        self.clusters.push(cluster.clone());
        Ok(cluster)
    }

    /// Stops a cluster, deletes its kubeconfig file (if written by the fleet) and returns it.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let mut fleet = mcr_envtest::Fleet::start(2).await?;
    /// let gone = fleet.remove("cluster-2").await.unwrap();
    /// assert!(fleet.get("cluster-2").is_none());
    /// # Ok(()) }
    /// ```
    pub async fn remove(&mut self, name: &str) -> Option<TestCluster> {
        let index = self.clusters.iter().position(|c| c.name() == name)?;
        let cluster = self.clusters.remove(index);
        cluster.stop().await;
        if let Some(dir) = &self.kubeconfig_dir {
            let path = kubeconfig_path(dir, name);
            if let Err(err) = std::fs::remove_file(&path) {
                tracing::warn!(cluster = name, path = %path.display(), %err, "could not delete kubeconfig");
            }
        }
        Some(cluster)
    }

    /// Writes `<dir>/<name>.kubeconfig` for every cluster (HTTPS fleets only) and returns the
    /// paths.
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), mcr_envtest::Error> {
    /// let fleet = mcr_envtest::Fleet::builder().clusters(2).https(true).start().await?;
    /// let paths = fleet.write_kubeconfigs(std::path::Path::new("/tmp/fleet"))?;
    /// assert_eq!(paths.len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn write_kubeconfigs(&self, dir: &Path) -> Result<Vec<PathBuf>, Error> {
        std::fs::create_dir_all(dir)?;
        self.clusters
            .iter()
            .map(|cluster| {
                let path = kubeconfig_path(dir, cluster.name());
                cluster.write_kubeconfig(&path)?;
                Ok(path)
            })
            .collect()
    }
}
