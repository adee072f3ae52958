//! The [`KindProvider`]: polls `kind get clusters` and keeps one engaged cluster per kind cluster.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use mcr_core::backoff::Backoff;
use mcr_core::members::{MemberProvider, Members};
use mcr_core::{AddOutcome, ClusterName};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::cli::KindCli;
use crate::{Error, Options, member};

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
    cli: KindCli,
    engaged: Members,
    members: Mutex<HashMap<ClusterName, Member>>,
}

/// What the provider remembers about one listed kind cluster.
struct Member {
    backoff: Backoff,
    /// When its kubeconfig is fetched next (now for a new cluster; after the refresh interval
    /// when engaged; after the backoff when the last attempt failed).
    next_check: Instant,
    /// An attempt is running.
    busy: bool,
    /// No longer listed while an attempt was running: dropped when the attempt ends.
    gone: bool,
    last_error: Option<String>,
}

impl KindProvider {
    /// A provider with these options. Nothing runs until it is started.
    ///
    /// ```
    /// let p = mcr_provider_kind::KindProvider::new(Default::default());
    /// assert!(p.names().is_empty());
    /// ```
    pub fn new(opts: Options) -> Self {
        let engaged = Members::new(opts.members.members_options());
        KindProvider {
            inner: Arc::new(Inner {
                cli: KindCli::new(&opts),
                opts,
                engaged,
                members: Mutex::new(HashMap::new()),
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
        self.inner.engaged.engagements().names()
    }

    /// The listed kind clusters whose last attempt to join (or to refresh) failed, with the
    /// error; they are retried with backoff. An engaged cluster whose refresh failed stays
    /// engaged and is listed here too.
    ///
    /// ```
    /// assert!(mcr_provider_kind::KindProvider::new(Default::default()).failures().is_empty());
    /// ```
    pub fn failures(&self) -> BTreeMap<ClusterName, String> {
        self.inner
            .members
            .lock()
            .iter()
            .filter_map(|(name, m)| Some((name.clone(), m.last_error.clone()?)))
            .collect()
    }

    async fn discover(&self, token: CancellationToken) -> Result<(), Error> {
        let guard = self
            .inner
            .engaged
            .start_run("kind")
            .map_err(|_| Error::AlreadyRunning)?;
        // Our own child: stopping on an error must not cancel the caller's token.
        let token = token.child_token();
        let tasks = TaskTracker::new();
        let result = self.poll_loop(&token, &tasks).await;
        token.cancel();
        tasks.close();
        tasks.wait().await;
        drop(guard);
        self.inner.members.lock().clear();
        info!("kind provider stopped");
        result
    }

    async fn poll_loop(&self, token: &CancellationToken, tasks: &TaskTracker) -> Result<(), Error> {
        let opts = &self.inner.opts;
        let interval = opts.poll_interval.max(Duration::from_millis(1));
        let mut list_backoff = Backoff::new(interval, LIST_BACKOFF_MAX.max(interval));
        let mut first = true;
        info!(kind = ?opts.kind_bin(), prefix = ?opts.prefix, "kind provider started");
        loop {
            let delay = match self.inner.cli.clusters(token).await {
                Ok(names) => {
                    list_backoff.reset();
                    self.reconcile(names, token, tasks);
                    interval
                }
                Err(Error::Cancelled { .. }) => return Ok(()),
                Err(err @ Error::NotInstalled { .. }) if first => {
                    error!(error = %err, "cannot run kind");
                    return Err(err);
                }
                Err(err) => {
                    let retry_in = list_backoff.next_delay();
                    let known = self.inner.engaged.engagements().len();
                    warn!(error = %err, ?retry_in, known, "listing kind clusters failed; known clusters are kept");
                    retry_in
                }
            };
            first = false;
            tokio::select! {
                () = token.cancelled() => return Ok(()),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Applies one successful list: clusters no longer listed leave; listed ones that are new,
    /// due for a refresh or due for a retry get an attempt of their own.
    fn reconcile(&self, listed: Vec<String>, token: &CancellationToken, tasks: &TaskTracker) {
        let inner = &self.inner;
        let listed: BTreeSet<ClusterName> = listed
            .into_iter()
            .filter(|name| inner.opts.selects(name))
            .map(ClusterName::new)
            .collect();
        let now = Instant::now();
        let mut members = inner.members.lock();
        members.retain(|name, m| {
            m.gone = !listed.contains(name);
            !m.gone || m.busy
        });
        for name in inner.engaged.known_names() {
            if !listed.contains(&name) && inner.engaged.remove(&name) {
                info!(cluster = %name, "kind cluster gone: cluster removed");
            }
        }
        for name in listed {
            let m = members.entry(name.clone()).or_insert_with(|| {
                debug!(cluster = %name, "new kind cluster");
                Member {
                    backoff: Backoff::new(
                        inner.opts.members.backoff_initial,
                        inner.opts.members.backoff_max,
                    ),
                    next_check: now,
                    busy: false,
                    gone: false,
                    last_error: None,
                }
            });
            if m.busy || m.next_check > now {
                continue;
            }
            m.busy = true;
            let span = info_span!("kind_cluster", cluster = %name);
            let attempt = self.clone().attempt(name, token.clone());
            tasks.spawn(attempt.instrument(span));
        }
    }

    /// One attempt to bring a cluster in line with kind, then its bookkeeping.
    async fn attempt(self, name: ClusterName, token: CancellationToken) {
        let inner = &self.inner;
        let result = member::sync(
            &inner.opts,
            &inner.cli,
            &inner.engaged.engagements(),
            &name,
            &token,
        )
        .await;
        let mut members = inner.members.lock();
        let Some(m) = members.get_mut(&name) else {
            return;
        };
        m.busy = false;
        if m.gone {
            // It left while we were adding it.
            members.remove(&name);
            inner.engaged.remove(&name);
            return;
        }
        let now = Instant::now();
        match result {
            Ok(outcome) => {
                match outcome {
                    AddOutcome::Added => info!("kind cluster engaged"),
                    AddOutcome::Replaced => info!("kind cluster recreated: new instance engaged"),
                    AddOutcome::Unchanged => debug!("kind cluster unchanged"),
                }
                m.backoff.reset();
                m.last_error = None;
                inner.engaged.report_done(&name);
                m.next_check = now + inner.opts.refresh_interval;
            }
            Err(_) if token.is_cancelled() => {}
            Err(err) => {
                let retry_in = m.backoff.next_delay();
                let engaged = inner.engaged.engagements().get(&name).is_ok();
                warn!(error = %err, ?retry_in, engaged, "kind cluster not in line with kind; retrying");
                m.last_error = Some(err.to_string());
                inner.engaged.report_failure(&name, &err, Some(retry_in));
                m.next_check = now + retry_in;
            }
        }
    }
}

impl MemberProvider for KindProvider {
    fn members(&self) -> &Members {
        &self.inner.engaged
    }

    /// Runs the poll loop until `token` is cancelled. Fails at once, with a message naming the
    /// binary, `PATH` and how to install kind, when the `kind` executable does not exist.
    #[tracing::instrument(name = "kind_provider", skip_all)]
    async fn run(&self, token: CancellationToken) -> Result<(), mcr_core::Error> {
        self.discover(token).await.map_err(mcr_core::Error::from)
    }
}
