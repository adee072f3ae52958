//! One reconciliation pass: the whole fleet against what is on disk now.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use std::time::Duration;

use mcr_core::members::{self, Converge, Ensured, Member, Members};
use mcr_core::{BoxFuture, ClusterName};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::scan::{Found, Owners, cluster_name, scan};
use crate::target::Target;
use crate::{Error, Options};

/// What one pass over the configured files did.
///
/// ```no_run
/// # async fn f(p: &mcr_provider_file::FileProvider, token: tokio_util::sync::CancellationToken,
/// # ) {
/// let report = p.run_once(&token).await;
/// println!("+{} ~{} -{}", report.added.len(), report.replaced.len(), report.removed.len());
/// # }
/// ```
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct PassReport {
    /// Number of passes completed by this provider, this one included.
    pub generation: u64,
    /// Clusters engaged for the first time.
    pub added: Vec<ClusterName>,
    /// Clusters whose connection changed: a new instance replaced the old one.
    pub replaced: Vec<ClusterName>,
    /// Clusters whose credentials alone changed (same server, CA and settings): renewed in
    /// place, same instance, caches kept.
    pub renewed: Vec<ClusterName>,
    /// Clusters kept as they were (same connection hash).
    pub unchanged: Vec<ClusterName>,
    /// Clusters removed (file or context gone).
    pub removed: Vec<ClusterName>,
    /// Contexts that failed to build (a previously engaged instance is kept) or to engage, or
    /// that map to a cluster name another context owns ([`Error::NameConflict`]).
    pub failed: Vec<Error>,
    /// Files that could not be read or parsed; their last good clusters were kept.
    pub invalid_files: Vec<Error>,
}

impl PassReport {
    /// Whether some failure is worth retrying without a file change.
    ///
    /// ```
    /// assert!(!mcr_provider_file::PassReport::default().needs_retry());
    /// ```
    pub fn needs_retry(&self) -> bool {
        self.failed.iter().any(Error::is_retryable)
    }
}

/// What survives between passes.
#[derive(Default)]
pub(crate) struct PassState {
    /// Cluster names from each file's last successful read.
    owned: BTreeMap<PathBuf, BTreeSet<ClusterName>>,
    generation: u64,
}

/// What the files on disk say now: one [`Target`] per cluster name.
pub(crate) struct Disk {
    /// What each cluster should connect with.
    pub(crate) desired: BTreeMap<ClusterName, Target>,
    /// Clusters of files that could not be read or parsed: kept as they are.
    pub(crate) protected: BTreeSet<ClusterName>,
    /// Files the desired contexts read by path (certificates, keys, CA, tokens).
    pub(crate) referenced: BTreeSet<PathBuf>,
    /// Files that could not be read or parsed.
    pub(crate) invalid_files: Vec<Error>,
    /// Contexts that do not yield a connection.
    pub(crate) failed: Vec<Error>,
}

impl Disk {
    /// Whether `name` should be removed: neither desired nor kept for an invalid file.
    pub(crate) fn drops(&self, name: &ClusterName) -> bool {
        !self.desired.contains_key(name) && !self.protected.contains(name)
    }
}

/// Reads every configured file (a blocking scan, off the runtime) into what each cluster should
/// be, and records which file owns which names. Builds nothing and contacts no cluster, so it
/// is quick whatever state the members are in.
pub(crate) async fn read(opts: &Arc<Options>, state: &mut PassState) -> Disk {
    let mut disk = Disk {
        desired: BTreeMap::new(),
        protected: BTreeSet::new(),
        referenced: BTreeSet::new(),
        invalid_files: Vec::new(),
        failed: Vec::new(),
    };
    let scan_opts = opts.clone();
    let files = match tokio::task::spawn_blocking(move || scan(&scan_opts)).await {
        Ok(files) => files,
        Err(err) => {
            error!(error = %err, "scanning kubeconfig files failed; fleet left unchanged");
            disk.protected = state.owned.values().flatten().cloned().collect();
            return disk;
        }
    };
    let mut owned = BTreeMap::new();
    let mut owners = Owners::default();
    for file in files {
        match file.result {
            Err(source) => {
                let kept = state.owned.get(&file.path).cloned().unwrap_or_default();
                warn!(file = %file.path.display(), error = %source, kept = kept.len(),
                    "invalid or unreadable kubeconfig file: keeping its last good clusters");
                disk.protected.extend(kept.iter().cloned());
                owned.insert(file.path.clone(), kept);
                disk.invalid_files.push(Error::File {
                    path: file.path,
                    source,
                });
            }
            Ok(found) => {
                let mut names = BTreeSet::new();
                for Found {
                    context,
                    target,
                    referenced,
                } in found
                {
                    let name =
                        ClusterName::new(cluster_name(&file.path, &opts.separator, &context));
                    if !names.insert(name.clone()) {
                        warn!(file = %file.path.display(), context = %context,
                            "duplicate context name in kubeconfig file, using the first");
                        continue;
                    }
                    let (owns, conflict) = owners.claim(&name, &file.path, &context);
                    disk.failed.extend(conflict);
                    if !owns {
                        continue;
                    }
                    match target {
                        Ok(target) => {
                            disk.referenced.extend(referenced);
                            disk.desired.insert(name, target);
                        }
                        Err(source) => {
                            error!(cluster = %name, error = %source, "context of kubeconfig file not usable");
                            disk.failed.push(Error::Context {
                                cluster: name,
                                source,
                            });
                        }
                    }
                }
                owned.insert(file.path, names);
            }
        }
    }
    state.owned = owned;
    state.generation += 1;
    disk
}

