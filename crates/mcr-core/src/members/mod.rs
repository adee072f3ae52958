//! What every provider needs besides reading its source of truth: [`Members`], its handle on
//! the [`Engagements`] table.
//!
//! A provider reads Secrets, files, `Cluster` objects or profiles and decides, per cluster
//! name, what should run there: a kubeconfig ([`Connection`]), a ready [`Cluster`](crate::Cluster),
//! or a [`Connect`](crate::Connect) source asked on demand. It says so with
//! [`Members::want`] and [`Members::remove`]; everything from there on is the same for every
//! provider and is the table's (see [`Engagements`]): building clients under the provider's
//! [`MembersOptions`] (the kubeconfig [`Policy`](crate::kubeconfig::Policy) checked before
//! anything runs or is read), a bounded probe, renewing credentials in place when only they
//! changed, starting, syncing, engaging, retrying with backoff (one member never holding up
//! another), keeping a member another replica owns without a client, and the status of every
//! member ([`Members::member_statuses`]).
//!
//! Besides the handle:
//!
//! - [`RunGuard`]: a provider runs once at a time ([`crate::Error::AlreadyRunning`]); when the
//!   run ends the guard removes every member.
//! - [`MemberProvider`]: implementing it (`members` and `run`) gives the
//!   [`Provider`](crate::Provider) implementation (`get`, `index_field`, `runnable`,
//!   `member_statuses`) and the [`ProviderRunnable`](crate::ProviderRunnable) one.
//! - [`Claims`]: which of several source objects claiming one cluster name owns it (the oldest,
//!   then the smallest key), and [`FirstLists`]: whether every watch stream has listed once,
//!   so that such a decision waits for the whole initial list.
//! - [`MemberOptions`]: the member settings every provider offers its users (client options,
//!   kubeconfig policy, sync timeout, retry backoff), embedded in its `Options` and turned into
//!   [`MembersOptions`] once.
//! - [`StatusBook`]: the per-object status map providers report to operators, and
//!   [`ProviderShared`]: what a provider watching a host cluster shares between its handle and
//!   its dispatcher, with [`StatusProvider`] giving that handle its accessors (`options`,
//!   `names`, `status`, `statuses`), which read where each wanted member stands from the
//!   table ([`Tracked`]).
//!
//! # Example
//!
//! A provider with one member per entry of a channel of `(name, kubeconfig bytes)`:
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use mcr_core::members::{Connection, MemberProvider, Members, MembersOptions};
//! use mcr_core::{ClusterName, Error, Source};
//! use tokio::sync::{Mutex, mpsc};
//! use tokio_util::sync::CancellationToken;
//!
//! struct ChannelProvider {
//!     members: Members,
//!     updates: Mutex<mpsc::Receiver<(ClusterName, Option<Vec<u8>>)>>,
//! }
//!
//! impl MemberProvider for ChannelProvider {
//!     fn members(&self) -> &Members {
//!         &self.members
//!     }
//!
//!     async fn run(&self, token: CancellationToken) -> Result<(), Error> {
//!         let _guard = self.members.start_run("channel")?;
//!         let mut updates = self.updates.lock().await;
//!         loop {
//!             tokio::select! {
//!                 () = token.cancelled() => break,
//!                 update = updates.recv() => match update {
//!                     Some((name, Some(bytes))) => match Connection::parse(&bytes) {
//!                         Ok(conn) => self.members.want(&token, &name, Source::Kubeconfig(conn))?,
//!                         // A kubeconfig that does not parse: nothing runs until a new one.
//!                         Err(err) => {
//!                             tracing::warn!(cluster = %name, error = %err, "bad kubeconfig");
//!                             self.members.remove(&name);
//!                         }
//!                     },
//!                     Some((name, None)) => {
//!                         self.members.remove(&name);
//!                     }
//!                     None => break,
//!                 },
//!             }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let provider = ChannelProvider {
//!     members: Members::new(MembersOptions::default()),
//!     updates: Mutex::new(mpsc::channel(16).1),
//! };
//! // `provider` is a `mcr_core::Provider`, ready for the manager.
//! let _: Arc<dyn mcr_core::Provider> = Arc::new(provider);
//! ```

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::{ClusterName, Engagements, FieldIndex, MemberStatus, Source};

mod claims;
mod connection;
mod error;
mod guard;
mod options;
mod provider;
mod relist;
mod status;

pub use claims::{Claims, Settled};
pub use connection::Connection;
pub use error::{Error, ProbeError};
pub use guard::RunGuard;
pub use options::{MemberOptions, MembersOptions};
pub use provider::MemberProvider;
pub use relist::{FirstLists, Relists, Track};
pub use status::{ProviderShared, StatusBook, StatusProvider, Tracked};

