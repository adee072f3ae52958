//! Scheduled renewal: [`Renew`], [`RenewalOptions`], [`spawn_renewal`], [`CredentialStatus`].

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{CredentialHandle, Credentials};
use crate::backoff::Backoff;
use crate::{BoxError, BoxFuture, ClusterName};

/// A source of fresh credentials for one cluster (e.g. Gardener's `adminkubeconfig`
/// subresource, a token request, a rotated Secret).
///
/// ```
/// use mcr_core::{BoxError, BoxFuture};
/// use mcr_core::credentials::{Credentials, Renew};
///
/// struct FixedToken(String);
/// impl Renew for FixedToken {
///     fn renew(&self) -> BoxFuture<'_, Result<Credentials, BoxError>> {
///         Box::pin(async move { Ok(Credentials::bearer(&self.0)?) })
///     }
/// }
/// ```
pub trait Renew: Send + Sync {
    /// Fetches new credentials. The error must not contain credential material.
    fn renew(&self) -> BoxFuture<'_, Result<Credentials, BoxError>>;
}

/// When to renew: at `fraction` of the credentials' lifetime (measured from when they were
/// installed), or `margin` before expiry when that is earlier, minus up to `jitter` of the
/// lifetime. Failures are retried with a backoff from `retry_initial` to `retry_max` (never
/// past expiry by more than `retry_max`).
///
/// ```
/// use std::time::Duration;
/// let opts = mcr_core::credentials::RenewalOptions {
///     fraction: 0.7,
///     margin: Some(Duration::from_secs(300)),
///     ..Default::default()
/// };
/// # let _ = opts;
/// ```
#[derive(Clone, Debug)]
pub struct RenewalOptions {
    /// Fraction of the lifetime after which to renew (default 0.8, clamped to 0.05..=1).
    pub fraction: f64,
    /// Renew at the latest this long before expiry (default none).
    pub margin: Option<Duration>,
    /// Random share of the lifetime subtracted from the renewal time, so a fleet does not
    /// renew all at once (default 0.1, clamped to 0..=0.5).
    pub jitter: f64,
    /// First retry delay after a failed renewal (default 1 s).
    pub retry_initial: Duration,
    /// Longest retry delay (default 60 s).
    pub retry_max: Duration,
}

impl Default for RenewalOptions {
    fn default() -> Self {
        RenewalOptions {
            fraction: 0.8,
            margin: None,
            jitter: 0.1,
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
        }
    }
}

impl RenewalOptions {
    /// When credentials installed at `installed` and expiring at `expires` should be renewed.
    fn renew_at(&self, installed: SystemTime, expires: SystemTime) -> SystemTime {
        let lifetime = expires.duration_since(installed).unwrap_or_default();
        let fraction = self.fraction.clamp(0.05, 1.0);
        let mut at = installed + lifetime.mul_f64(fraction);
        if let Some(margin) = self.margin {
            at = at.min(expires.checked_sub(margin).unwrap_or(installed));
        }
        let random = RandomState::new().hash_one(SystemTime::now()) as f64 / u64::MAX as f64;
        let jitter = lifetime.mul_f64(self.jitter.clamp(0.0, 0.5) * random);
        at.checked_sub(jitter).unwrap_or(installed).max(installed)
    }
}

/// The renewal state of a cluster's credentials, for health checks and metrics.
///
/// ```no_run
/// # fn f(cluster: mcr_core::Cluster) {
/// if let Some(status) = cluster.credentials().map(|c| c.status()) {
///     if status.is_expired() { println!("{} cannot authenticate", cluster.name()); }
/// }
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CredentialStatus {
    /// When the current credentials expire, if known.
    pub expires_at: Option<SystemTime>,
    /// Successful in-place renewals so far.
    pub renewals: u64,
    /// Failed renewal attempts since the last success.
    pub consecutive_failures: u32,
    /// When the last renewal attempt failed (cleared by a success).
    pub last_failure: Option<SystemTime>,
    /// Why the last renewal attempt failed (cleared by a success): the source's error with
    /// token-like words masked and its length bounded. Never credential material, provided
    /// the [`Renew`] source keeps it out of its errors as it must.
    pub last_error: Option<String>,
}

impl CredentialStatus {
    /// Whether the current credentials are past their expiry (the cluster is unhealthy).
    pub fn is_expired(&self) -> bool {
        self.expires_at.is_some_and(|at| SystemTime::now() >= at)
    }

    /// Whether renewal is failing (credentials about to expire, or expired, unless it
    /// recovers).
    pub fn is_renewal_failing(&self) -> bool {
        self.consecutive_failures > 0
    }
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) expires_at: Option<SystemTime>,
    pub(crate) installed_at: SystemTime,
    installs: u64,
    consecutive_failures: u32,
    last_failure: Option<SystemTime>,
    last_error: Option<String>,
}