/// Runs one pass to its end: reads the files, brings every member to what they say (awaiting
/// each, so the report is complete) and removes the members whose file or context is gone.
/// Passes are serialized by the caller (the state lock).
pub(crate) async fn pass(
    opts: &Arc<Options>,
    members: &Members,
    state: &mut PassState,
    token: &CancellationToken,
) -> PassReport {
    let mut disk = read(opts, state).await;
    let mut report = PassReport {
        generation: state.generation,
        failed: std::mem::take(&mut disk.failed),
        invalid_files: std::mem::take(&mut disk.invalid_files),
        ..PassReport::default()
    };
    let attempts = disk.desired.iter().map(|(name, target)| {
        let span = info_span!("file_cluster", cluster = %name);
        ensure(members, token, name, target).instrument(span)
    });
    for (name, result) in disk
        .desired
        .keys()
        .zip(futures::future::join_all(attempts).await)
    {
        match result {
            Ok(Ensured::Added(_)) => report.added.push(name.clone()),
            Ok(Ensured::Replaced(_)) => report.replaced.push(name.clone()),
            Ok(Ensured::Renewed(_)) => report.renewed.push(name.clone()),
            Ok(Ensured::Unchanged(_)) => report.unchanged.push(name.clone()),
            Err(err) => {
                error!(cluster = %name, error = %err, "cluster from kubeconfig file not engaged");
                report.failed.push(err);
            }
        }
    }
    // Failed members too, so their records go with their file.
    for name in members.known_names() {
        if disk.drops(&name) && members.remove(&name) {
            info!(cluster = %name, "kubeconfig file or context gone: cluster removed");
            report.removed.push(name);
        }
    }
    debug!(
        generation = report.generation,
        added = report.added.len(),
        replaced = report.replaced.len(),
        removed = report.removed.len(),
        failed = report.failed.len(),
        "kubeconfig files reconciled"
    );
    report
}

/// Brings one context's cluster to what the file says (unchanged, renewed in place, added or
/// replaced) through [`Members::ensure`].
async fn ensure(
    members: &Members,
    token: &CancellationToken,
    name: &ClusterName,
    target: &Target,
) -> Result<Ensured, Error> {
    let connection = target.connect(name).await?;
    let ensured = members
        .ensure(token, name, &connection)
        .await
        .map_err(Error::from_member)?;
    info!(outcome = ?ensured, "cluster from kubeconfig file engaged");
    Ok(ensured)
}

/// The running provider's per-member work: each cluster name has its own worker
/// ([`Workers`](mcr_core::members::Workers)), so a member whose plugin or server hangs delays only itself.
pub(crate) struct FileMembers;

impl Converge for FileMembers {
    type Desired = Target;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Target>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let connection = member.desired().connect(member.name()).await?;
            let ensured = member
                .ensure(&connection)
                .await
                .map_err(Error::from_member)?;
            info!(outcome = ?ensured, "cluster from kubeconfig file engaged");
            Ok(())
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, member: &Member<Target>, error: &Error, retry_in: Option<Duration>) {
        error!(cluster = %member.name(), error = %error, retry_in = ?retry_in,
            "cluster from kubeconfig file not engaged");
    }

    fn removed(&self, name: &ClusterName) {
        info!(cluster = %name, "kubeconfig file or context gone: cluster removed");
    }
}
impl Error {
    /// The member helper's error.
    fn from_member(err: members::Error) -> Error {
        match err {
            members::Error::PolicyDenied { cluster, source } => {
                Error::PolicyDenied { cluster, source }
            }
            members::Error::Kubeconfig { cluster, source } => Error::Context { cluster, source },
            members::Error::Engage { cluster, source } => Error::Engage { cluster, source },
            source => Error::Member { source },
        }
    }
}
