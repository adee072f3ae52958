//! The [`KindProvider`]: polls `kind get clusters` and wants one member per kind cluster.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use mcr_core::backoff::Backoff;
use mcr_core::members::{MemberProvider, Members};
use mcr_core::{Cluster, ClusterName, ErrorChain, Source};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::cli::KindCli;
use crate::source::KindSource;
use crate::{Error, Options};

/// Failed lists are retried after the poll interval, doubling up to this.
const LIST_BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Engages the local kind clusters (optionally those whose name has a prefix) as the fleet.
///
/// Cheap to clone (an `Arc` inside); start it once (usually by handing it to the manager). See
/// the crate documentation for the behaviour.
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_core::{ProviderRunnable, Engagements};
/// use mcr_provider_kind::{KindProvider, Options};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run() -> Result<(), mcr_core::Error> {
/// let provider = KindProvider::new(Options { prefix: Some("fleet-".into()), ..Options::default() });
/// provider.start(CancellationToken::new(), Engagements::new()).await
/// # }
/// ```
#[derive(Clone)]
pub struct KindProvider {
    inner: Arc<Inner>,
}

struct Inner {
    opts: Options,
    cli: Arc<KindCli>,
    members: Members,
}

impl KindProvider {
    /// A provider with these options. Nothing runs until it is started.
    ///
    /// ```
    /// let p = mcr_provider_kind::KindProvider::new(Default::default());
    /// assert!(p.names().is_empty());
    /// ```
    pub fn new(opts: Options) -> Self {
        let members = Members::new(opts.members.members_options());
        KindProvider {
            inner: Arc::new(Inner {
                cli: Arc::new(KindCli::new(&opts)),
                opts,
                members,
            }),
        }
    }

    /// The options.
    ///
    /// ```
    /// let p = mcr_provider_kind::KindProvider::new(Default::default());
    /// assert!(p.options().prefix.is_none());
    /// ```
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Names of the engaged clusters (their kind names), sorted.
    ///
    /// ```
    /// assert!(mcr_provider_kind::KindProvider::new(Default::default()).names().is_empty());
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        self.inner.members.engagements().names()
    }

    /// The poll loop, and the refresh of the engaged members beside it, until `token` is
    /// cancelled or the first list finds no `kind`.
    async fn discover(&self, token: &CancellationToken) -> Result<(), Error> {
        let opts = &self.inner.opts;
        info!(kind = ?opts.kind_bin(), prefix = ?opts.prefix, "kind provider started");
        let result = tokio::select! {
            () = token.cancelled() => Ok(()),
            result = self.poll_loop(token) => result,
            () = self.refresh_loop(token) => Ok(()),
        };
        info!("kind provider stopped");
        result
    }

    async fn poll_loop(&self, token: &CancellationToken) -> Result<(), Error> {
        let interval = self.inner.opts.poll_interval.max(Duration::from_millis(1));
        let mut list_backoff = Backoff::new(interval, LIST_BACKOFF_MAX.max(interval));
        let mut first = true;
        loop {
            let delay = match self.inner.cli.clusters().await {
                Ok(names) => {
                    list_backoff.reset();
                    self.converge(names, token);
                    interval
                }
                Err(err @ Error::NotInstalled { .. }) if first => {
                    error!(error = %err, "cannot run kind");
                    return Err(err);
                }
                Err(err) => {
                    let retry_in = list_backoff.next_delay();
                    let known = self.inner.members.engagements().member_states().len();
                    warn!(error = %err, ?retry_in, known, "listing kind clusters failed; known clusters are kept");
                    retry_in
                }
            };
            first = false;
            tokio::time::sleep(delay).await;
        }
    }

    /// Applies one successful list: the clusters no longer listed are removed, the listed
    /// ones not wanted yet are wanted (the table asks kind for each one's kubeconfig when it
    /// brings it up, on the replica that owns it).
    fn converge(&self, listed: Vec<String>, token: &CancellationToken) {
        let inner = &self.inner;
        let listed: BTreeSet<ClusterName> = listed
            .into_iter()
            .filter(|name| inner.opts.selects(name))
            .map(ClusterName::new)
            .collect();
        let engagements = inner.members.engagements();
        for (name, _) in engagements.member_states() {
            if !listed.contains(&name) && inner.members.remove(&name) {
                info!(cluster = %name, "kind cluster gone: cluster removed");
            }
        }
        for name in listed {
            if engagements.member_state(&name).is_none() {
                debug!(cluster = %name, "new kind cluster");
                self.want(token, name, None);
            }
        }
    }

    fn want(&self, token: &CancellationToken, name: ClusterName, seen: Option<String>) {
        let source = KindSource {
            cli: self.inner.cli.clone(),
            name: name.clone(),
            seen,
        };
        if let Err(err) = self
            .inner
            .members
            .want(token, &name, Source::Connect(Arc::new(source)))
        {
            error!(cluster = %name, error = %ErrorChain(&err), "kind cluster refused");
        }
    }

    /// Every refresh interval, fetches the kubeconfig of each member engaged here again (one
    /// pass at a time, the members' fetches side by side): a kind cluster deleted and
    /// recreated under the same name has a new CA and client certificate, and its member is
    /// brought to the new one. Members owned by another replica are not asked.
    async fn refresh_loop(&self, token: &CancellationToken) {
        let interval = self
            .inner
            .opts
            .refresh_interval
            .max(Duration::from_millis(1));
        loop {
            tokio::time::sleep(interval).await;
            let engaged = self.inner.members.engagements().active();
            let refreshes = engaged
                .into_iter()
                .map(|(name, cluster, _)| self.refresh(token, name, cluster));
            futures::future::join_all(refreshes).await;
        }
    }

    async fn refresh(&self, token: &CancellationToken, name: ClusterName, cluster: Cluster) {
        let connection = match self.inner.cli.connection(name.as_str()).await {
            Ok(connection) => connection,
            Err(err) => {
                warn!(cluster = %name, error = %ErrorChain(&err),
                    "refreshing the kind kubeconfig failed; the engaged instance keeps serving");
                return;
            }
        };
        if cluster.connection_hash() == Some(connection.hash()) {
            return;
        }
        info!(cluster = %name, "kind kubeconfig changed (cluster recreated?): bringing the member to it");
        self.want(token, name, Some(connection.hash().to_owned()));
    }
}

impl MemberProvider for KindProvider {
    fn members(&self) -> &Members {
        &self.inner.members
    }

    /// Runs the poll loop until `token` is cancelled. Fails at once, with a message naming the
    /// binary, `PATH` and how to install kind, when the `kind` executable does not exist.
    #[tracing::instrument(name = "kind_provider", skip_all)]
    async fn run(&self, token: CancellationToken) -> Result<(), mcr_core::Error> {
        let _run = self.inner.members.start_run("kind")?;
        self.discover(&token).await.map_err(mcr_core::Error::from)
    }
}