/// The provider name reported before [`Members::start_run`] names it.
const UNNAMED: &str = "unnamed";

struct Inner {
    /// The handle on the table members are wanted through: a table of their own until the
    /// provider starts, then the one it was started with ([`Members::bind`]).
    engagements: parking_lot::RwLock<Engagements>,
    running: AtomicBool,
    /// The provider's name, as its run gave it.
    provider: Mutex<Option<Arc<str>>>,
}

/// The members of one provider: its handle on the [`Engagements`] table, and the options
/// members are brought up with (see the [module documentation](self)). Cheap to clone (an
/// `Arc` inside).
///
/// ```
/// use mcr_core::members::{Members, MembersOptions};
/// let members = Members::new(MembersOptions::default());
/// assert!(members.member_statuses().is_empty());
/// ```
#[derive(Clone)]
pub struct Members {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members")
            .field("engagements", &*self.inner.engagements.read())
            .finish_non_exhaustive()
    }
}

impl Members {
    /// Members brought up with `opts`.
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// # let _ = members;
    /// ```
    pub fn new(opts: MembersOptions) -> Self {
        let engagements = Engagements::new().prefixed("").with_options(Arc::new(opts));
        Members {
            inner: Arc::new(Inner {
                engagements: parking_lot::RwLock::new(engagements),
                running: AtomicBool::new(false),
                provider: Mutex::new(None),
            }),
        }
    }

    /// The handle members are wanted through: on the table the provider was started with
    /// (before that, a table of the provider's own), narrowed to this provider's members.
    pub fn engagements(&self) -> Engagements {
        self.inner.engagements.read().clone()
    }

    /// Binds the members to `table`, the one the provider was started with; the field
    /// indexes registered before carry over. Refused while a run is on
    /// ([`crate::Error::AlreadyRunning`]).
    pub fn bind(&self, table: &Engagements) -> Result<(), crate::Error> {
        if self.inner.running.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(crate::Error::AlreadyRunning {
                provider: self.provider_name(),
            });
        }
        let bound = self.engagements().rebind(table)?;
        *self.inner.engagements.write() = bound;
        Ok(())
    }

    /// Registers a field index on every member, current and future (see
    /// [`Engagements::index_field`]).
    pub(crate) fn index_field(&self, index: &FieldIndex) -> Result<(), crate::Error> {
        self.engagements().register_index(index)
    }

    /// Wants `source` under `name` for the run of `token` (see [`Engagements::want`]).
    ///
    /// ```no_run
    /// # fn f(members: mcr_core::members::Members, conn: mcr_core::members::Connection) -> Result<(), mcr_core::Error> {
    /// let run = tokio_util::sync::CancellationToken::new();
    /// members.want(&run, &"member-1".into(), mcr_core::Source::Kubeconfig(conn))?;
    /// # Ok(()) }
    /// ```
    pub fn want(
        &self,
        token: &CancellationToken,
        name: &ClusterName,
        source: Source,
    ) -> Result<(), crate::Error> {
        self.engagements().want(token, name, source)
    }

    /// Removes the member `name`, in whatever phase (its caches stop, the manager disengages
    /// it). False when no member of that name is wanted.
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// assert!(!members.remove(&"gone".into()));
    /// ```
    pub fn remove(&self, name: &ClusterName) -> bool {
        self.engagements().remove(name)
    }

    /// Every member the provider wants, sorted by name, with where it stands (engaged,
    /// pending, failed with its redacted reason and retry delay, or owned elsewhere): the
    /// table's own record, reported under the provider's name.
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// assert!(members.member_statuses().is_empty());
    /// ```
    pub fn member_statuses(&self) -> Vec<MemberStatus> {
        let provider = self
            .inner
            .provider
            .lock()
            .clone()
            .unwrap_or_else(|| Arc::from(UNNAMED));
        self.engagements()
            .member_states()
            .into_iter()
            .map(|(name, state)| MemberStatus::new(provider.clone(), name, state))
            .collect()
    }

    /// Names the provider in what the members report (done by [`start_run`](Self::start_run)).
    fn name_provider(&self, provider: &str) {
        *self.inner.provider.lock() = Some(Arc::from(provider));
    }

    /// The provider's name, as the last run gave it (`"provider"` before any).
    fn provider_name(&self) -> String {
        self.inner
            .provider
            .lock()
            .as_deref()
            .unwrap_or("provider")
            .to_owned()
    }

    /// Removes every member.
    fn remove_all(&self) {
        let engagements = self.engagements();
        for (name, _) in engagements.member_states() {
            engagements.remove(&name);
        }
    }
}
