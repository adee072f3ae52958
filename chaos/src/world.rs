//! The outside world of the manager: the member clusters (emulated or real), their kubeconfig
//! files in the directory the file provider watches, and the objects the loader writes.
//!
//! Joining writes a member's kubeconfig file, leaving removes it, rotating rewrites it with a
//! new credential (alternately the cluster's bearer token and a freshly minted client
//! certificate), so the provider sees a new connection and replaces the member.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use mcr_envtest::{Backend, Fleet, TestCluster};

/// Label every chaos object carries (the controllers select on it).
pub const LABEL: &str = "mcr-chaos";
/// Subdirectory of the members' kubeconfig files.
const MEMBERS: &str = "members";
/// Namespace of the chaos objects.
pub const NAMESPACE: &str = "default";
/// The value every object is created with (an absent annotation reads as 0).
pub const FIRST: u64 = 1;

/// One member cluster and its kubeconfig file.
pub struct Member {
    /// The cluster.
    pub tc: TestCluster,
    /// Its kubeconfig file in the provider's directory.
    pub path: PathBuf,
    /// Whether the file is there (the member should be engaged).
    pub present: bool,
    /// Whether the file holds a client-certificate credential (else the bearer token).
    cert: bool,
}

/// The member fleet, its kubeconfig directory and its objects.
pub struct World {
    /// Kept for its lifetime: dropping it stops the clusters.
    _fleet: Fleet,
    /// The provider's directory (removed on drop).
    dir: tempfile::TempDir,
    /// The members, by index.
    pub members: Vec<Member>,
    /// Objects per member (`chaos-0` ..).
    pub objects: usize,
    /// Real control planes (`MCR_ENVTEST=real`) rather than the emulator.
    pub real: bool,
}

/// The name of object `i`.
pub fn object_name(i: usize) -> String {
    format!("chaos-{i}")
}

impl World {
    /// Starts `n` HTTPS members on the backend `MCR_ENVTEST` selects, each with `objects`
    /// labelled ConfigMaps; no kubeconfig is written yet.
    pub async fn start(n: usize, objects: usize) -> Result<World> {
        let backend = Backend::from_env().context("MCR_ENVTEST")?;
        let fleet = Fleet::builder()
            .clusters(n)
            .https(true)
            .name_prefix("member")
            .backend(backend)
            .start()
            .await
            .context("starting the member fleet")?;
        let dir = tempfile::Builder::new().prefix("mcr-chaos-").tempdir()?;
        std::fs::create_dir(dir.path().join(MEMBERS))?;
        let mut members = Vec::with_capacity(n);
        for tc in fleet.clusters() {
            let path = dir
                .path()
                .join(MEMBERS)
                .join(format!("{}.kubeconfig", tc.name()));
            let api: Api<ConfigMap> = Api::namespaced(tc.client(), NAMESPACE);
            for i in 0..objects {
                let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": object_name(i), "labels": {LABEL: "1"}},
                    "data": {"v": FIRST.to_string()},
                }))?;
                api.create(&PostParams::default(), &cm)
                    .await
                    .with_context(|| format!("creating {} in {}", object_name(i), tc.name()))?;
            }
            members.push(Member {
                tc: tc.clone(),
                path,
                present: false,
                cert: false,
            });
        }
        Ok(World {
            real: backend == Backend::Real,
            _fleet: fleet,
            dir,
            members,
            objects,
        })
    }

    /// The directory the file provider watches.
    pub fn members_dir(&self) -> PathBuf {
        self.dir.path().join(MEMBERS)
    }

    /// Writes the host's kubeconfig (outside the members' directory); its path.
    pub fn write_host(&self, host: &TestCluster) -> Result<PathBuf> {
        let path = self.dir.path().join("host.yaml");
        let yaml = host
            .kubeconfig_yaml()
            .context("the host has no kubeconfig")?;
        write_atomic(&path, &yaml)?;
        Ok(path)
    }

    /// Indices of the members whose file is present.
    pub fn live(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i].present)
            .collect()
    }

    /// Index of the member an engaged cluster name (`<path>+<context>`) refers to.
    pub fn index_of(&self, engaged: &str) -> Option<usize> {
        let context = engaged.rsplit('+').next()?;
        self.members.iter().position(|m| m.tc.name() == context)
    }

    /// Writes member `i`'s kubeconfig (its current credential): it joins.
    pub fn join(&mut self, i: usize) -> Result<()> {
        let member = &mut self.members[i];
        let yaml = credential(&member.tc, member.cert)?;
        write_atomic(&member.path, &yaml)?;
        member.present = true;
        Ok(())
    }

    /// Removes member `i`'s kubeconfig: it leaves.
    pub fn leave(&mut self, i: usize) -> Result<()> {
        let member = &mut self.members[i];
        std::fs::remove_file(&member.path)
            .with_context(|| format!("removing {}", member.path.display()))?;
        member.present = false;
        Ok(())
    }

    /// Rewrites member `i`'s kubeconfig with the other kind of credential (a new one).
    pub fn rotate(&mut self, i: usize) -> Result<()> {
        self.members[i].cert = !self.members[i].cert;
        self.join(i)
    }
}

/// A kubeconfig for `tc`: its bearer token, or a new client certificate valid for a day.
fn credential(tc: &TestCluster, cert: bool) -> Result<String> {
    if cert {
        let day = Duration::from_secs(24 * 3600);
        let (yaml, _) = tc
            .client_certificate_kubeconfig("mcr-chaos", &["system:masters"], day)
            .with_context(|| format!("minting a client certificate for {}", tc.name()))?;
        Ok(yaml)
    } else {
        tc.kubeconfig_yaml()
            .with_context(|| format!("{} has no kubeconfig", tc.name()))
    }
}

/// Writes `contents` to a temporary name beside `path` and renames it into place, so the
/// provider never reads half a file.
fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{}.tmp", name.unwrap_or_default()));
    std::fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}
