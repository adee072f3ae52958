//! The [`FileProvider`]: one engaged cluster per context of each kubeconfig file.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use mcr_core::backoff::Backoff;
use mcr_core::members::{MemberProvider, Members, MembersOptions};
use mcr_core::{Aware, ClusterName};
use tokio::sync::{Mutex, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::Options;
use crate::reconcile::{PassReport, PassState, pass};
use crate::watch::{Watches, compile, is_relevant};

type FsEvents = mpsc::UnboundedReceiver<notify::Result<notify::Event>>;

/// Discovers member clusters from kubeconfig files and directories, and follows them live.
///
/// Every context of every configured file, and of every file matching the globs in the
/// configured directories, becomes a cluster named `<path><separator><context>`. See the crate
/// documentation for the reload rules. Cheap to clone (an `Arc` inside); start it once.
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_core::{ProviderRunnable, Registry};
/// use mcr_provider_file::{FileProvider, Options};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run() -> Result<(), mcr_core::Error> {
/// let provider = FileProvider::new(Options { dirs: vec!["/etc/fleet".into()], ..Options::default() });
/// let registry = Registry::new();
/// provider.start(CancellationToken::new(), Arc::new(registry)).await
/// # }
/// ```
#[derive(Clone)]
pub struct FileProvider {
    inner: Arc<Inner>,
}

struct Inner {
    opts: Arc<Options>,
    members: Members,
    state: Mutex<PassState>,
}

impl FileProvider {
    /// A provider for `opts`, with the defaults of [`Options::with_defaults`] applied (with
    /// neither files nor directories: `$KUBECONFIG`, else `~/.kube/config`, else the working
    /// directory).
    ///
    /// ```
    /// let p = mcr_provider_file::FileProvider::new(mcr_provider_file::Options {
    ///     files: vec!["/etc/fleet/prod.kubeconfig".into()],
    ///     ..Default::default()
    /// });
    /// assert_eq!(p.options().separator, "+");
    /// ```
    pub fn new(opts: Options) -> Self {
        let opts = opts.with_defaults();
        info!(files = ?opts.files, dirs = ?opts.dirs, globs = ?opts.globs, "file provider configured");
        let members = Members::new(MembersOptions {
            // A member is engaged without a probe; its cache sync is the bounded first contact.
            probe_timeout: None,
            ..opts.members.members_options()
        });
        FileProvider {
            inner: Arc::new(Inner {
                opts: Arc::new(opts),
                members,
                state: Mutex::new(PassState::default()),
            }),
        }
    }

    /// The effective options (defaults applied).
    ///
    /// ```
    /// let p = mcr_provider_file::FileProvider::new(mcr_provider_file::Options {
    ///     dirs: vec!["/fleet".into()], ..Default::default()
    /// });
    /// assert!(p.options().files.is_empty());
    /// ```
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Names of the currently engaged clusters, sorted.
    ///
    /// ```
    /// let p = mcr_provider_file::FileProvider::new(mcr_provider_file::Options {
    ///     dirs: vec!["/fleet".into()], ..Default::default()
    /// });
    /// assert!(p.names().is_empty());
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        self.inner.members.names()
    }

    /// Reconciles the fleet against the files once, now: new contexts are engaged, changed
    /// ones replaced, vanished ones removed; invalid files keep their last good clusters.
    /// Passes never overlap (a pass started by the running provider finishes first). Clusters
    /// added here live until `token` is cancelled or they are removed.
    ///
    /// ```no_run
    /// # async fn f(p: mcr_provider_file::FileProvider) {
    /// let registry = mcr_core::Registry::new();
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let report = p.run_once(&token, std::sync::Arc::new(registry)).await;
    /// assert!(report.failed.is_empty());
    /// # }
    /// ```
    pub async fn run_once(&self, token: &CancellationToken, aware: Arc<dyn Aware>) -> PassReport {
        let mut state = self.inner.state.lock().await;
        let inner = &self.inner;
        pass(
            &inner.opts,
            &inner.members,
            &mut state,
            token,
            aware.as_ref(),
        )
        .await
    }

    /// A pass, abandoned when `token` fires (a credential plugin still running is killed), so
    /// shutdown never waits for a slow member.
    async fn pass_unless_stopped(
        &self,
        token: &CancellationToken,
        aware: &Arc<dyn Aware>,
    ) -> Option<PassReport> {
        tokio::select! {
            () = token.cancelled() => None,
            report = self.run_once(token, aware.clone()) => Some(report),
        }
    }

    async fn watch_loop(
        &self,
        token: &CancellationToken,
        aware: Arc<dyn Aware>,
    ) -> Result<(), mcr_core::Error> {
        let opts = self.inner.opts.clone();
        let (tx, mut events) = mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |event| {
            // The receiver is gone only when the provider stopped.
            let _ = tx.send(event);
        })
        .map_err(|err| mcr_core::Error::Engage {
            cluster: ClusterName::host(),
            source: Box::new(err),
        })?;
        let mut watches = Watches::new(watcher);
        // Watch first, so a change during the initial pass is not missed.
        watches.update(&opts, &BTreeSet::new());
        let patterns = compile(&opts.globs);
        let mut backoff = Backoff::new(opts.members.backoff_initial, opts.members.backoff_max);

        let Some(report) = self.pass_unless_stopped(token, &aware).await else {
            return Ok(());
        };
        // Files the kubeconfigs read by path (certificates, keys, CA, tokens): a rotation
        // renews (or, for a CA file, rebuilds) the member that uses them.
        let mut referenced = report.referenced.clone();
        watches.update(&opts, &referenced);
        let mut retry_at = schedule(&report, &mut backoff);
        loop {
            let retry = async {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = token.cancelled() => return Ok(()),
                _ = retry => debug!("retrying clusters that failed to engage"),
                event = events.recv() => match event {
                    None => return Ok(()),
                    Some(Ok(event)) if !is_relevant(&event, &opts, &patterns, &referenced) => continue,
                    Some(Ok(event)) => debug!(kind = ?event.kind, paths = ?event.paths, "kubeconfig filesystem event"),
                    Some(Err(err)) => warn!(error = %err, "file watcher error; reconciling"),
                },
            }
            if !debounce(&mut events, token, opts.debounce).await {
                return Ok(());
            }
            let Some(report) = self.pass_unless_stopped(token, &aware).await else {
                return Ok(());
            };
            referenced.clone_from(&report.referenced);
            watches.update(&opts, &referenced);
            retry_at = schedule(&report, &mut backoff);
        }
    }
}

