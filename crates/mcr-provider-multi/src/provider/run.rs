//! Running the [`MultiProvider`]: starting every child under its own child token with a
//! [`PrefixedAware`], and stopping them all when the provider's token is cancelled.

use std::sync::Arc;

use mcr_core::{Aware, BoxFuture, Provider, ProviderRunnable};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::MultiProvider;
use crate::PrefixedAware;

impl MultiProvider {
    /// Starts a child under a child token of `parent`; returns that token.
    pub(super) fn start_child(
        &self,
        name: &str,
        provider: &Arc<dyn Provider>,
        parent: &CancellationToken,
        aware: Arc<dyn Aware>,
    ) -> CancellationToken {
        let token = parent.child_token();
        if provider.runnable().is_none() {
            tracing::debug!(provider = name, "provider is not runnable, not started");
            return token;
        }
        let aware: Arc<dyn Aware> =
            Arc::new(PrefixedAware::new(name, &self.inner.separator, aware));
        let provider = provider.clone();
        let child_token = token.clone();
        let span = tracing::info_span!("child_provider", provider = name);
        tokio::spawn(
            async move {
                let Some(runnable) = provider.runnable() else {
                    return;
                };
                match runnable.start(child_token.clone(), aware).await {
                    Ok(()) => tracing::debug!("provider stopped"),
                    Err(err) => tracing::error!(error = %err, "provider failed"),
                }
                // Whatever it left engaged goes with it.
                child_token.cancel();
            }
            .instrument(span),
        );
        token
    }

    async fn run(
        &self,
        token: CancellationToken,
        aware: Arc<dyn Aware>,
    ) -> Result<(), mcr_core::Error> {
        if !self.start_children(&token, &aware) {
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
    fn start_children(&self, token: &CancellationToken, aware: &Arc<dyn Aware>) -> bool {
        let mut state = self.state();
        if state.running.is_some() {
            return false;
        }
        state.running = Some((token.clone(), aware.clone()));
        let children: Vec<(String, Arc<dyn Provider>)> = state
            .children
            .iter()
            .map(|(n, c)| (n.clone(), c.provider.clone()))
            .collect();
        for (name, provider) in children {
            let child_token = self.start_child(&name, &provider, token, aware.clone());
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
        aware: Arc<dyn Aware>,
    ) -> BoxFuture<'a, Result<(), mcr_core::Error>> {
        let span = tracing::info_span!("multi_provider");
        Box::pin(self.run(token, aware).instrument(span))
    }
}
