//! One reconciliation pass: the whole fleet against what is on disk now.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use mcr_core::members::Members;
use mcr_core::{ClusterId, ClusterName, ErrorChain, MemberState, Source};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::scan::{Found, Owners, cluster_name, scan};
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
    /// Contexts that do not resolve, that map to a cluster name another context owns
    /// ([`Error::NameConflict`]), or whose member failed to come up ([`Error::Failed`]: a
    /// previously engaged instance is kept).
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

/// What the files on disk say now: one source per cluster name.
pub(crate) struct Disk {
    /// What each cluster should connect with (its [`Target`](crate::target::Target), or an
    /// unusable source for a context that does not resolve).
    pub(crate) desired: BTreeMap<ClusterName, Source>,
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
                            disk.desired.insert(name, Source::Connect(Arc::new(target)));
                        }
                        Err(source) => {
                            error!(cluster = %name, error = %source, "context of kubeconfig file not usable");
                            // Wanted all the same: reported failed, and an instance that
                            // ran before keeps serving.
                            let reason = mcr_core::ErrorChain(&source).to_string();
                            disk.desired.insert(name.clone(), Source::unusable(reason));
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

/// Runs one pass to its end: reads the files, wants every member as they say, removes the
/// members whose file or context is gone, and waits until every member wanted has settled
/// (engaged with what the file says now, failed, or owned by another replica), so the report
/// is complete. Passes are serialized by the caller (the state lock).
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
    let engagements = members.engagements();
    let before: BTreeMap<ClusterName, (ClusterId, u64)> = disk
        .desired
        .keys()
        .filter_map(|name| Some((name.clone(), instance(&engagements.get(name).ok()?))))
        .collect();
    report.removed = want(members, token, &disk);
    for name in disk.desired.keys() {
        match engagements.until_settled(name).await {
            Some(MemberState::Engaged) => {
                let Ok(cluster) = engagements.get(name) else {
                    continue;
                };
                let list = match before.get(name) {
                    None => &mut report.added,
                    Some((id, _)) if *id != cluster.id() => &mut report.replaced,
                    Some((_, renewals)) if *renewals != instance(&cluster).1 => &mut report.renewed,
                    Some(_) => &mut report.unchanged,
                };
                list.push(name.clone());
            }
            // An unusable context is in the report already.
            Some(MemberState::Failed { .. })
                if report.failed.iter().any(|e| e.cluster() == Some(name)) => {}
            Some(MemberState::Failed { reason, retry_in }) => report.failed.push(Error::Failed {
                cluster: name.clone(),
                reason,
                retry_in,
            }),
            _ => {}
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

/// An instance's id and how often its credentials were renewed in place.
fn instance(cluster: &mcr_core::Cluster) -> (ClusterId, u64) {
    let renewals = cluster.credentials().map_or(0, |c| c.status().renewals);
    (cluster.id(), renewals)
}

/// Wants every cluster of `disk` (the table builds, renews or replaces each on its own time:
/// a member whose plugin or server hangs delays only itself) and removes the members whose
/// file or context is gone; returns the names removed.
pub(crate) fn want(members: &Members, token: &CancellationToken, disk: &Disk) -> Vec<ClusterName> {
    for (name, source) in &disk.desired {
        if let Err(err) = members.want(token, name, source.clone()) {
            error!(cluster = %name, error = %ErrorChain(&err), "cluster from kubeconfig file refused");
        }
    }
    let mut removed = Vec::new();
    for (name, _) in members.engagements().member_states() {
        if disk.drops(&name) && members.remove(&name) {
            info!(cluster = %name, "kubeconfig file or context gone: cluster removed");
            removed.push(name);
        }
    }
    removed
}
