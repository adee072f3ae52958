//! Leader election through a `coordination.k8s.io/v1` Lease on the host cluster.
//!
//! A candidate takes the Lease when it does not exist, has no holder, or has not changed for
//! its `leaseDurationSeconds` *as observed locally* (so clocks need not agree). Every write is a
//! `replace` carrying the `resourceVersion` that was read, so two candidates can never both win:
//! the slower one gets a 409 Conflict. The leader renews every `retry_period`; if it cannot renew
//! for `renew_deadline`, or finds someone else holding the Lease, it has lost. On a clean
//! shutdown the leader releases the Lease (empty holder) so a standby takes over at once.
//!
//! **No overlap.** A standby takes over no earlier than `lease_duration` after the start of the
//! leader's last successful renew attempt (it measures from the moment it *saw* that write). The
//! leader counts its `renew_deadline` from that same start, every attempt is cut off at that
//! deadline, and on loss its leader-only work stops taking work at once and is dropped at the
//! latest half-way between `renew_deadline` and `lease_duration` (`Elector::cutoff`).

mod elector;

use std::time::Duration;

pub(crate) use elector::{Elector, Ended};

/// Settings of leader election through a `coordination.k8s.io/v1` Lease on the host cluster.
///
/// A candidate takes the Lease when it has no holder, or has not changed for its
/// `leaseDurationSeconds` as observed locally; writes carry the `resourceVersion` read, so two
/// candidates never both win. The leader renews every `retry_period`. A candidate that finds no
/// Lease creates it but starts leading only `lease_duration` later (so the first start of a
/// deployment waits that long), because a deleted Lease may have had a leader still working;
/// that leader sees the new holder at its next renew and stops.
///
/// **Losing the Lease.** When the leader finds another identity holding the Lease, or cannot
/// renew it for `renew_deadline` counted from the start of its last successful renew attempt
/// (each attempt is cut off at that deadline, so a hung host cluster cannot stretch it), it has
/// lost: the manager stops taking leader-only work at once; controllers get their
/// `shutdown_grace` for in-flight reconciles, but every leader-only runnable still running
/// half-way between `renew_deadline` and `lease_duration` after that renew is dropped (with its
/// in-flight reconciles), before a standby can take the Lease. Then the provider and the
/// watches stop and [`Manager::run`](crate::Manager::run)
/// / [`run_until`](crate::Manager::run_until) return
/// [`Error::LeaderElectionLost`](crate::Error::LeaderElectionLost). The manager does not
/// campaign again: as with client-go's `OnStoppedLeading`, exit the process and let it restart
/// as a standby. On a clean shutdown the leader releases the Lease so a standby takes over at
/// once.
///
/// The settings must satisfy `lease_duration > renew_deadline > retry_period`
/// ([`validate`](Self::validate); [`Manager::run_until`](crate::Manager::run_until) refuses
/// others with [`Error::InvalidLeaderElection`](crate::Error::InvalidLeaderElection)).
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
    /// to `$POD_NAME` (or `$HOSTNAME`) plus a random UUID, unique per process even where
    /// hostnames and process ids repeat (two `hostNetwork` replicas on one node share the
    /// hostname, and a container's process is pid 1); durations default to 15 s / 10 s / 2 s.
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
            identity: format!("{host}_{}", uuid::Uuid::new_v4()),
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

    /// Checks `lease_duration > renew_deadline > retry_period` (and a non-zero retry period):
    /// otherwise a standby could take the Lease while this leader still believes it leads.
    ///
    /// ```
    /// use std::time::Duration;
    /// let le = mcr_manager::LeaderElection::new("x", "default")
    ///     .lease_duration(Duration::from_secs(10))
    ///     .renew_deadline(Duration::from_secs(10));
    /// let err = le.validate().unwrap_err();
    /// assert!(err.to_string().contains("lease_duration (10s) must be longer than renew_deadline (10s)"));
    /// ```
    pub fn validate(&self) -> Result<(), crate::Error> {
        let reason = if self.lease_duration <= self.renew_deadline {
            format!(
                "lease_duration ({:?}) must be longer than renew_deadline ({:?})",
                self.lease_duration, self.renew_deadline
            )
        } else if self.renew_deadline <= self.retry_period {
            format!(
                "renew_deadline ({:?}) must be longer than retry_period ({:?})",
                self.renew_deadline, self.retry_period
            )
        } else if self.retry_period.is_zero() {
            "retry_period must not be zero".to_owned()
        } else {
            return Ok(());
        };
        Err(crate::Error::InvalidLeaderElection {
            lease: self.lease_ref(),
            reason,
        })
    }

    pub(crate) fn lease_ref(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(lease: u64, renew: u64, retry: u64) -> LeaderElection {
        LeaderElection::new("l", "ns")
            .lease_duration(Duration::from_millis(lease))
            .renew_deadline(Duration::from_millis(renew))
            .retry_period(Duration::from_millis(retry))
    }

    #[test]
    fn overlapping_settings_are_refused_with_the_reason() {
        assert!(le(15_000, 10_000, 2_000).validate().is_ok());
        for (bad, why) in [
            (
                le(10_000, 10_000, 2_000),
                "lease_duration (10s) must be longer than renew_deadline (10s)",
            ),
            (
                le(5_000, 10_000, 2_000),
                "lease_duration (5s) must be longer than renew_deadline (10s)",
            ),
            (
                le(15_000, 2_000, 2_000),
                "renew_deadline (2s) must be longer than retry_period (2s)",
            ),
            (
                le(15_000, 1_000, 2_000),
                "renew_deadline (1s) must be longer than retry_period (2s)",
            ),
            (le(15_000, 10_000, 0), "retry_period must not be zero"),
        ] {
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains(why) && err.contains("ns/l"), "{err}");
        }
    }
}
