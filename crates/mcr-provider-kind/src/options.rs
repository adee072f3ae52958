//! Configuration of the [`KindProvider`](crate::KindProvider).

use std::path::PathBuf;
use std::time::Duration;

use mcr_core::members::MemberOptions;

/// The program run when [`Options::kind_bin`] is `None`: `kind`, looked up on `PATH`.
pub const DEFAULT_KIND_BIN: &str = "kind";

/// Options of the [`KindProvider`](crate::KindProvider).
///
/// ```
/// use std::time::Duration;
/// use mcr_provider_kind::Options;
/// let opts = Options {
///     prefix: Some("fleet-".into()),
///     poll_interval: Duration::from_secs(5),
///     ..Options::default()
/// };
/// assert_eq!(opts.kind_bin(), std::path::Path::new("kind"));
/// assert_eq!(Options::default().poll_interval, Duration::from_secs(2));
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Only kind clusters whose name starts with this prefix join. The cluster keeps its full
    /// kind name (the prefix is not stripped). Default: `None` (every kind cluster).
    pub prefix: Option<String>,
    /// How often `kind get clusters` runs. Default: 2 s (as Go's provider).
    pub poll_interval: Duration,
    /// How often the kubeconfig of an engaged cluster is fetched again, to notice a cluster
    /// deleted and recreated under the same name. Default: 10 s.
    pub refresh_interval: Duration,
    /// The `kind` executable: a path, or a bare name looked up on `PATH`. Default: `None`
    /// ([`DEFAULT_KIND_BIN`]).
    pub kind_bin: Option<PathBuf>,
    /// Limit on each run of `kind`; a run that takes longer is killed and counts as failed.
    /// A member's `kind get kubeconfig` is also bounded by the engagement table's build
    /// timeout ([`MembersOptions::build_timeout`](mcr_core::members::MembersOptions::build_timeout),
    /// 60 s). Default: 30 s.
    pub command_timeout: Duration,
    /// Ask kind for the *internal* kubeconfig (`kind get kubeconfig --internal`: the API server
    /// as seen from inside the kind Docker network, `https://<name>-control-plane:6443`), for a
    /// controller that itself runs in a container on that network. Default: `false` (the
    /// external kubeconfig, `https://127.0.0.1:<port>`, for a controller on the host).
    pub internal: bool,
    /// Member clients and retries: client options, the kubeconfig
    /// [`Policy`](mcr_core::kubeconfig::Policy) (kind's kubeconfigs carry an inline client
    /// certificate and never need plugins, local files or proxies, so the default refuses them:
    /// whatever answers as `kind` cannot make the controller run another program or read its
    /// files through a kubeconfig), the sync timeout (`GET /version` probe and cache sync of a
    /// new member) and the retry backoff of a cluster that failed to join. Default:
    /// `MemberOptions::default()`.
    pub members: MemberOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prefix: None,
            poll_interval: Duration::from_secs(2),
            refresh_interval: Duration::from_secs(10),
            kind_bin: None,
            command_timeout: Duration::from_secs(30),
            internal: false,
            members: MemberOptions::default(),
        }
    }
}

impl Options {
    /// The `kind` executable that will run: [`Options::kind_bin`] or [`DEFAULT_KIND_BIN`].
    ///
    /// ```
    /// let opts = mcr_provider_kind::Options { kind_bin: Some("/opt/kind".into()), ..Default::default() };
    /// assert_eq!(opts.kind_bin(), std::path::Path::new("/opt/kind"));
    /// ```
    pub fn kind_bin(&self) -> &std::path::Path {
        self.kind_bin
            .as_deref()
            .unwrap_or(std::path::Path::new(DEFAULT_KIND_BIN))
    }

    /// Whether a kind cluster of that name belongs to the fleet (the prefix filter).
    ///
    /// ```
    /// let opts = mcr_provider_kind::Options { prefix: Some("fleet-".into()), ..Default::default() };
    /// assert!(opts.selects("fleet-a"));
    /// assert!(!opts.selects("dev"));
    /// assert!(mcr_provider_kind::Options::default().selects("dev"));
    /// ```
    pub fn selects(&self, name: &str) -> bool {
        self.prefix.as_deref().is_none_or(|p| name.starts_with(p))
    }
}
