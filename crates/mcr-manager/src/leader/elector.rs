//! One candidate's side of the Lease: acquiring, renewing within the deadline, releasing.

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Api, api::PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::LeaderElection;
use crate::lease::{now, seconds};

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
    /// When the last successful acquire/renew attempt *started*: the write it made reached the
    /// server after this, so no standby can take over before `renewed + lease_duration`.
    renewed: Instant,
    /// When this candidate, not leading yet, created a missing Lease: it leads only once
    /// `lease_duration` has passed since, when any leader of a deleted Lease has stopped.
    created: Option<Instant>,
}

impl Elector {
    pub(crate) fn new(client: kube::Client, cfg: LeaderElection) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: None,
            renewed: Instant::now(),
            created: None,
        }
    }

    /// Tries until this candidate holds the Lease (`true`) or `stop` fires (`false`).
    pub(crate) async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        loop {
            // A hung API server must not keep a stopping manager waiting, and an attempt that
            // outlives the renew deadline could not lead anyway.
            let started = Instant::now();
            let attempt = tokio::select! {
                () = stop.cancelled() => return false,
                attempt = tokio::time::timeout(self.cfg.renew_deadline, self.try_acquire_or_renew(false)) => attempt,
            };
            match attempt {
                Err(_) => warn!(lease = %self.cfg.lease_ref(), "acquiring the lease timed out"),
                Ok(Ok(true)) => {
                    info!(lease = %self.cfg.lease_ref(), identity = %self.cfg.identity, "became leader");
                    self.renewed = started;
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

    /// Renews until `stop` fires or leadership is lost: someone else holds the Lease, or no
    /// attempt succeeded within `renew_deadline` of the start of the last successful one. Each
    /// attempt is cut off at that deadline, so loss is declared on time even when the host
    /// cluster hangs.
    pub(crate) async fn keep(&mut self, stop: &CancellationToken) -> Ended {
        loop {
            let deadline = self.renewed + self.cfg.renew_deadline;
            let next = (Instant::now() + self.cfg.retry_period).min(deadline);
            tokio::select! {
                () = stop.cancelled() => return Ended::Stopped,
                () = tokio::time::sleep_until(next) => {}
            }
            let started = Instant::now();
            if started >= deadline {
                warn!(lease = %self.cfg.lease_ref(), "renew deadline passed");
                return Ended::Lost;
            }
            let attempt = tokio::select! {
                () = stop.cancelled() => return Ended::Stopped,
                attempt = tokio::time::timeout_at(deadline, self.try_acquire_or_renew(true)) => attempt,
            };
            match attempt {
                Ok(Ok(true)) => self.renewed = started,
                Ok(Ok(false)) => {
                    warn!(lease = %self.cfg.lease_ref(), "lease taken by another candidate");
                    return Ended::Lost;
                }
                Ok(Err(err)) => {
                    warn!(lease = %self.cfg.lease_ref(), error = %err, "cannot renew lease")
                }
                Err(_) => warn!(lease = %self.cfg.lease_ref(), "renewing the lease timed out"),
            }
        }
    }

    /// When leader-only work still running once renewals stopped (loss or shutdown) is dropped: half-way between the renew
    /// deadline (when loss is declared) and the earliest moment a standby can take over
    /// (`lease_duration` after the start of the last successful renew), leaving the other half
    /// as a margin for requests already on the wire.
    pub(crate) fn cutoff(&self) -> Instant {
        let margin = self
            .cfg
            .lease_duration
            .saturating_sub(self.cfg.renew_deadline);
        self.renewed + self.cfg.renew_deadline + margin / 2
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

    /// One step: `Ok(true)` when this candidate holds the Lease afterwards and may lead
    /// (`leading`: it leads already; a leader that recreates its own deleted Lease goes on).
    async fn try_acquire_or_renew(&mut self, leading: bool) -> Result<bool, kube::Error> {
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
                Ok(_) if leading => Ok(true),
                Ok(created) => {
                    info!(lease = %self.cfg.lease_ref(), wait = ?self.cfg.lease_duration,
                        "created the missing lease; leading once a leader of a deleted one must have stopped");
                    self.created = Some(Instant::now());
                    self.observed = created
                        .metadata
                        .resource_version
                        .map(|rv| (rv, Instant::now()));
                    Ok(false)
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(false),
                Err(err) => Err(err),
            };
        };
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(me.as_str());
        if holder.is_some() && !mine {
            let duration = crate::lease::duration(spec);
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
                let waiting = !leading
                    && mine
                    && self
                        .created
                        .is_some_and(|at| at.elapsed() < self.cfg.lease_duration);
                Ok(!waiting)
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(false),
            Err(err) => Err(err),
        }
    }
}
