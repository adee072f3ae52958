//! [`Sharding`]: the settings of sharded mode.

use std::time::Duration;

/// Settings of sharded mode (see the [`shard`](crate::shard) module for the protocol).
///
/// Defaults: group `mcr`, the host client's namespace, identity `$POD_NAME` (or `$HOSTNAME`)
/// plus a random suffix, weight 1, lease duration 15 s, renew deadline 10 s, renew period
/// 5 s. They must satisfy `lease_duration > renew_deadline > renew_period`
/// ([`validate`](Self::validate)). Each replica writes its Lease once per renew period.
///
/// ```
/// use std::time::Duration;
/// use mcr_manager::Sharding;
///
/// let sharding = Sharding::new("my-controller")
///     .namespace("controllers")
///     .identity("replica-1")
///     .weight(2)
///     .lease_duration(Duration::from_secs(15))
///     .renew_deadline(Duration::from_secs(10))
///     .renew_period(Duration::from_secs(5));
/// assert_eq!(sharding.lease_name(), "my-controller-replica-1");
/// assert!(sharding.validate().is_ok());
/// ```
#[derive(Clone, Debug)]
pub struct Sharding {
    pub(crate) group: String,
    pub(crate) namespace: Option<String>,
    pub(crate) identity: String,
    pub(crate) weight: u32,
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) renew_period: Duration,
}

impl Sharding {
    /// Shards with the other replicas of `group` (one group per controller deployment; it
    /// prefixes the Lease names and labels them).
    ///
    /// ```
    /// let s = mcr_manager::Sharding::new("my-controller");
    /// assert!(s.identity_str().starts_with(|c: char| c.is_ascii_alphanumeric()));
    /// ```
    pub fn new(group: impl Into<String>) -> Self {
        let host = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "mcr".to_owned());
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Sharding {
            group: group.into(),
            namespace: None,
            identity: format!("{}-{}", host.to_ascii_lowercase(), &suffix[..8]),
            weight: 1,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            renew_period: Duration::from_secs(5),
        }
    }

    /// The namespace of the peer Leases on the host (default: the host client's namespace).
    ///
    /// ```
    /// let s = mcr_manager::Sharding::new("g").namespace("kube-system");
    /// ```
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// This replica's identity (unique in the group; a DNS label, it names the Lease).
    ///
    /// ```
    /// let s = mcr_manager::Sharding::new("g").identity("replica-1");
    /// assert_eq!(s.identity_str(), "replica-1");
    /// ```
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// This replica's weight: its share of the fleet is `weight / Σ weights` (default 1,
    /// at least 1).
    ///
    /// ```
    /// let s = mcr_manager::Sharding::new("g").weight(3);
    /// ```
    #[must_use]
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight.max(1);
        self
    }

    /// How long a peer whose Lease stopped changing is still taken for live (default 15 s).
    /// A dead replica's clusters are taken over after about this long.
    ///
    /// ```
    /// let s = mcr_manager::Sharding::new("g").lease_duration(std::time::Duration::from_secs(30));
    /// ```
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// How long this replica may fail to renew before it releases every cluster (default 10 s).
    ///
    /// ```
    /// let s = mcr_manager::Sharding::new("g").renew_deadline(std::time::Duration::from_secs(8));
    /// ```
    #[must_use]
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// How often this replica renews its Lease (default 5 s): its steady-state write rate.
    ///
    /// ```
    /// let s = mcr_manager::Sharding::new("g").renew_period(std::time::Duration::from_secs(2));
    /// ```
    #[must_use]
    pub fn renew_period(mut self, d: Duration) -> Self {
        self.renew_period = d;
        self
    }

    /// This replica's identity.
    ///
    /// ```
    /// assert_eq!(mcr_manager::Sharding::new("g").identity("x").identity_str(), "x");
    /// ```
    pub fn identity_str(&self) -> &str {
        &self.identity
    }

    /// The name of this replica's Lease: `<group>-<identity>`.
    ///
    /// ```
    /// assert_eq!(mcr_manager::Sharding::new("g").identity("x").lease_name(), "g-x");
    /// ```
    pub fn lease_name(&self) -> String {
        format!("{}-{}", self.group, self.identity)
    }

    /// Checks `lease_duration > renew_deadline > renew_period > 0` and that the Lease name is
    /// a valid object name; the error says what is wrong.
    ///
    /// ```
    /// use std::time::Duration;
    /// let bad = mcr_manager::Sharding::new("g").renew_deadline(Duration::from_secs(20));
    /// assert!(bad.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), String> {
        if self.renew_period.is_zero() {
            return Err("renew_period must be positive".into());
        }
        if !(self.lease_duration > self.renew_deadline && self.renew_deadline > self.renew_period) {
            return Err(format!(
                "need lease_duration ({:?}) > renew_deadline ({:?}) > renew_period ({:?})",
                self.lease_duration, self.renew_deadline, self.renew_period
            ));
        }
        let name = self.lease_name();
        let valid = !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !valid {
            return Err(format!(
                "lease name {name:?} (group and identity) is not a valid object name"
            ));
        }
        Ok(())
    }

    /// The namespace of the Leases, given the host client's default namespace.
    pub(crate) fn namespace_or(&self, default: &str) -> String {
        self.namespace.clone().unwrap_or_else(|| default.to_owned())
    }

    /// How long a release may take: what is left of the lease duration after the renew
    /// deadline.
    pub(crate) fn release_grace(&self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_deadline)
    }

    /// The pause after a failed step.
    pub(crate) fn retry_after_failure(&self) -> Duration {
        (self.renew_period / 4).max(Duration::from_millis(50))
    }
}
