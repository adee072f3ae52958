//! [`Dispatch`] and [`ProviderShared::drive`]: the event loop of a provider that watches its
//! source of truth on a host cluster.

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::{Converge, ProviderShared, Workers};

/// What a provider does with the items of its watch streams: turn each into statuses and
/// desired states for its [`Workers`], which it gives up when the run ends.
pub trait Dispatch: Sized {
    /// One item of the merged watch streams (an event, or a watch error to report).
    type Item;
    /// What the workers do with a member's desired state.
    type Converge: Converge;

    /// The dispatcher of one run, handing desired states to `workers`.
    fn new(workers: Workers<Self::Converge>) -> Self;

    /// Handles one item.
    fn handle(&mut self, item: Self::Item);

    /// The workers, to shut down once no item comes any more.
    fn into_workers(self) -> Workers<Self::Converge>;
}

impl<O, K: Ord + Clone, V: Clone> ProviderShared<O, K, V> {
    /// Runs one discovery loop: [`Workers`] converging members with `converge` (engaging through
    /// the members' [`engagements`](super::Members::engagements)) behind a dispatcher `D`, fed with `events` until `token` is cancelled or the
    /// streams end; then drops the streams, shuts the workers down (without waiting for builds
    /// in flight) and clears the statuses.
    ///
    /// ```no_run
    /// # use mcr_core::members::{Dispatch, ProviderShared};
    /// # async fn f<D: Dispatch<Item = u32>>(
    /// #     shared: ProviderShared<(), String, ()>, converge: D::Converge,
    /// # ) {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// shared.drive::<D>(&token, converge, futures::stream::iter([1, 2, 3])).await;
    /// # }
    /// ```
    pub async fn drive<D: Dispatch>(
        &self,
        token: &CancellationToken,
        converge: D::Converge,
        events: impl Stream<Item = D::Item>,
    ) {
        let mut dispatcher = D::new(Workers::new(&self.members, token, converge));
        {
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
        } // the streams are dropped here, before the workers stop
        dispatcher.into_workers().shutdown().await;
        self.statuses.lock().clear();
    }
}
