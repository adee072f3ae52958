//! [`Dispatch`] and [`ProviderShared::drive`]: the event loop of a provider that watches its
//! source of truth on a host cluster.

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::{Members, ProviderShared};

/// What a provider does with the items of its watch streams: turn each into statuses and
/// [wants](Members::want) of its members.
pub trait Dispatch: Sized {
    /// One item of the merged watch streams (an event, or a watch error to report).
    type Item;

    /// The dispatcher of one run, wanting members through `members` for the run of `token`.
    fn new(members: Members, token: CancellationToken) -> Self;

    /// Handles one item.
    fn handle(&mut self, item: Self::Item);
}

impl<O, K: Ord + Clone, V: Clone> ProviderShared<O, K, V> {
    /// Runs one discovery loop: a dispatcher `D` wanting members through the provider's
    /// [`Members`], fed with `events` until `token` is cancelled or the streams end; then
    /// drops the streams and clears the statuses. (The run's [`RunGuard`](super::RunGuard)
    /// removes the members.)
    ///
    /// ```no_run
    /// # use mcr_core::members::{Dispatch, ProviderShared};
    /// # async fn f<D: Dispatch<Item = u32>>(shared: ProviderShared<(), String, ()>) {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// shared.drive::<D>(&token, futures::stream::iter([1, 2, 3])).await;
    /// # }
    /// ```
    pub async fn drive<D: Dispatch>(
        &self,
        token: &CancellationToken,
        events: impl Stream<Item = D::Item>,
    ) {
        let mut dispatcher = D::new(self.members.clone(), token.clone());
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
        self.statuses.lock().clear();
    }
}
