//! One reconciliation pass: the whole fleet against what is on disk now.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use kube::config::Kubeconfig;
use mcr_core::members::{self, Connection, Ensured, Members};
use mcr_core::{Aware, ClusterName, kubeconfig};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::refs::{reads_ca_file, referenced_files, with_file_contents};
use crate::scan::{cluster_name, scan};
use crate::{Error, Options};

/// What one pass over the configured files did.
///
/// ```no_run
/// # async fn f(p: &mcr_provider_file::FileProvider, token: tokio_util::sync::CancellationToken,
/// #            aware: std::sync::Arc<dyn mcr_core::Aware>) {
/// let report = p.run_once(&token, aware).await;
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
    /// Contexts that failed to build (a previously engaged instance is kept) or to engage.
    pub failed: Vec<Error>,
    /// Files that could not be read or parsed; their last good clusters were kept.
    pub invalid_files: Vec<Error>,
    /// Files the engaged contexts read by path (CA, client certificate and key, `tokenFile`):
    /// watched, and part of each cluster's connection hash.
    pub(crate) referenced: BTreeSet<PathBuf>,
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

/// Runs one pass. Passes are serialized by the caller (the state lock).
pub(crate) async fn pass(
    opts: &Arc<Options>,
    members: &Members,
    state: &mut PassState,
    token: &CancellationToken,
    aware: &dyn Aware,
) -> PassReport {
    let mut report = PassReport::default();
    let scan_opts = opts.clone();
    let files = match tokio::task::spawn_blocking(move || scan(&scan_opts)).await {
        Ok(files) => files,
        Err(err) => {
            error!(error = %err, "scanning kubeconfig files failed; fleet left unchanged");
            return report;
        }
    };

    let mut desired: BTreeMap<ClusterName, (Arc<Kubeconfig>, String)> = BTreeMap::new();
    let mut protected: BTreeSet<ClusterName> = BTreeSet::new();
    let mut owned = BTreeMap::new();
    for file in files {
        match file.result {
            Err(source) => {
                let kept = state.owned.get(&file.path).cloned().unwrap_or_default();
                warn!(file = %file.path.display(), error = %source, kept = kept.len(),
                    "invalid or unreadable kubeconfig file: keeping its last good clusters");
                protected.extend(kept.iter().cloned());
                owned.insert(file.path.clone(), kept);
                report.invalid_files.push(Error::File {
                    path: file.path,
                    source,
                });
            }
            Ok(kc) => {
                let mut names = BTreeSet::new();
                for context in kubeconfig::contexts(&kc) {
                    let name =
                        ClusterName::new(cluster_name(&file.path, &opts.separator, &context));
                    if !names.insert(name.clone()) {
                        warn!(file = %file.path.display(), context = %context,
                            "duplicate context name in kubeconfig file, using the first");
                        continue;
                    }
                    desired.insert(name, (kc.clone(), context));
                }
                owned.insert(file.path, names);
            }
        }
    }

    report.referenced = desired
        .values()
        .flat_map(|(kc, context)| referenced_files(kc, context))
        .collect();
    let attempts = desired.iter().map(|(name, (kc, context))| {
        let span = info_span!("file_cluster", cluster = %name);
        engage(members, token, aware, name, kc, context).instrument(span)
    });
    for (name, result) in desired
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
        if !desired.contains_key(&name) && !protected.contains(&name) && members.remove(&name) {
            info!(cluster = %name, "kubeconfig file or context gone: cluster removed");
            report.removed.push(name);
        }
    }

    state.owned = owned;
    state.generation += 1;
    report.generation = state.generation;
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
async fn engage(
    members: &Members,
    token: &CancellationToken,
    aware: &dyn Aware,
    name: &ClusterName,
    kc: &Arc<Kubeconfig>,
    context: &str,
) -> Result<Ensured, Error> {
    let connection =
        Connection::new(kc.clone(), Some(context)).map_err(|source| Error::Context {
            cluster: name.clone(),
            source,
        })?;
    // A rotated certificate, key, CA or token file changes the hash; a CA file the kubeconfig
    // only names cannot be compared, so its member is rebuilt rather than renewed.
    let hash = with_file_contents(connection.hash().to_owned(), &referenced_files(kc, context));
    let connection = connection
        .with_hash(hash)
        .renewable(!reads_ca_file(kc, context));
    let ensured = members
        .ensure(token, aware, name, &connection)
        .await
        .map_err(Error::from_member)?;
    info!(outcome = ?ensured, "cluster from kubeconfig file engaged");
    Ok(ensured)
}

impl Error {
    /// The member helper's error.
    fn from_member(err: members::Error) -> Error {
        match err {
            members::Error::PolicyDenied { cluster, source } => {
                Error::ExecDenied { cluster, source }
            }
            members::Error::Kubeconfig { cluster, source } => Error::Context { cluster, source },
            members::Error::Engage { cluster, source } => Error::Engage { cluster, source },
            source => Error::Member { source },
        }
    }
}
