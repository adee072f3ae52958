//! One reconciliation pass: the whole fleet against what is on disk now.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcr_core::members::Members;
use mcr_core::{ClusterId, ClusterName, ErrorChain, MemberState, Source};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::scan::{Found, cluster_name, scan};
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
    /// What the last pass wants under each cluster name: the one record of which file owns
    /// which name (a file that cannot be read keeps its names from here).
    pub(crate) wanted: BTreeMap<ClusterName, Wanted>,
    generation: u64,
}

/// What the files say about one cluster name: the (file, context) pair that owns it, and
/// what its member connects with.
pub(crate) struct Wanted {
    /// The file (shared by the file's contexts).
    file: Arc<Path>,
    context: Box<str>,
    /// Its [`Target`](crate::target::Target), or an unusable source for a context that does
    /// not resolve; `None`: the file cannot be read or parsed, and the member is kept as it is.
    source: Option<Source>,
}

/// What one read of the files found besides [`PassState::wanted`].
#[derive(Default)]
pub(crate) struct Disk {
    /// Files the wanted contexts read by path (certificates, keys, CA, tokens).
    pub(crate) referenced: BTreeSet<PathBuf>,
    /// Files that could not be read or parsed.
    pub(crate) invalid_files: Vec<Error>,
    /// Contexts that do not yield a connection, or lost their name to another pair.
    pub(crate) failed: Vec<Error>,
}

/// Reads every configured file (a blocking scan, off the runtime) into what each cluster should
/// be ([`PassState::wanted`]). Builds nothing and contacts no cluster, so it is quick whatever
/// state the members are in.
pub(crate) async fn read(opts: &Arc<Options>, state: &mut PassState) -> Disk {
    let mut disk = Disk::default();
    let scan_opts = opts.clone();
    let files = match tokio::task::spawn_blocking(move || scan(&scan_opts)).await {
        Ok(files) => files,
        Err(err) => {
            error!(error = %err, "scanning kubeconfig files failed; fleet left unchanged");
            for wanted in state.wanted.values_mut() {
                wanted.source = None;
            }
            return disk;
        }
    };
    let previous = std::mem::take(&mut state.wanted);
    let wanted = &mut state.wanted;
    for file in files {
        let path: Arc<Path> = Arc::from(file.path.as_path());
        let found = match file.result {
            Ok(found) => found,
            Err(source) => {
                let kept: Vec<_> = previous.iter().filter(|(_, w)| w.file == path).collect();
                warn!(file = %file.path.display(), error = %source, kept = kept.len(),
                    "invalid or unreadable kubeconfig file: keeping its last good clusters");
                for (name, w) in kept {
                    let keep = Wanted {
                        file: path.clone(),
                        context: w.context.clone(),
                        source: None,
                    };
                    claim(wanted, name.clone(), keep, &mut disk.failed);
                }
                disk.invalid_files.push(Error::File {
                    path: file.path,
                    source,
                });
                continue;
            }
        };
        for Found {
            context,
            target,
            referenced,
        } in found
        {
            let name = ClusterName::new(cluster_name(&file.path, &opts.separator, &context));
            let (source, unusable) = match target {
                Ok(target) => (Source::Connect(Arc::new(target)), None),
                // Wanted all the same: reported failed, and an instance that ran before keeps
                // serving.
                Err(err) => (Source::unusable(ErrorChain(&err)), Some(err)),
            };
            let mine = Wanted {
                file: path.clone(),
                context: context.into(),
                source: Some(source),
            };
            if !claim(wanted, name.clone(), mine, &mut disk.failed) {
                continue;
            }
            match unusable {
                None => disk.referenced.extend(referenced),
                Some(source) => {
                    error!(cluster = %name, error = %source, "context of kubeconfig file not usable");
                    disk.failed.push(Error::Context {
                        cluster: name,
                        source,
                    });
                }
            }
        }
    }
    // Built by inserting name after name, in order, the map's nodes are each about half
    // empty, and it is kept until the next pass: built again from its entries (sorted),
    // its nodes are full (about 0.1 KiB less per cluster).
    state.wanted = std::mem::take(&mut state.wanted).into_iter().collect();
    state.generation += 1;
    disk
}