impl Default for State {
    fn default() -> Self {
        State {
            expires_at: None,
            installed_at: SystemTime::now(),
            installs: 0,
            consecutive_failures: 0,
            last_failure: None,
            last_error: None,
        }
    }
}

impl State {
    pub(crate) fn installed(&mut self, expires_at: Option<SystemTime>) {
        self.expires_at = expires_at;
        self.installed_at = SystemTime::now();
        self.installs += 1;
        self.consecutive_failures = 0;
        self.last_failure = None;
        self.last_error = None;
    }

    pub(crate) fn failed(&mut self, at: SystemTime, error: String) {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.last_failure = Some(at);
        self.last_error = Some(error);
    }

    pub(crate) fn status(&self) -> CredentialStatus {
        CredentialStatus {
            expires_at: self.expires_at,
            renewals: self.installs.saturating_sub(1),
            consecutive_failures: self.consecutive_failures,
            last_failure: self.last_failure,
            last_error: self.last_error.clone(),
        }
    }
}

/// Renews `handle`'s credentials from `source` before they expire, in a task spawned on the
/// current tokio runtime, until `token` is cancelled (pass the cluster's token, so renewal
/// ends when the cluster is removed). Credentials without a known expiry are not renewed on a
/// schedule.
///
/// A failed renewal is retried with backoff and logged with the cluster name (never the
/// credentials): a warning while the credentials are still valid, an error once they have
/// expired. [`CredentialHandle::status`] exposes the same for health checks and metrics.
///
/// ```no_run
/// # use std::sync::Arc;
/// # fn f(cluster: mcr_core::Cluster, source: Arc<dyn mcr_core::credentials::Renew>, token: tokio_util::sync::CancellationToken) {
/// use mcr_core::credentials::{spawn_renewal, RenewalOptions};
/// let handle = cluster.credentials().cloned().expect("built with RenewableClient");
/// spawn_renewal(cluster.name().clone(), handle, source, RenewalOptions::default(), token);
/// # }
/// ```
pub fn spawn_renewal(
    cluster: ClusterName,
    handle: CredentialHandle,
    source: Arc<dyn Renew>,
    opts: RenewalOptions,
    token: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let span = tracing::debug_span!("credential_renewal", cluster = %cluster);
    tokio::spawn(renewal_loop(cluster, handle, source, opts, token).instrument(span))
}

async fn renewal_loop(
    cluster: ClusterName,
    handle: CredentialHandle,
    source: Arc<dyn Renew>,
    opts: RenewalOptions,
    token: CancellationToken,
) {
    let mut backoff = Backoff::new(opts.retry_initial, opts.retry_max);
    let mut retry_in: Option<Duration> = None;
    loop {
        let wait = match (retry_in, handle.expires_at()) {
            (Some(delay), _) => delay,
            (None, None) => {
                token.cancelled().await;
                return;
            }
            (None, Some(expires)) => opts
                .renew_at(handle.installed_at(), expires)
                .duration_since(SystemTime::now())
                .unwrap_or_default(),
        };
        tokio::select! {
            _ = token.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        let renewed = tokio::select! {
            _ = token.cancelled() => return,
            renewed = source.renew() => renewed,
        };
        match renewed {
            Ok(credentials) => {
                tracing::debug!(
                    kind = credentials.kind(),
                    expires_at = ?credentials.expires_at(),
                    "credentials renewed in place"
                );
                handle.replace(credentials);
                backoff.reset();
                retry_in = None;
            }
            Err(err) => {
                let now = SystemTime::now();
                let err = super::redact::renewal_error(&*err);
                handle.record_failure(now, err.clone());
                let status = handle.status();
                let delay = backoff.next_delay();
                if status.is_expired() {
                    // The cluster is on the event itself: the span is debug-level.
                    tracing::error!(
                        cluster = %cluster,
                        error = %err,
                        failures = status.consecutive_failures,
                        retry_in = ?delay,
                        "credentials expired and renewal is failing"
                    );
                } else {
                    let expires_in = status.expires_at.and_then(|at| at.duration_since(now).ok());
                    tracing::warn!(
                        cluster = %cluster,
                        error = %err,
                        failures = status.consecutive_failures,
                        ?expires_in,
                        retry_in = ?delay,
                        "credential renewal failed; the credentials are about to expire"
                    );
                }
                retry_in = Some(delay);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_time_is_before_expiry() {
        let installed = SystemTime::now();
        let expires = installed + Duration::from_secs(100);
        let opts = RenewalOptions::default();
        for _ in 0..50 {
            let at = opts.renew_at(installed, expires);
            assert!(at >= installed + Duration::from_secs(70), "{at:?}");
            assert!(at <= installed + Duration::from_secs(80), "{at:?}");
        }
        let opts = RenewalOptions {
            margin: Some(Duration::from_secs(50)),
            jitter: 0.0,
            ..RenewalOptions::default()
        };
        assert_eq!(
            opts.renew_at(installed, expires),
            installed + Duration::from_secs(50)
        );
    }
}
