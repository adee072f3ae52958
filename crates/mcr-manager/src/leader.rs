//! Leader election through a `coordination.k8s.io/v1` Lease on the host cluster.
//!
//! A candidate takes the Lease when it does not exist, has no holder, or has not changed for
//! its `leaseDurationSeconds` *as observed locally* (so clocks need not agree). Every write is a
//! `replace` carrying the `resourceVersion` that was read, so two candidates can never both win:
//! the slower one gets a 409 Conflict. The leader renews every `retry_period`; if it cannot renew
//! for `renew_deadline`, or finds someone else holding the Lease, it has lost. On a clean
//! shutdown the leader releases the Lease (empty holder) so a standby takes over at once.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, api::PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Settings of leader election through a `coordination.k8s.io/v1` Lease on the host cluster.
///
/// A candidate takes the Lease when it does not exist, has no holder, or has not changed for its
/// `leaseDurationSeconds` as observed locally; writes carry the `resourceVersion` read, so two
/// candidates never both win. The leader renews every `retry_period`.
///
/// **Losing the Lease.** When the leader finds another identity holding the Lease, or cannot
/// renew it for `renew_deadline` (e.g. the host cluster is unreachable), it has lost: the
/// manager stops its leader-only work gracefully (controllers finish their in-flight
/// reconciles, then the provider and the watches stop) and [`Manager::run`](crate::Manager::run)
/// / [`run_until`](crate::Manager::run_until) return
/// [`Error::LeaderElectionLost`](crate::Error::LeaderElectionLost). The manager does not
/// campaign again: as with client-go's `OnStoppedLeading`, exit the process and let it restart
/// as a standby. On a clean shutdown the leader releases the Lease so a standby takes over at
/// once.
///
/// ```
/// use std::time::Duration;
/// use mcr_manager::LeaderElection;
///
/// let le = LeaderElection::new("my-controller", "kube-system")
///     .identity("pod-a")
///     .lease_duration(Duration::from_secs(15))
///     .renew_deadline(Duration::from_secs(10))
///     .retry_period(Duration::from_secs(2));
/// assert_eq!(le.lease_name(), "my-controller");
/// ```
#[derive(Clone, Debug)]
pub struct LeaderElection {
    name: String,
    namespace: String,
    identity: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
}

impl LeaderElection {
    /// Elect through the Lease `name` in `namespace` of the host cluster. The identity defaults
    /// to `$HOSTNAME` (or `$POD_NAME`) plus the process id; durations default to 15 s / 10 s / 2 s.
    ///
    /// ```
    /// let le = mcr_manager::LeaderElection::new("my-controller", "default");
    /// assert!(!le.identity_str().is_empty());
    /// ```
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        let host = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "mcr".to_owned());
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: format!("{host}-{}", std::process::id()),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Sets this candidate's identity (must differ between candidates).
    ///
    /// ```
    /// let le = mcr_manager::LeaderElection::new("x", "default").identity("replica-1");
    /// assert_eq!(le.identity_str(), "replica-1");
    /// ```
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// How long a Lease that stopped changing is respected before others take it.
    ///
    /// ```
    /// let le = mcr_manager::LeaderElection::new("x", "default").lease_duration(std::time::Duration::from_secs(30));
    /// ```
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// How long the leader keeps trying to renew before it gives up leadership.
    ///
    /// ```
    /// let le = mcr_manager::LeaderElection::new("x", "default").renew_deadline(std::time::Duration::from_secs(20));
    /// ```
    #[must_use]
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// How often candidates try to acquire and the leader renews.
    ///
    /// ```
    /// let le = mcr_manager::LeaderElection::new("x", "default").retry_period(std::time::Duration::from_secs(1));
    /// ```
    #[must_use]
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// The Lease's name.
    ///
    /// ```
    /// assert_eq!(mcr_manager::LeaderElection::new("x", "default").lease_name(), "x");
    /// ```
    pub fn lease_name(&self) -> &str {
        &self.name
    }

    /// This candidate's identity.
    ///
    /// ```
    /// let id = mcr_manager::LeaderElection::new("x", "default").identity_str().to_owned();
    /// ```
    pub fn identity_str(&self) -> &str {
        &self.identity
    }

    pub(crate) fn lease_ref(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Why the leader stopped leading.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The stop token fired.
    Stopped,
    /// Someone else holds the Lease, or renewing failed for too long.
    Lost,
}