/// `mine` claims `name` in `wanted`. Two (file, context) pairs can map to one name
/// (`/d/a.kubeconfig` with context `b.kubeconfig+c` and `/d/a.kubeconfig+b.kubeconfig` with
/// context `c`, or two non-UTF-8 paths that read alike): the pair that sorts first (path, then
/// context) owns it, on every pass and after every restart, whatever was read first, and
/// whether its file can be read now or not; the other is logged with both and reported in
/// `failed` as [`Error::NameConflict`]. Returns whether `mine` owns the name now.
fn claim(
    wanted: &mut BTreeMap<ClusterName, Wanted>,
    name: ClusterName,
    mine: Wanted,
    failed: &mut Vec<Error>,
) -> bool {
    let Some(other) = wanted.get(&name) else {
        wanted.insert(name, mine);
        return true;
    };
    let pair = |w: &Wanted| (w.file.to_path_buf(), w.context.to_string());
    let (theirs, ours) = (pair(other), pair(&mine));
    if theirs == ours {
        warn!(file = %ours.0.display(), context = %ours.1,
            "duplicate context name in kubeconfig file, using the first");
        return false;
    }
    let owns = ours < theirs;
    let ((owner_path, owner_context), (path, context)) =
        if owns { (ours, theirs) } else { (theirs, ours) };
    warn!(cluster = %name, file = %path.display(), context = %context,
        owner_file = %owner_path.display(), owner_context = %owner_context,
        "two kubeconfig contexts map to the same cluster name: the one whose file path sorts first owns it, the other is ignored");
    failed.push(Error::NameConflict {
        cluster: name.clone(),
        path,
        context,
        owner_path,
        owner_context,
    });
    if owns {
        wanted.insert(name, mine);
    }
    owns
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
    let connecting: Vec<&ClusterName> = state
        .wanted
        .iter()
        .filter_map(|(name, w)| w.source.as_ref().map(|_| name))
        .collect();
    let before: BTreeMap<ClusterName, (ClusterId, u64)> = connecting
        .iter()
        .filter_map(|name| Some(((*name).clone(), instance(&engagements.get(name).ok()?))))
        .collect();
    report.removed = want(members, token, &state.wanted);
    for name in connecting {
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

/// Wants every cluster of `wanted` with a source (the table builds, renews or replaces each on
/// its own time: a member whose plugin or server hangs delays only itself; a member of an
/// unreadable file is left as it is) and removes the members whose file or context is gone;
/// returns the names removed.
pub(crate) fn want(
    members: &Members,
    token: &CancellationToken,
    wanted: &BTreeMap<ClusterName, Wanted>,
) -> Vec<ClusterName> {
    for (name, w) in wanted {
        let Some(source) = &w.source else {
            continue;
        };
        if let Err(err) = members.want(token, name, source.clone()) {
            error!(cluster = %name, error = %ErrorChain(&err), "cluster from kubeconfig file refused");
        }
    }
    let mut removed = Vec::new();
    for (name, _) in members.engagements().member_states() {
        if !wanted.contains_key(&name) && members.remove(&name) {
            info!(cluster = %name, "kubeconfig file or context gone: cluster removed");
            removed.push(name);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(path: &str, context: &str, source: Option<Source>) -> Wanted {
        Wanted {
            file: Arc::from(Path::new(path)),
            context: context.into(),
            source,
        }
    }

    /// Whatever the order the pairs are read in, and whether the owner's file can be read
    /// now or not (its name kept from the last pass), the pair that sorts first owns the name
    /// and the other is the conflict.
    #[test]
    fn the_pair_that_sorts_first_owns_a_name_whatever_the_order() {
        let name = ClusterName::new("/d/a.kubeconfig+b.kubeconfig+c");
        let pairs = [
            ("/d/a.kubeconfig+b.kubeconfig", "c"),
            ("/d/a.kubeconfig", "b.kubeconfig+c"),
        ];
        for owner_readable in [true, false] {
            for order in [[0, 1], [1, 0]] {
                let (mut map, mut failed) = (BTreeMap::new(), Vec::new());
                let mut owns = Vec::new();
                for i in order {
                    let (path, context) = pairs[i];
                    // The owner's file, when unreadable, keeps its name without a source.
                    let source = (i == 0 || owner_readable).then(|| Source::unusable("x"));
                    let mine = wanted(path, context, source);
                    owns.push(claim(&mut map, name.clone(), mine, &mut failed));
                }
                assert_eq!(owns, [true, order[1] == 1]);
                assert_eq!(&*map[&name].file, Path::new("/d/a.kubeconfig"));
                assert_eq!(map[&name].source.is_some(), owner_readable);
                let [
                    Error::NameConflict {
                        path, owner_path, ..
                    },
                ] = &failed[..]
                else {
                    panic!("one conflict is reported: {failed:?}")
                };
                assert_eq!(owner_path, Path::new("/d/a.kubeconfig"));
                assert_eq!(path, Path::new("/d/a.kubeconfig+b.kubeconfig"));
            }
        }
    }

    #[test]
    fn a_duplicate_context_of_one_file_is_no_conflict() {
        let name = ClusterName::new("/d/a.kubeconfig+c");
        let (mut map, mut failed) = (BTreeMap::new(), Vec::new());
        assert!(claim(
            &mut map,
            name.clone(),
            wanted("/d/a.kubeconfig", "c", None),
            &mut failed
        ));
        assert!(!claim(
            &mut map,
            name,
            wanted("/d/a.kubeconfig", "c", None),
            &mut failed
        ));
        assert!(failed.is_empty() && map.len() == 1);
    }
}
