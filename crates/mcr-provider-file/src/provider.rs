//! The [`FileProvider`]: one engaged cluster per context of each kubeconfig file.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mcr_core::ClusterName;
use mcr_core::members::{MemberProvider, Members, MembersOptions};
use tokio::sync::{Mutex, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::Options;
use crate::reconcile::{PassReport, PassState, pass, read, want};
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
/// use mcr_core::{ProviderRunnable, Engagements};
/// use mcr_provider_file::{FileProvider, Options};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run() -> Result<(), mcr_core::Error> {
/// let provider = FileProvider::new(Options { dirs: vec!["/etc/fleet".into()], ..Options::default() });
/// let registry = Engagements::new();
/// provider.start(CancellationToken::new(), registry).await
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
        self.inner.members.engagements().names()
    }

    /// Reconciles the fleet against the files once, now, and waits for every member to settle:
    /// new contexts are engaged, changed ones replaced or renewed in place, vanished ones
    /// removed; invalid files keep their last good clusters. For one-shot use and tests: it
    /// awaits every member (each bounded by its build, probe and sync timeouts), so a hung
    /// member holds up the report. The running provider does not wait like this: it reads the
    /// files and says what it wants. Reads never overlap.
    /// Clusters added here go to the table the provider was started with (before that, one of
    /// its own) and live until `token` is cancelled or they are removed.
    ///
    /// ```no_run
    /// # async fn f(p: mcr_provider_file::FileProvider) {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let report = p.run_once(&token).await;
    /// assert!(report.failed.is_empty());
    /// # }
    /// ```
    pub async fn run_once(&self, token: &CancellationToken) -> PassReport {
        let mut state = self.inner.state.lock().await;
        let inner = &self.inner;
        pass(&inner.opts, &inner.members, &mut state, token).await
    }

    /// Reads the files and wants each cluster as they say (the table builds, renews or
    /// replaces each member on its own time); removes the clusters whose file or context is
    /// gone. Returns the files the kubeconfigs read by path.
    async fn dispatch(&self, token: &CancellationToken) -> BTreeSet<PathBuf> {
        let mut state = self.inner.state.lock().await;
        let disk = read(&self.inner.opts, &mut state).await;
        want(&self.inner.members, token, &state.wanted);
        debug!(
            clusters = state.wanted.len(),
            invalid_files = disk.invalid_files.len(),
            failed = disk.failed.len(),
            "kubeconfig files read"
        );
        disk.referenced
    }

    async fn watch_loop(&self, token: &CancellationToken) -> Result<(), mcr_core::Error> {
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
        // Watch first, so a change during the initial read is not missed.
        watches.update(&opts, &BTreeSet::new());
        let patterns = compile(&opts.globs);
        // A pass only reads the files and says what is wanted, so a hung plugin or server
        // holds up nobody else. Files the kubeconfigs read by path (certificates, keys, CA,
        // tokens): a rotation renews (or, for a CA file, rebuilds) the member that uses them.
        let mut referenced = self.dispatch(token).await;
        watches.update(&opts, &referenced);
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                event = events.recv() => match event {
                    None => break,
                    Some(Ok(event)) if !is_relevant(&event, &opts, &patterns, &referenced) => continue,
                    Some(Ok(event)) => debug!(kind = ?event.kind, paths = ?event.paths, "kubeconfig filesystem event"),
                    Some(Err(err)) => warn!(error = %err, "file watcher error; reconciling"),
                },
            }
            if !debounce(&mut events, token, opts.debounce).await {
                break;
            }
            referenced = self.dispatch(token).await;
            watches.update(&opts, &referenced);
        }
        Ok(())
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
    async fn run(&self, token: CancellationToken) -> Result<(), mcr_core::Error> {
        let guard = self.inner.members.start_run("file")?;
        let result = self.watch_loop(&token).await;
        drop(guard);
        info!("file provider stopped");
        result
    }
}
