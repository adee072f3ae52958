//! Running the manager: start order, leader election, graceful shutdown.

use std::{
    panic::AssertUnwindSafe,
    sync::{Arc, atomic::Ordering},
};

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{info, warn};

use super::{Manager, Running};
use crate::{Error, Runnable};

/// Starts `runnable` on the tracker; a failure or panic is reported on the error channel.
pub(super) fn spawn_runnable(
    running: &Running,
    runnable: Arc<dyn Runnable>,
    token: CancellationToken,
) {
    let errors = running.errors.clone();
    // Leader-only work is dropped outright once leadership is lost for too long.
    let cutoff = runnable
        .needs_leader_election()
        .then(|| running.cutoff.clone());
    running.tracker.spawn(async move {
        let name = runnable.name().to_owned();
        let run = AssertUnwindSafe(runnable.start(token)).catch_unwind();
        let result = match cutoff {
            None => run.await,
            Some(cutoff) => tokio::select! {
                biased;
                result = run => result,
                () = cutoff.cancelled() => {
                    warn!(runnable = %name, "leadership lost: dropped with its in-flight work");
                    return;
                }
            },
        };
        let err = match result {
            Ok(Ok(())) => return,
            Ok(Err(source)) => Error::Runnable { name, source },
            Err(_) => Error::Panicked { name },
        };
        let _ = errors.send(err);
    });
}

impl Manager {
    /// Runs everything until Ctrl-C or SIGTERM, then shuts down gracefully (see
    /// [`run_until`](Self::run_until)).
    ///
    /// Returns `Ok(())` after a signal; otherwise the first error that stopped it: a runnable
    /// failing or panicking, the provider's loop failing, the metrics endpoint not binding, or
    /// [`Error::LeaderElectionLost`] when this manager led and lost the Lease (its controllers
    /// and provider were stopped first; exit and restart as a standby).
    ///
    /// ```no_run
    /// # async fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_manager::Error> {
    /// mgr.run().await
    /// # }
    /// ```
    pub async fn run(&self) -> Result<(), Error> {
        let token = CancellationToken::new();
        let signal = token.clone();
        let waiter = tokio::spawn(async move {
            shutdown_signal().await;
            info!("shutdown signal received");
            signal.cancel();
        });
        let result = self.run_until(token).await;
        waiter.abort();
        result
    }

    /// Runs everything until `token` is cancelled: starts the metrics/health endpoint, the host
    /// cluster's cache, the runnables that need no leader, then (once leader, if leader
    /// election is on) the controllers and the provider's discovery loop. The provider starts
    /// at once on every replica when the fleet is sharded, or when a runnable
    /// [serves the members](crate::Runnable::serves_members) (a webhook server): standbys then
    /// engage the members read-only, and their controllers wait for the Lease.
    ///
    /// Shutdown is graceful: controllers stop taking work and let in-flight reconciles finish,
    /// then watches stop (provider clusters and host cache), the Lease is released, and this
    /// returns. With leader election, leader-only runnables still running half-way between
    /// `renew_deadline` and `lease_duration` after the last renew are dropped (the leader no
    /// longer renews while it stops), so no standby can lead while they still act. A runnable's error, or losing the Lease, shuts down the same way and is
    /// returned.
    ///
    /// ```no_run
    /// # async fn demo(mgr: mcr_manager::Manager) -> Result<(), mcr_manager::Error> {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let stop = token.clone();
    /// tokio::spawn(async move { tokio::time::sleep(std::time::Duration::from_secs(60)).await; stop.cancel() });
    /// mgr.run_until(token).await
    /// # }
    /// ```
    pub async fn run_until(&self, token: CancellationToken) -> Result<(), Error> {
        #[cfg(feature = "leader-election")]
        if let Some(le) = &self.inner.leader_election {
            le.validate()?;
        }
        if let Some(c) = &self.inner.shard {
            c.options()
                .validate()
                .map_err(|reason| Error::InvalidSharding { reason })?;
        }
        let watches = CancellationToken::new();
        let work = CancellationToken::new();
        let workers = TaskTracker::new();
        let providers = TaskTracker::new();
        let (errors, mut errors_rx) = mpsc::unbounded_channel();
        let running = Running {
            tracker: workers.clone(),
            providers: providers.clone(),
            work: work.clone(),
            leading: None,
            cutoff: CancellationToken::new(),
            errors,
        };
        let runnables = {
            let mut state = self.state();
            if state.running.is_some() {
                return Err(Error::AlreadyRunning);
            }
            state.running = Some(running.clone());
            state.runnables.clone()
        };
        // Sharded: this replica's side of the protocol runs before the provider starts (it
        // owns nothing until it has claimed) and stops after every member has.
        let shard = crate::shard::start(self, &watches);
        let result = self
            .run_inner(&token, &watches, &work, &running, runnables, &mut errors_rx)
            .await;

        // Graceful shutdown: stop taking work and let in-flight reconciles finish ...
        work.cancel();
        workers.close();
        workers.wait().await;
        // ... then stop watching.
        watches.cancel();
        providers.close();
        providers.wait().await;
        if let Some(shard) = shard {
            shard.leave().await;
        }
        self.inner.leader.store(false, Ordering::SeqCst);
        {
            let mut state = self.state();
            state.running = None;
            state.http_addr = None;
            state.provider_started = false;
        }
        info!("manager stopped");
        result
    }

