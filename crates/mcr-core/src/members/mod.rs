//! What every provider needs besides reading its source of truth: [`Members`].
//!
//! A provider reads Secrets, files, `Cluster` objects or profiles and decides, per cluster
//! name, which kubeconfig (a [`Connection`]) should run. Everything from there on is the same
//! for every provider and lives here:
//!
//! - [`Members::ensure`]: keep the running member when its connection hash is unchanged, renew
//!   its credentials in place when only they changed (same server, CA and settings: caches and
//!   watches are kept, no relist), otherwise build a new instance (bounded), probe it with a
//!   bounded `GET /version`, then start, sync, index and engage it through
//!   [`Engagements`] (the table the provider was started with),
//!   replacing the old one. Refusals by the kubeconfig
//!   [`Policy`](crate::kubeconfig::Policy) (exec plugins, auth-providers, file references,
//!   proxies) are [`Error::PolicyDenied`] and not retried.
//! - [`Workers`]: one task per cluster name with a latest-desired-wins channel and its own
//!   capped exponential backoff, so one slow, hung or broken member only ever delays its own
//!   worker, and shutdown never waits for a build in flight.
//! - [`RunGuard`]: a provider runs once at a time ([`crate::Error::AlreadyRunning`]); when the
//!   run ends the guard removes every member.
//! - [`Members::member_statuses`]: every member name with where it stands (engaged, pending,
//!   failed with its redacted reason), recorded by `ensure` and the workers.
//! - [`MemberProvider`]: implementing it (`members` and `run`) gives the
//!   [`Provider`](crate::Provider) implementation (`get`, `index_field`, `runnable`,
//!   `member_statuses`) and the
//!   [`ProviderRunnable`](crate::ProviderRunnable) one.
//! - [`Claims`]: which of several source objects claiming one cluster name owns it (the oldest,
//!   then the smallest key), and [`FirstLists`]: whether every watch stream has listed once,
//!   so that such a decision waits for the whole initial list.
//! - [`MemberOptions`]: the member settings every provider offers its users (client options,
//!   kubeconfig policy, sync timeout, retry backoff), embedded in its `Options` and turned into
//!   [`MembersOptions`] once.
//! - [`StatusBook`]: the per-object status map providers report to operators, and
//!   [`ProviderShared`]: what a provider watching a host cluster shares between its handle,
//!   its dispatcher and its workers, with [`StatusProvider`] giving that handle its accessors
//!   (`options`, `names`, `status`, `statuses`) and [`ProviderShared::drive`] running its event
//!   loop through a [`Dispatch`].
//!
//! # Example
//!
//! A provider with one member per entry of a channel of `(name, kubeconfig bytes)`:
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use mcr_core::members::{
//!     Connection, Member, MemberProvider, Members, MembersOptions, Converge, Workers,
//! };
//! use mcr_core::{BoxFuture, ClusterName, Error};
//! use tokio::sync::{Mutex, mpsc};
//! use tokio_util::sync::CancellationToken;
//!
//! struct ChannelProvider {
//!     members: Members,
//!     updates: Mutex<mpsc::Receiver<(ClusterName, Option<Vec<u8>>)>>,
//! }
//!
//! /// What to do with one member's latest kubeconfig.
//! struct Connect;
//!
//! #[derive(Debug, thiserror::Error)]
//! enum ConnectError {
//!     #[error(transparent)]
//!     Parse(#[from] mcr_core::kubeconfig::Error),
//!     #[error(transparent)]
//!     Member(#[from] mcr_core::members::Error),
//! }
//!
//! impl Converge for Connect {
//!     type Desired = Arc<[u8]>;
//!     type Error = ConnectError;
//!
//!     fn converge<'a>(&'a self, member: &'a Member<Arc<[u8]>>) -> BoxFuture<'a, Result<(), Self::Error>> {
//!         Box::pin(async move {
//!             let connection = Connection::parse(member.desired())?;
//!             member.ensure(&connection).await?;
//!             Ok(())
//!         })
//!     }
//!
//!     fn is_retryable(&self, error: &ConnectError) -> bool {
//!         // A kubeconfig that does not parse waits for a new one, so do policy denials.
//!         matches!(error, ConnectError::Member(e) if e.is_retryable())
//!     }
//!
//!     fn failed(&self, member: &Member<Arc<[u8]>>, error: &Self::Error, retry_in: Option<Duration>) {
//!         tracing::warn!(cluster = %member.name(), error = %error, ?retry_in, "member failed");
//!     }
//! }
//!
//! impl MemberProvider for ChannelProvider {
//!     fn members(&self) -> &Members {
//!         &self.members
//!     }
//!
//!     async fn run(&self, token: CancellationToken) -> Result<(), Error> {
//!         let _guard = self.members.start_run("channel")?;
//!         let workers = Workers::new(&self.members, &token, Connect);
//!         let mut updates = self.updates.lock().await;
//!         loop {
//!             tokio::select! {
//!                 () = token.cancelled() => break,
//!                 update = updates.recv() => match update {
//!                     Some((name, Some(bytes))) => workers.ensure(&name, Arc::from(bytes)),
//!                     Some((name, None)) => workers.remove(&name),
//!                     None => break,
//!                 },
//!             }
//!         }
//!         workers.shutdown().await;
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

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use parking_lot::{Mutex, MutexGuard};

use crate::{ClusterId, ClusterName, Engagements, FieldIndex};

mod claims;
mod connection;
mod drive;
mod ensure;
mod error;
mod guard;
mod options;
mod provider;
mod relist;
mod report;
mod status;
mod workers;

pub use claims::{Claims, Settled};
pub use connection::Connection;
pub use drive::Dispatch;
pub use error::{Error, ProbeError};
pub use guard::RunGuard;
pub use options::{MemberOptions, MembersOptions};
pub use provider::MemberProvider;
pub use relist::{FirstLists, Relists, Track};
pub use status::{ProviderShared, StatusBook, StatusProvider};
pub use workers::{Converge, Member, Workers};

/// What [`Members::ensure`] did; each variant carries the id of the running instance.
///
/// ```
/// use mcr_core::members::Ensured;
/// # fn f(e: Ensured) {
/// if let Ensured::Renewed(id) = e { println!("credentials of {id} renewed in place"); }
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ensured {
    /// The running member already had this connection.
    Unchanged(ClusterId),
    /// Only the credentials changed: renewed in place (same instance, caches kept).
    Renewed(ClusterId),
    /// No member of that name was running: a new one was engaged.
    Added(ClusterId),
    /// A new instance replaced the running one (different server, CA or settings).
    Replaced(ClusterId),
}

impl Ensured {
    /// The id of the running instance.
    ///
    /// ```
    /// # fn f(e: mcr_core::members::Ensured) { println!("{}", e.id()); }
    /// ```
    pub fn id(self) -> ClusterId {
        match self {
            Ensured::Unchanged(id)
            | Ensured::Renewed(id)
            | Ensured::Added(id)
            | Ensured::Replaced(id) => id,
        }
    }
}

struct Inner {
    /// The handle on the table members are added to: a table of their own until the provider
    /// starts, then the one it was started with ([`Members::bind`]).
    engagements: parking_lot::RwLock<Engagements>,
    opts: MembersOptions,
    running: AtomicBool,
    /// The connection hash whose credentials were renewed into a running instance (its
    /// [`Cluster::connection_hash`](crate::Cluster::connection_hash) still names the one it
    /// was built with).
    renewed: Mutex<HashMap<ClusterName, (ClusterId, String)>>,
    /// What the members report (see `report`).
    book: Mutex<report::Book>,
}

/// The members of one provider: its handle on the [`Engagements`] table and the rules to bring a member to a wanted
/// [`Connection`] (see the [module documentation](self)). Cheap to clone (an `Arc` inside).
///
/// ```
/// use mcr_core::members::{Members, MembersOptions};
/// let members = Members::new(MembersOptions::default());
/// assert!(members.names().is_empty());
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
    /// Members run with `opts`.
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// # let _ = members;
    /// ```
    pub fn new(opts: MembersOptions) -> Self {
        let engagements = Self::narrow(&Engagements::new(), &opts);
        Members {
            inner: Arc::new(Inner {
                engagements: parking_lot::RwLock::new(engagements),
                opts,
                running: AtomicBool::new(false),
                renewed: Mutex::new(HashMap::new()),
                book: Mutex::new(report::Book::default()),
            }),
        }
    }

    /// The options.
    pub(crate) fn options(&self) -> &MembersOptions {
        &self.inner.opts
    }

    /// The handle members are added through: on the table the provider was started with
    /// (before that, a table of the provider's own), narrowed to this provider's members,
    /// refusing a member another replica owns (the workers build it again when this replica
    /// owns it, so such a member costs no client).
    pub fn engagements(&self) -> Engagements {
        self.inner.engagements.read().clone()
    }

    /// This provider's handle on `table`.
    fn narrow(table: &Engagements, opts: &MembersOptions) -> Engagements {
        table
            .prefixed("")
            .with_sync_timeout(opts.sync_timeout)
            .refusing()
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

    /// Names of the engaged members, sorted.
    ///
    /// ```
    /// assert!(mcr_core::members::Members::new(Default::default()).names().is_empty());
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        self.engagements().names()
    }

    /// Removes the member `name` (its caches stop, the manager disengages it). False when no
    /// member of that name runs.
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// assert!(!members.remove(&"gone".into()));
    /// ```
    pub fn remove(&self, name: &ClusterName) -> bool {
        self.renewed().remove(name);
        self.report_done(name);
        self.engagements().remove(name)
    }

    fn renewed(&self) -> MutexGuard<'_, HashMap<ClusterName, (ClusterId, String)>> {
        self.inner.renewed.lock()
    }

    /// Removes every member.
    fn remove_all(&self) {
        for name in self.engagements().names() {
            self.remove(&name);
        }
        self.clear_reports();
    }
}
