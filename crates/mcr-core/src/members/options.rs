//! [`MembersOptions`] (what [`Members`](super::Members) runs with) and [`MemberOptions`] (the
//! member settings a provider offers its users, turned into `MembersOptions` once).

use std::time::Duration;

use crate::kubeconfig::{ClientOptions, Policy};

/// Options of [`Members`](super::Members); every field has a documented default.
///
/// ```
/// use std::time::Duration;
/// use mcr_core::members::MembersOptions;
/// let opts = MembersOptions { probe_timeout: None, ..MembersOptions::default() };
/// assert_eq!(opts.sync_timeout, Duration::from_secs(30));
/// ```
#[derive(Clone, Debug)]
pub struct MembersOptions {
    /// Applied to every member client (timeouts, user agent, impersonation, headers: tuning
    /// only). Default: `ClientOptions::default()`.
    pub client_options: ClientOptions,
    /// What kubeconfigs may make the controller do (run `exec` plugins or `auth-provider`s,
    /// read local files, use a proxy), unless a
    /// [`Connection::with_policy`](super::Connection::with_policy) names the policy of that
    /// member. Checked for new instances and for credentials renewed in place alike.
    /// Default: [`Policy::default`] (the policy for untrusted kubeconfigs).
    pub policy: Policy,
    /// How long building a client (and renewing credentials) may take: an exec plugin that
    /// hangs fails the attempt here. Default: 60 s.
    pub build_timeout: Duration,
    /// How long a new instance may take to answer `GET /version` before the attempt fails;
    /// `None` engages without probing. Default: 30 s.
    pub probe_timeout: Option<Duration>,
    /// How long a new instance's caches may take to sync
    /// ([`Engagements::with_sync_timeout`](crate::Engagements::with_sync_timeout)). Default: 30 s.
    pub sync_timeout: Duration,
    /// First retry delay of a failing member (the engagement table retries it); doubles up to
    /// `backoff_max`. Default: 1 s.
    pub backoff_initial: Duration,
    /// Upper bound of a member's retry delay. Default: 5 min.
    pub backoff_max: Duration,
}

impl Default for MembersOptions {
    fn default() -> Self {
        MembersOptions {
            client_options: ClientOptions::default(),
            policy: Policy::default(),
            build_timeout: Duration::from_secs(60),
            probe_timeout: Some(Duration::from_secs(30)),
            sync_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }
}

/// The member settings every provider built on [`Members`](super::Members) offers its users:
/// how member clients are built (client options, kubeconfig policy), how long a new member may
/// take to answer and sync, and how a failing member is retried. A provider embeds it in its
/// `Options` (as `Options::members`) and keeps its own defaults where they differ (the file
/// provider trusts its kubeconfigs, for example).
///
/// ```
/// use std::time::Duration;
/// use mcr_core::members::{MemberOptions, MembersOptions};
/// let opts = MemberOptions { sync_timeout: Duration::from_secs(10), ..MemberOptions::default() };
/// let members: MembersOptions = opts.members_options();
/// assert_eq!(members.probe_timeout, Some(Duration::from_secs(10)));
/// ```
#[derive(Clone, Debug)]
pub struct MemberOptions {
    /// Applied to every member client (timeouts, user agent, impersonation, headers); tuning
    /// only, replacing it cannot weaken [`policy`](Self::policy). Default:
    /// `ClientOptions::default()`.
    pub client_options: ClientOptions,
    /// What a member's kubeconfig may make the controller do: run `exec` credential plugins or
    /// `auth-provider`s, read local files, use a proxy. Default: [`Policy::default`] (the
    /// policy for untrusted kubeconfigs: none of it).
    pub policy: Policy,
    /// How long a new member may take to answer its first request (`GET /version`) and to sync
    /// its caches before the attempt counts as failed and is retried. Default: 30 s.
    pub sync_timeout: Duration,
    /// First retry delay of a failing member; doubles on every further failure. Default: 1 s.
    pub backoff_initial: Duration,
    /// Upper bound of the retry delay. Default: 5 min.
    pub backoff_max: Duration,
}

impl Default for MemberOptions {
    fn default() -> Self {
        MemberOptions {
            client_options: ClientOptions::default(),
            policy: Policy::default(),
            sync_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }
}

impl MemberOptions {
    /// The [`MembersOptions`] of these settings: the sync timeout also bounds the probe of a
    /// new member; the build timeout keeps its default.
    ///
    /// ```
    /// use std::time::Duration;
    /// let members = mcr_core::members::MemberOptions::default().members_options();
    /// assert_eq!(members.sync_timeout, Duration::from_secs(30));
    /// assert_eq!(members.probe_timeout, Some(Duration::from_secs(30)));
    /// ```
    pub fn members_options(&self) -> MembersOptions {
        MembersOptions {
            client_options: self.client_options.clone(),
            policy: self.policy.clone(),
            probe_timeout: Some(self.sync_timeout),
            sync_timeout: self.sync_timeout,
            backoff_initial: self.backoff_initial,
            backoff_max: self.backoff_max,
            ..MembersOptions::default()
        }
    }
}
