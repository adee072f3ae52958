//! [`KindSource`]: one kind cluster as the [`Engagements`](mcr_core::Engagements) table asks
//! for it.

use std::sync::Arc;

use mcr_core::{BoxError, BoxFuture, ClusterName, Connect, Source};

use crate::cli::KindCli;

/// The member of one kind cluster: the table runs `kind get kubeconfig` through it when it
/// brings the member up, and only then (never for a cluster another replica owns). The
/// kubeconfig is built, probed, renewed or replaced by the table like any other.
pub(crate) struct KindSource {
    pub(crate) cli: Arc<KindCli>,
    pub(crate) name: ClusterName,
    /// The connection hash of the kubeconfig a refresh saw, when it differed from the engaged
    /// instance's (a recreated cluster): a new key, so the table brings the member to it.
    pub(crate) seen: Option<String>,
}

impl Connect for KindSource {
    fn key(&self) -> String {
        self.seen.clone().unwrap_or_default()
    }

    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        Box::pin(async move {
            let connection = self.cli.connection(self.name.as_str()).await?;
            Ok(Source::Kubeconfig(connection))
        })
    }
}