    async fn run_inner(
        &self,
        token: &CancellationToken,
        watches: &CancellationToken,
        work: &CancellationToken,
        running: &Running,
        runnables: Vec<Arc<dyn Runnable>>,
        errors: &mut mpsc::UnboundedReceiver<Error>,
    ) -> Result<(), Error> {
        if let Some(addr) = self.inner.metrics_addr {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| Error::Bind { addr, source })?;
            self.state().http_addr = listener.local_addr().ok();
            info!(addr = ?listener.local_addr().ok(), "serving /metrics, /healthz, /readyz");
            tokio::spawn(crate::health::serve(
                listener,
                self.clone(),
                self.inner.http_options.clone(),
                watches.clone(),
            ));
        }
        self.inner.host.cache().start(watches.child_token());
        for r in runnables.iter().filter(|r| !r.needs_leader_election()) {
            spawn_runnable(running, r.clone(), work.child_token());
        }
        // Sharded, the controllers (which then need no leader) and the provider run on every
        // replica, leader or not; leader election, if set, gates only leader-only runnables.
        // A runnable that serves the members on every replica (a webhook server) has the
        // provider run on standbys too: members engaged read-only there, controllers waiting.
        let sharded = self.inner.shard.is_some();
        let everywhere = sharded || runnables.iter().any(|r| r.serves_members());
        if everywhere {
            self.start_provider(watches.child_token(), running);
        }

        #[cfg(feature = "leader-election")]
        let mut elector = self
            .inner
            .leader_election
            .clone()
            .map(|cfg| crate::leader::Elector::new(self.inner.host.client(), cfg));
        #[cfg(feature = "leader-election")]
        if let Some(elector) = elector.as_mut() {
            tokio::select! {
                acquired = elector.acquire(token) => if !acquired { return Ok(()) },
                Some(err) = errors.recv() => return Err(err),
            }
        }

        // Leading: start the leader-only runnables (controllers) and the provider.
        let leading = work.child_token();
        let runnables = {
            let mut state = self.state();
            if let Some(r) = state.running.as_mut() {
                r.leading = Some(leading.clone());
            }
            state.runnables.clone()
        };
        self.inner.leader.store(true, Ordering::SeqCst);
        for r in runnables.iter().filter(|r| r.needs_leader_election()) {
            spawn_runnable(running, r.clone(), leading.child_token());
        }
        if !everywhere {
            self.start_provider(watches.child_token(), running);
        }

        #[cfg(feature = "leader-election")]
        if let Some(mut elector) = elector {
            let lease = self
                .inner
                .leader_election
                .as_ref()
                .map(|l| l.lease_ref())
                .unwrap_or_default();
            let stop = token.clone();
            let result = tokio::select! {
                ended = elector.keep(&stop) => match ended {
                    crate::leader::Ended::Stopped => Ok(()),
                    crate::leader::Ended::Lost => Err(Error::LeaderElectionLost { lease }),
                },
                Some(err) = errors.recv() => Err(err),
            };
            // Stop the leader-only work before giving the Lease away: no new work at once.
            // Renewals have stopped (on loss, or while stopping), so whatever still runs at the
            // cutoff is dropped, before a standby can lead.
            self.inner.leader.store(false, Ordering::SeqCst);
            work.cancel();
            running.tracker.close();
            if tokio::time::timeout_at(elector.cutoff(), running.tracker.wait())
                .await
                .is_err()
            {
                running.cutoff.cancel();
            }
            running.tracker.wait().await;
            watches.cancel();
            running.providers.close();
            running.providers.wait().await;
            elector.release().await;
            return result;
        }

        let result = tokio::select! {
            () = token.cancelled() => Ok(()),
            Some(err) = errors.recv() => Err(err),
        };
        result
    }

    /// Starts the provider's discovery loop (if it has one) on the providers' tracker.
    fn start_provider(&self, token: CancellationToken, running: &Running) {
        self.state().provider_started = true;
        let provider = self.inner.provider.clone();
        let table = self.inner.fleet.members().clone();
        let errors = running.errors.clone();
        running.providers.spawn(async move {
            let Some(provider) = provider else { return };
            let Some(runnable) = provider.runnable() else {
                return;
            };
            if let Err(err) = runnable.start(token.clone(), table).await
                && !token.is_cancelled()
            {
                warn!(error = %err, "provider stopped with an error");
                let _ = errors.send(Error::Provider(err));
            }
        });
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
