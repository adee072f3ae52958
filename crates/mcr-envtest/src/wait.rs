//! Waiting on conditions in tests, without sleep-and-hope.
//!
//! Controllers, caches and providers converge asynchronously, so a test asserts that something
//! happens *eventually*: [`eventually`] polls a condition every [`POLL_INTERVAL`] until it holds
//! and panics, naming what it waited for, once the timeout passes. Use a generous timeout
//! ([`DEFAULT_TIMEOUT`]): it bounds a failing test, it is not a timing assertion.
//! [`eventually_async`] does the same for conditions that need to `.await` (an API call).
//!
//! These helpers panic on timeout: they are test utilities, not library code.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// A timeout generous enough for anything that should happen "soon", even on a loaded CI
/// machine: 30 seconds.
///
/// ```
/// assert_eq!(mcr_envtest::wait::DEFAULT_TIMEOUT.as_secs(), 30);
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How often [`eventually`] and [`eventually_async`] re-check their condition: 20 ms.
///
/// ```
/// assert_eq!(mcr_envtest::wait::POLL_INTERVAL.as_millis(), 20);
/// ```
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `cond` every [`POLL_INTERVAL`] until it returns true.
///
/// Checks once immediately, so a condition that already holds returns without sleeping.
/// Time is measured with [`tokio::time::Instant`], so under a paused tokio clock the
/// timeout is virtual time too.
///
/// # Panics
///
/// When `cond` still returns false after `timeout`, with a message naming `what`.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// use mcr_envtest::wait::{DEFAULT_TIMEOUT, eventually};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let done = Arc::new(AtomicBool::new(false));
/// let flag = done.clone();
/// tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
/// eventually("the task to finish", DEFAULT_TIMEOUT, || done.load(Ordering::SeqCst)).await;
/// # }
/// ```
pub async fn eventually(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Polls the future returned by `cond` every [`POLL_INTERVAL`] until it resolves to true.
///
/// The async counterpart of [`eventually`], for conditions that call an API server. Each
/// check runs to completion; a check that hangs is not cut short (give the client a timeout).
///
/// # Panics
///
/// When the condition still resolves to false after `timeout`, with a message naming `what`.
///
/// # Example
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::Api;
/// use mcr_envtest::wait::{DEFAULT_TIMEOUT, eventually_async};
///
/// # async fn doc(client: kube::Client) {
/// let cms: Api<ConfigMap> = Api::namespaced(client, "default");
/// eventually_async("configmap `hello` to exist", DEFAULT_TIMEOUT, || {
///     let cms = cms.clone();
///     async move { matches!(cms.get_opt("hello").await, Ok(Some(_))) }
/// })
/// .await;
/// # }
/// ```
pub async fn eventually_async<F, Fut>(what: &str, timeout: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !cond().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn returns_once_the_condition_holds() {
        let calls = AtomicUsize::new(0);
        eventually("the third check", DEFAULT_TIMEOUT, || {
            calls.fetch_add(1, Ordering::SeqCst) >= 2
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn async_variant_returns_once_the_condition_holds() {
        let calls = Arc::new(AtomicUsize::new(0));
        eventually_async("the third check", DEFAULT_TIMEOUT, || {
            let calls = calls.clone();
            async move { calls.fetch_add(1, Ordering::SeqCst) >= 2 }
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for the impossible")]
    async fn panics_naming_what_on_timeout() {
        eventually("the impossible", Duration::from_millis(50), || false).await;
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for the async impossible")]
    async fn async_variant_panics_naming_what_on_timeout() {
        eventually_async(
            "the async impossible",
            Duration::from_millis(50),
            || async { false },
        )
        .await;
    }
}