/// When to retry a pass that left retryable failures (capped exponential backoff).
fn schedule(report: &PassReport, backoff: &mut Backoff) -> Option<Instant> {
    if report.needs_retry() {
        let delay = backoff.next_delay();
        warn!(failed = report.failed.len(), retry_in = ?delay, "some clusters failed to engage; retrying");
        Some(Instant::now() + delay)
    } else {
        backoff.reset();
        None
    }
}

/// Waits until no event arrived for `quiet` (at most 20 × `quiet` in total). False when the
/// provider stops meanwhile.
async fn debounce(events: &mut FsEvents, token: &CancellationToken, quiet: Duration) -> bool {
    let give_up = Instant::now() + quiet.saturating_mul(20);
    loop {
        tokio::select! {
            _ = token.cancelled() => return false,
            _ = tokio::time::sleep(quiet) => return true,
            _ = tokio::time::sleep_until(give_up) => return true,
            event = events.recv() => if event.is_none() { return true },
        }
    }
}

impl MemberProvider for FileProvider {
    fn members(&self) -> &Members {
        &self.inner.members
    }

    #[tracing::instrument(name = "file_provider", skip_all)]
    async fn run(
        &self,
        token: CancellationToken,
        aware: Arc<dyn Aware>,
    ) -> Result<(), mcr_core::Error> {
        let guard = self.inner.members.start_run("file")?;
        let result = self.watch_loop(&token, aware).await;
        drop(guard);
        info!("file provider stopped");
        result
    }
}
