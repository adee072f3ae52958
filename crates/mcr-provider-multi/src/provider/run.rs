//! Running the [`MultiProvider`]: starting every child under its own child token with a
//! handle on the manager's table whose names carry the child's prefix
//! ([`Engagements::prefixed`]), and stopping them all when the provider's token is cancelled.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use mcr_core::{
    BoxFuture, Engagements, Provider, ProviderRunnable, backoff::Backoff, panic_message,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::MultiProvider;

impl MultiProvider {
    /// Starts a child under a child token of `parent`; returns that token.
    pub(super) fn start_child(
        &self,
        name: &str,
        provider: &Arc<dyn Provider>,
        parent: &CancellationToken,
        table: &Engagements,
    ) -> CancellationToken {
        let token = parent.child_token();
        if provider.runnable().is_none() {
            tracing::debug!(provider = name, "provider is not runnable, not started");
            return token;
        }
        let handle = table.prefixed(&format!("{name}{}", self.inner.separator));
        let provider = provider.clone();
        let child_token = token.clone();
        let span = tracing::info_span!("child_provider", provider = name);
        let multi = self.clone();
        let name = name.to_owned();
        // (The caller may hold the state lock: the backoff has a lock of its own.)
        let (initial, max) = *self.inner.restart_backoff.lock();
        tokio::spawn(
            async move {
                let Some(runnable) = provider.runnable() else {
                    return;
                };
                let mut backoff = Backoff::new(initial, max);
                loop {
                    // Each run gets its own token: what a failed run engaged leaves with it.
                    let run_token = child_token.child_token();
                    let started = tokio::time::Instant::now();
                    // A panicking child is caught here and restarted like a failed one.
                    let run = AssertUnwindSafe(runnable.start(run_token.clone(), handle.clone()));
                    let result = run.catch_unwind().await;
                    run_token.cancel();
                    if child_token.is_cancelled() {
                        tracing::debug!("provider stopped");
                        return;
                    }
                    // It ended on its own: restart it (with backoff) until removed or stopped.
                    if started.elapsed() > max {
                        backoff.reset();
                    }
                    let error = match result {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(mcr_core::ErrorChain(&e).to_string()),
                        Err(panic) => Some(format!("panicked: {}", panic_message(panic.as_ref()))),
                    };
                    let restarts = multi.record_failure(&name, error.clone());
                    let delay = backoff.next_delay();
                    tracing::error!(
                        error = error.as_deref().unwrap_or("ended without error"),
                        restarts,
                        retry_in = ?delay,
                        "provider stopped on its own; its clusters left; restarting"
                    );
                    tokio::select! {
                        () = child_token.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
            .instrument(span),
        );
        token
    }

    async fn run(
        &self,
        token: CancellationToken,
        table: Engagements,
    ) -> Result<(), mcr_core::Error> {
        if !self.start_children(&token, &table) {
            tracing::warn!("multi provider started twice, ignoring");
            token.cancelled().await;
            return Ok(());
        }
        token.cancelled().await;
        let mut state = self.state();
        state.running = None;
        for child in state.children.values_mut() {
            child.token = None;
        }
        Ok(())
    }

    /// Marks the provider running and starts every child; false if it was running already.
    fn start_children(&self, token: &CancellationToken, table: &Engagements) -> bool {
        let mut state = self.state();
        if state.running.is_some() {
            return false;
        }
        state.running = Some((token.clone(), table.clone()));
        let children: Vec<(String, Arc<dyn Provider>)> = state
            .children
            .iter()
            .map(|(n, c)| (n.clone(), c.provider.clone()))
            .collect();
        for (name, provider) in children {
            let child_token = self.start_child(&name, &provider, token, table);
            if let Some(child) = state.children.get_mut(&name) {
                child.token = Some(child_token);
            }
        }
        true
    }
}

impl ProviderRunnable for MultiProvider {
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        table: Engagements,
    ) -> BoxFuture<'a, Result<(), mcr_core::Error>> {
        let span = tracing::info_span!("multi_provider");
        Box::pin(self.run(token, table).instrument(span))
    }
}
