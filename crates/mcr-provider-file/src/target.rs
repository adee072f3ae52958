//! [`Target`]: what the provider wants under one cluster name, without the kubeconfig's
//! contents.

use std::path::Path;
use std::sync::Arc;

use kube::config::Kubeconfig;
use mcr_core::members::Connection;
use mcr_core::{BoxError, BoxFuture, Connect, Source, kubeconfig};

use crate::refs::{reads_ca_file, referenced_files, with_file_contents};

/// One context of one kubeconfig file, as a pass read it: the file, the context, and the hash
/// of the connection it yielded (the kubeconfig's entries and the files they read by path).
///
/// The parsed kubeconfig is not kept: the table reads the file again when it brings the member
/// up (the target is its [`Connect`] source), and only while this replica owns the member. Every replica of a sharded controller reads every file, so a
/// cluster another replica owns costs this one a path, a context name and a hash, and its
/// credentials stay on disk. Its key is the hash: a new hash (the file, or a file it reads,
/// changed) brings the member to the new connection.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The file (shared by the file's contexts).
    file: Arc<Path>,
    context: Box<str>,
    hash: Box<str>,
    renewable: bool,
}

/// The path and context only: never the kubeconfig's contents.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("file", &self.file)
            .field("context", &self.context)
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// The target of `context` in `kc`, read from `file`.
    pub(crate) fn of(
        file: &Arc<Path>,
        kc: &Arc<Kubeconfig>,
        context: &str,
    ) -> Result<Target, kubeconfig::Error> {
        let connection = connection(kc, context)?;
        Ok(Target {
            file: file.clone(),
            context: context.into(),
            hash: connection.hash().into(),
            renewable: !reads_ca_file(kc, context),
        })
    }

    /// Reads the file again (off the runtime) and builds the connection of this context. The
    /// file may have changed since the pass: the connection is what it says now, and the next
    /// pass hands out the matching target. A file that is missing or invalid now fails.
    async fn read(&self) -> Result<Connection, kubeconfig::Error> {
        let target = self.clone();
        let read = tokio::task::spawn_blocking(move || kubeconfig::read(&target.file)).await;
        let kc = match read {
            Ok(Ok(kc)) => Arc::new(kc),
            Ok(Err(source)) => return Err(source),
            Err(join) => {
                return Err(kubeconfig::Error::Read {
                    path: self.file.to_path_buf(),
                    reason: format!("reading the file failed: {join}"),
                });
            }
        };
        connection(&kc, &self.context)
    }
}

/// The connection of one context: hashed together with the files it reads by path, renewable
/// in place unless it reads its CA from a file.
fn connection(kc: &Arc<Kubeconfig>, context: &str) -> Result<Connection, kubeconfig::Error> {
    let connection = Connection::new(kc.clone(), Some(context))?;
    // A rotated certificate, key, CA or token file changes the hash; a CA file the kubeconfig
    // only names cannot be compared, so its member is rebuilt rather than renewed.
    let hash = with_file_contents(connection.hash().to_owned(), &referenced_files(kc, context));
    Ok(connection
        .with_hash(hash)
        .renewable(!reads_ca_file(kc, context)))
}

impl Connect for Target {
    fn key(&self) -> String {
        self.hash.to_string()
    }

    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        Box::pin(async move {
            let connection = self.read().await?;
            Ok(Source::Kubeconfig(connection))
        })
    }

    /// A file that is missing or invalid, or a context that does not resolve, waits for the
    /// next pass, which a fix of the file triggers.
    fn is_retryable(&self, _: &BoxError) -> bool {
        false
    }
}
