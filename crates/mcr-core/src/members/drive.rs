//! [`Dispatch`] and [`ProviderShared::drive`]: the event loop of a provider that watches its
//! source of truth on a host cluster.

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::{ProviderShared, Reconcile, Workers};

/// What a provider does with the items of its watch streams: turn each into statuses and
/// desired states for its [`Workers`], which it gives up when the run ends.
pub trait Dispatch {
    /// One item of the merged watch streams (an event, or a watch error to report).
    type Item;
    /// What the workers do with a member's desired state.
    type Reconcile: Reconcile;

    /// Handles one item.
    fn handle(&mut self, item: Self::Item);

    /// The workers, to shut down once no item comes any more.
    fn into_workers(self) -> Workers<Self::Reconcile>;
}

impl<O, K: Ord + Clone, V: Clone> ProviderShared<O, K, V> {
    /// Feeds `events` to `dispatcher` until `token` is cancelled or the streams end; then drops
    /// the streams, shuts the workers down (without waiting for builds in flight) and clears
    /// the statuses.
    ///
    /// ```no_run
    /// # async fn f<D: mcr_core::members::Dispatch<Item = u32>>(
    /// #     shared: mcr_core::members::ProviderShared<(), String, ()>, dispatcher: D,
    /// # ) {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// shared.drive(&token, futures::stream::iter([1, 2, 3]), dispatcher).await;
    /// # }
    /// ```
    pub async fn drive<D: Dispatch>(
        &self,
        token: &CancellationToken,
        events: impl Stream<Item = D::Item>,
        mut dispatcher: D,
    ) {
        let mut events = std::pin::pin!(events);
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                item = events.next() => match item {
                    Some(item) => dispatcher.handle(item),
                    None => break,
                },
            }
        }
        drop(events);
        dispatcher.into_workers().shutdown().await;
        self.statuses.lock().clear();
    }
}
