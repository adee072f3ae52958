//! Restarting failed children, and what [`MultiProvider::child_status`] reports about them.

use std::time::Duration;

use super::MultiProvider;

/// First wait before a failed child is restarted (doubling up to [`RESTART_BACKOFF_MAX`]).
pub const RESTART_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Longest wait between restarts of a failing child.
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(60);

/// How a child provider's discovery loop is doing.
///
/// ```no_run
/// # fn demo(multi: mcr_provider_multi::MultiProvider) {
/// if let Some(s) = multi.child_status("kind") {
///     println!("restarts: {}, last error: {:?}", s.restarts, s.last_error);
/// }
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildStatus {
    /// Times the child's loop ended on its own (error, panic or early return) and was restarted.
    pub restarts: u32,
    /// The last error it ended with, if any (`panicked: <message>` for a panic).
    pub last_error: Option<String>,
}

impl MultiProvider {
    /// The status of child `name`, if there is such a child.
    ///
    /// ```
    /// assert!(mcr_provider_multi::MultiProvider::new().child_status("kind").is_none());
    /// ```
    pub fn child_status(&self, name: &str) -> Option<ChildStatus> {
        self.state().children.get(name).map(|c| c.status.clone())
    }

    /// Sets how long to wait before restarting a child whose loop ended on its own: `initial`,
    /// doubling up to `max` (defaults [`RESTART_BACKOFF_INITIAL`], [`RESTART_BACKOFF_MAX`]).
    /// The wait resets after a run that lasted longer than `max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let multi = mcr_provider_multi::MultiProvider::new();
    /// multi.set_restart_backoff(Duration::from_millis(100), Duration::from_secs(5));
    /// ```
    pub fn set_restart_backoff(&self, initial: Duration, max: Duration) {
        *self.inner.restart_backoff.lock() = (initial, max);
    }

    /// Records that child `name` ended with `error` and will be restarted.
    pub(super) fn record_failure(&self, name: &str, error: Option<String>) -> u32 {
        let mut state = self.state();
        match state.children.get_mut(name) {
            Some(child) => {
                child.status.restarts = child.status.restarts.saturating_add(1);
                child.status.last_error = error;
                child.status.restarts
            }
            None => 0,
        }
    }
}