/// One candidate's view of the Lease.
pub(crate) struct Elector {
    api: Api<Lease>,
    cfg: LeaderElection,
    observed: Option<(String, Instant)>,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

impl Elector {
    pub(crate) fn new(client: kube::Client, cfg: LeaderElection) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: None,
        }
    }

    /// Tries until this candidate holds the Lease (`true`) or `stop` fires (`false`).
    pub(crate) async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        loop {
            // A hung API server must not keep a stopping manager waiting.
            let attempt = tokio::select! {
                () = stop.cancelled() => return false,
                attempt = tokio::time::timeout(self.cfg.renew_deadline, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Err(_) => warn!(lease = %self.cfg.lease_ref(), "acquiring the lease timed out"),
                Ok(Ok(true)) => {
                    info!(lease = %self.cfg.lease_ref(), identity = %self.cfg.identity, "became leader");
                    return true;
                }
                Ok(Ok(false)) => {
                    debug!(lease = %self.cfg.lease_ref(), "lease held by another candidate")
                }
                Ok(Err(err)) => {
                    warn!(lease = %self.cfg.lease_ref(), error = %err, "cannot acquire lease")
                }
            }
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
    }

    /// Renews until `stop` fires or leadership is lost.
    pub(crate) async fn keep(&mut self, stop: &CancellationToken) -> Ended {
        let mut last_renew = Instant::now();
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ended::Stopped,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
            let attempt = tokio::select! {
                () = stop.cancelled() => return Ended::Stopped,
                attempt = tokio::time::timeout(self.cfg.renew_deadline, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Ok(true)) => last_renew = Instant::now(),
                Ok(Ok(false)) => {
                    warn!(lease = %self.cfg.lease_ref(), "lease taken by another candidate");
                    return Ended::Lost;
                }
                Ok(Err(err)) => {
                    warn!(lease = %self.cfg.lease_ref(), error = %err, "cannot renew lease")
                }
                Err(_) => warn!(lease = %self.cfg.lease_ref(), "renewing the lease timed out"),
            }
            if last_renew.elapsed() > self.cfg.renew_deadline {
                warn!(lease = %self.cfg.lease_ref(), "renew deadline passed");
                return Ended::Lost;
            }
        }
    }

    /// Gives the Lease up (best effort, bounded by the renew deadline: an unreachable host
    /// cluster must not keep shutdown waiting) so that a standby can take over at once.
    pub(crate) async fn release(&mut self) {
        let deadline = self.cfg.renew_deadline;
        if tokio::time::timeout(deadline, self.try_release())
            .await
            .is_err()
        {
            warn!(lease = %self.cfg.lease_ref(), "releasing the lease timed out");
        }
    }

    async fn try_release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => info!(lease = %self.cfg.lease_ref(), "released lease"),
            Err(err) => warn!(lease = %self.cfg.lease_ref(), error = %err, "cannot release lease"),
        }
    }

    /// One step: `Ok(true)` when this candidate holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let me = self.cfg.identity.clone();
        let Some(mut lease) = self.api.get_opt(&self.cfg.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(seconds(self.cfg.lease_duration)),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(false),
                Err(err) => Err(err),
            };
        };
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(me.as_str());
        if holder.is_some() && !mine {
            let duration = Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).unwrap_or(15),
            );
            match &self.observed {
                Some((seen, at)) if *seen == rv => {
                    if at.elapsed() < duration {
                        return Ok(false);
                    }
                    info!(lease = %self.cfg.lease_ref(), holder = ?holder, "lease expired; taking over");
                }
                _ => {
                    self.observed = Some((rv, Instant::now()));
                    return Ok(false);
                }
            }
        }
        if !mine {
            spec.acquire_time = Some(now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(me);
        spec.lease_duration_seconds = Some(seconds(self.cfg.lease_duration));
        spec.renew_time = Some(now());
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observed = updated
                    .metadata
                    .resource_version
                    .map(|rv| (rv, Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(false),
            Err(err) => Err(err),
        }
    }
}
