//! [`Engagements`]: the one table of a process's members and the one owner of their
//! lifecycle. A provider says which members it [wants](Engagements::want) and how to reach
//! each ([`Source`]); the table alone builds, probes, retries with backoff, keeps a member
//! owned by another replica without a client, starts, syncs, engages, activates, replaces,
//! renews in place and stops.
//!
//! Each member is one entry under one lock. Every change (a want or a removal, a change of
//! ownership, an attempt that ended, a retry that is due) and a periodic resync run the same
//! converge step over the entries concerned: from what is wanted, who owns the name and what
//! runs, to what should run next. An event that is missed or comes in another order is
//! repaired by the next step, not kept.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod attempt;
mod converge;
mod lookup;
mod ownership;
mod source;

pub use source::{Connect, Source};

use crate::coordinator::Coordinator;
use crate::members::MembersOptions;
use crate::{Aware, Cluster, ClusterName, Error, FieldIndex, Released};
use source::Key;

/// The engaged instance of a member.
struct Running {
    cluster: Cluster,
    token: CancellationToken,
    /// The source it runs (or was renewed in place to).
    key: Key,
}

/// An attempt under way: a new instance being built, probed, started and synced, or the
/// running one's credentials renewed.
struct Attempt {
    id: u64,
    /// Cancels the attempt and whatever it started.
    token: CancellationToken,
    key: Key,
    /// The instance it started, once it did (its subscribers may hold it).
    started: Option<Cluster>,
    /// Whether its instance was engaged with the subscribers (a new subscriber is engaged
    /// with it too).
    engaged: bool,
}

/// The last attempt for the current source failed.
struct Failure {
    key: Key,
    /// Why, redacted and in one line.
    reason: String,
    /// When the next attempt may start (`None`: not before the source changes).
    retry_at: Option<Instant>,
    /// Consecutive failures of this source.
    count: u32,
}

/// One member: everything the table knows of it.
struct Entry {
    /// The handle it was wanted through (prefix, sync timeout, member options).
    view: View,
    /// The run it belongs to: every instance's token is a child of it.
    parent: CancellationToken,
    /// What is wanted; for a [`Source::Cluster`], an instance not engaged yet.
    source: Source,
    key: Key,
    /// Who owns it, as the last converge step found, when another replica does.
    elsewhere: Option<Option<String>>,
    /// What runs of it here, and how the last attempt went: nothing for a member owned
    /// elsewhere, which keeps the entry small.
    here: Option<Box<Here>>,
    /// Engaged by hand ([`Aware`] for `Engagements`): recorded, never brought up by the table.
    by_hand: bool,
}

/// What runs of a member here.
#[derive(Default)]
struct Here {
    active: Option<Running>,
    /// Boxed, as the failure: passing states, where `active` is what a member keeps.
    attempt: Option<Box<Attempt>>,
    failure: Option<Box<Failure>>,
    /// The caller of [`Engagements::add`] waiting for the first outcome.
    waiter: Option<tokio::sync::oneshot::Sender<Result<(), Error>>>,
}

impl Entry {
    /// Whether the entry still belongs to a live run.
    fn live(&self) -> bool {
        !self.parent.is_cancelled()
    }

    /// The active instance, unless its token fired.
    fn serving(&self) -> Option<&Running> {
        self.here
            .as_ref()?
            .active
            .as_ref()
            .filter(|r| !r.token.is_cancelled())
    }

    /// The attempt under way.
    fn attempt(&self) -> Option<&Attempt> {
        self.here.as_ref()?.attempt.as_deref()
    }

    /// The last failure.
    fn failure(&self) -> Option<&Failure> {
        self.here.as_ref()?.failure.as_deref()
    }

    /// What runs here, made if need be.
    fn here(&mut self) -> &mut Here {
        self.here.get_or_insert_with(Box::default)
    }

    /// Drops what runs here once nothing does (a member stopped, or parked).
    fn tidy(&mut self) {
        if self.here.as_ref().is_some_and(|h| {
            h.active.is_none() && h.attempt.is_none() && h.failure.is_none() && h.waiter.is_none()
        }) {
            self.here = None;
        }
    }
}

/// The table's state, under one lock.
#[derive(Default)]
struct State {
    /// Every member, by full name (sorted: the converge step visits them in one order).
    entries: BTreeMap<ClusterName, Box<Entry>>,
    indexes: Vec<FieldIndex>,
    subscribers: Vec<Arc<dyn Aware>>,
    next_id: u64,
    /// Instances stopped because another replica came to own them, while they may still be
    /// alive (their tasks, contexts or in-flight reconciles not dropped yet): what
    /// [`Engagements::release_unowned`] hands back to wait on.
    stopped: Vec<(ClusterName, Released)>,
    /// Whether the driver task runs (see [`converge`]).
    driving: bool,
}

struct Table {
    state: Mutex<State>,
    coordinator: OnceLock<Arc<dyn Coordinator>>,
    /// Permits to open a member's informers and wait for them to list: at most
    /// [`max_syncing`](Engagements::with_max_syncing) members at a time.
    syncing: tokio::sync::Semaphore,
    /// The limit `syncing` was set to.
    max_syncing: AtomicUsize,
    /// Signalled whenever the table changed (a member activated, failed, stopped): what
    /// [`Engagements::until_active`] and [`Engagements::add`] wait on.
    changed: tokio::sync::Notify,
    /// Wakes the driver: a retry was scheduled, a coordinator set, the table dropped. Shared
    /// with the driver, which holds no strong handle on the table while it waits.
    wake: Arc<tokio::sync::Notify>,
    /// How often every entry is converged again, whatever happened.
    resync: Mutex<Duration>,
}

impl Drop for Table {
    fn drop(&mut self) {
        // The driver ends.
        self.wake.notify_one();
    }
}

/// The per-caller settings of a handle: under which prefix its names live, and how its
/// members are brought up.
#[derive(Clone)]
struct View {
    prefix: Arc<str>,
    /// Sees every member, whoever added it (the manager's handle); otherwise only what was
    /// wanted through a view of the same prefix.
    everything: bool,
    /// How members wanted through it are built, probed, synced and retried.
    opts: Arc<MembersOptions>,
}

/// The members of a process, kept once. Cheap to clone (an `Arc` inside); every clone and
/// every [`prefixed`](Engagements::prefixed) handle reads and writes the same table.
///
/// The manager creates the table, [subscribes](Engagements::subscribe) its controllers and
/// runnables, sets the [`Coordinator`] when sharded, and hands the table to its provider when
/// it starts ([`ProviderRunnable::start`](crate::ProviderRunnable::start)). The provider says
/// what it wants under each name with [`want`](Engagements::want) (or
/// [`add`](Engagements::add), which also waits for the outcome) and
/// [`remove`](Engagements::remove)s what it no longer wants; the table does the rest (see the
/// module documentation). The manager's `Fleet`, the provider's
/// [`get`](crate::Provider::get) and a reconcile's cluster all read this table, so they agree at
/// every phase of a member's life.
///
/// Bringing a member up: its cache is started with a child token of the provider's token, it
/// is engaged with every subscriber (controllers open their informers), every registered
/// field index is applied, its informers are waited for (the
/// [sync timeout](MembersOptions::sync_timeout)) and it is activated. On a failure
/// its token is cancelled (no task keeps running) and it is tried again after its backoff. A
/// new instance replacing a running one (another server) keeps the running one serving until
/// it has synced; new credentials for the same server are renewed in place.
///
/// ```no_run
/// # async fn f(client: kube::Client) -> Result<(), mcr_core::Error> {
/// use mcr_core::{Cluster, Engagements};
/// use tokio_util::sync::CancellationToken;
///
/// let engagements = Engagements::new();
/// let token = CancellationToken::new();
/// engagements.add(&token, Cluster::new("member-1", client)).await?;
/// assert_eq!(engagements.names(), ["member-1"]);
/// engagements.remove(&"member-1".into());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Engagements {
    table: Arc<Table>,
    view: View,
}

impl Default for Engagements {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Engagements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engagements")
            .field("prefix", &&*self.view.prefix)
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

/// The default of [`MembersOptions::sync_timeout`]: 30 s.
pub(crate) const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// The default of [`Engagements::with_max_syncing`]: 64 members at a time.
pub(crate) const DEFAULT_MAX_SYNCING: usize = 64;

/// The default of [`Engagements::with_resync`]: every entry converged again each minute.
pub(crate) const DEFAULT_RESYNC: Duration = Duration::from_secs(60);

impl Engagements {
    /// An empty table, with no subscriber and no coordinator (this replica owns every
    /// cluster).
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().names().is_empty());
    /// ```
    pub fn new() -> Self {
        Engagements {
            table: Arc::new(Table {
                state: Mutex::new(State::default()),
                coordinator: OnceLock::new(),
                syncing: tokio::sync::Semaphore::new(DEFAULT_MAX_SYNCING),
                max_syncing: AtomicUsize::new(DEFAULT_MAX_SYNCING),
                changed: tokio::sync::Notify::new(),
                wake: Arc::new(tokio::sync::Notify::new()),
                resync: Mutex::new(DEFAULT_RESYNC),
            }),
            view: View {
                prefix: Arc::from(""),
                everything: true,
                opts: Arc::new(MembersOptions {
                    // Clusters handed over ready are not probed.
                    probe_timeout: None,
                    ..MembersOptions::default()
                }),
            },
        }
    }

    /// This handle, waiting at most `timeout` for a member's caches to sync
    /// ([`Error::SyncTimeout`]; default 30 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = mcr_core::Engagements::new().with_sync_timeout(Duration::from_secs(5));
    /// ```
    pub fn with_sync_timeout(mut self, timeout: Duration) -> Self {
        Arc::make_mut(&mut self.view.opts).sync_timeout = timeout;
        self
    }

    /// This handle, bringing members up with `opts` (client options, kubeconfig policy,
    /// timeouts, backoff): what a provider's [`Members`](crate::members::Members) hand the
    /// table.
    pub(crate) fn with_options(mut self, opts: Arc<MembersOptions>) -> Self {
        self.view.opts = opts;
        self
    }

    /// This table, on which at most `max` members open their informers and wait for them to
    /// list at a time (default 64; `0` counts as 1). The others wait their turn in
    /// [`MemberState::Pending`](crate::MemberState::Pending), in the order they came, and that wait does not count against the
    /// sync timeout: a provider that discovers 10,000 members at once then lists them a few
    /// dozen at a time instead of opening 10,000 sets of watches together. A replacement
    /// takes a turn too.
    ///
    /// The limit belongs to the table and holds for every handle on it; set it where the table
    /// is created (the manager's `ManagerBuilder::max_syncing`). Lowered while members sync,
    /// those finish their turn.
    ///
    /// ```
    /// let e = mcr_core::Engagements::new().with_max_syncing(16);
    /// # let _ = e;
    /// ```
    pub fn with_max_syncing(self, max: usize) -> Self {
        let max = max.max(1);
        let old = self.table.max_syncing.swap(max, Ordering::Relaxed);
        if max > old {
            self.table.syncing.add_permits(max - old);
        } else {
            // Only free permits are taken back: members syncing now finish their turn.
            self.table.syncing.forget_permits(old - max);
        }
        self
    }

    /// This table, converging every member again every `period` (default 60 s; at least
    /// 1 s), whatever happened meanwhile: the timer that repairs what an event could not.
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = mcr_core::Engagements::new().with_resync(Duration::from_secs(30));
    /// # let _ = e;
    /// ```
    pub fn with_resync(self, period: Duration) -> Self {
        *self.table.resync.lock() = period.max(Duration::from_secs(1));
        self.table.wake.notify_one();
        self
    }

    /// A handle on the same table whose names live under `prefix`: its `add("a")` engages
    /// `"{prefix}a"`, its `get("a")` and `names()` see only what was wanted through a handle
    /// of the same prefix, without the prefix. The multi provider hands one to each child
    /// provider, and every provider narrows the handle it is given with `prefixed("")`, so that
    /// what it lists and removes is only its own. Ownership is decided on the full name.
    ///
    /// ```
    /// let root = mcr_core::Engagements::new();
    /// let kind = root.prefixed("kind#");
    /// assert!(kind.names().is_empty());
    /// ```
    pub fn prefixed(&self, prefix: &str) -> Self {
        let mut view = self.view.clone();
        view.prefix = Arc::from(format!("{}{prefix}", self.view.prefix));
        view.everything = false;
        Engagements {
            table: self.table.clone(),
            view,
        }
    }

    /// Whether `other` is a handle on the same table.
    pub(crate) fn same_table(&self, other: &Engagements) -> bool {
        Arc::ptr_eq(&self.table, &other.table)
    }

    /// The full name of `name` in the table.
    fn full(&self, name: &ClusterName) -> ClusterName {
        if self.view.prefix.is_empty() {
            name.clone()
        } else {
            ClusterName::from(format!("{}{name}", self.view.prefix))
        }
    }

    /// `full` without this view's prefix, if it has it (the same name, shared, without a
    /// prefix: a copy would be one more allocation per member wherever it is kept).
    fn local(&self, full: &ClusterName) -> Option<ClusterName> {
        if self.view.prefix.is_empty() {
            return Some(full.clone());
        }
        full.as_str()
            .strip_prefix(&*self.view.prefix)
            .map(ClusterName::from)
    }

    /// Whether an entry wanted through `view` belongs to this handle.
    fn owns(&self, view: &View) -> bool {
        self.view.everything || (!view.everything && view.prefix == self.view.prefix)
    }

    /// Adds a subscriber: it is engaged with every member starting or active now, and with
    /// every member from here on (at the start of its bring-up, so that the informers it opens
    /// are waited for before the member is active). Its engagement of a member lasts until the
    /// member's token fires. A member whose bring-up began as the subscriber was added may be
    /// engaged with it twice, which [`Aware::engage`]'s contract makes a no-op.
    pub fn subscribe(&self, subscriber: Arc<dyn Aware>) {
        let engaged: Vec<(ClusterName, Cluster, CancellationToken)> = {
            let mut state = self.table.state.lock();
            state.subscribers.push(subscriber.clone());
            let mut engaged = Vec::new();
            for (n, e) in &state.entries {
                if let Some(r) = e.serving() {
                    engaged.push((n.clone(), r.cluster.clone(), r.token.clone()));
                }
                // An attempt that engaged its instance already: this subscriber too (one that
                // has not yet reads the subscribers, this one included, when it does).
                if let Some(a) = e.attempt()
                    && a.engaged
                    && let Some(c) = &a.started
                {
                    engaged.push((n.clone(), c.clone(), a.token.clone()));
                }
            }
            engaged
        };
        for (name, cluster, token) in engaged {
            if let Err(err) = subscriber.engage(token, name.clone(), cluster) {
                tracing::warn!(cluster = %name, error = %crate::ErrorChain(&err),
                    "a subscriber refused an engaged cluster");
            }
        }
    }

    /// Registers a field index: applied now to every active member and remembered for every
    /// future one (members coming up apply it before they activate). The same index again is
    /// a no-op; the same name on another type is [`Error::Index`].
    ///
    /// ```no_run
    /// # async fn f(e: mcr_core::Engagements) -> Result<(), mcr_core::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let idx = mcr_core::FieldIndex::new::<ConfigMap>("app", |cm| {
    ///     cm.metadata.labels.as_ref().and_then(|l| l.get("app").cloned()).into_iter().collect()
    /// });
    /// e.index_field(&idx).await?;
    /// # Ok(()) }
    /// ```
    pub async fn index_field(&self, index: &FieldIndex) -> Result<(), Error> {
        self.register_index(index)
    }

    /// [`index_field`](Engagements::index_field), without the `async`.
    pub(crate) fn register_index(&self, index: &FieldIndex) -> Result<(), Error> {
        let clusters: Vec<Cluster> = {
            let mut state = self.table.state.lock();
            match state.indexes.iter().find(|i| i.name() == index.name()) {
                Some(known) if known.tag() == index.tag() => {}
                Some(known) => {
                    return Err(Error::Index {
                        index: index.name().to_owned(),
                        reason: format!(
                            "already registered for {}, cannot register it for {}",
                            known.resource(),
                            index.resource()
                        ),
                    });
                }
                None => state.indexes.push(index.clone()),
            }
            state
                .entries
                .values()
                .filter_map(|e| e.serving().map(|r| r.cluster.clone()))
                .collect()
        };
        for cluster in &clusters {
            // The cache's errors name the cluster already.
            cluster.cache().index_field(index)?;
        }
        Ok(())
    }

    /// This handle's member options on `table`, narrowed with
    /// [`prefixed("")`](Engagements::prefixed): what a provider started with `table` keeps.
    /// The field indexes registered on this handle's table carry over.
    pub(crate) fn rebind(&self, table: &Engagements) -> Result<Engagements, Error> {
        let bound = table.prefixed("").with_options(self.view.opts.clone());
        if !self.same_table(table) {
            let indexes = self.table.state.lock().indexes.clone();
            for index in &indexes {
                bound.register_index(index)?;
            }
        }
        Ok(bound)
    }
}

/// Engaging by hand: a cluster whose cache is started already (a test, a cluster built
/// outside any provider) is recorded active and handed to every subscriber, without waiting
/// for sync. The same instance again is a no-op; a new instance of the same name replaces the
/// active one (whose token is not cancelled: its engager owns it). Its engagement lasts
/// until `token` fires.
///
/// Refused on a table with a [`Coordinator`] (a sharded manager): the table could not stop a
/// cluster it did not start when another replica comes to own it. Hand it over with
/// [`want`](Engagements::want) and [`Source::Cluster`] instead, which coordinates it like
/// every other member.
impl Aware for Engagements {
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), Error> {
        if let Some(reason) = name.member_name_error() {
            return Err(Error::InvalidName {
                cluster: name,
                reason,
            });
        }
        if !cluster.cache().is_started() {
            return Err(Error::Engage {
                cluster: name,
                source: "its cache is not started: add members with `Engagements::add` (which \
                         starts the cache and waits for it to sync), or start it first"
                    .into(),
            });
        }
        if self.coordinator().is_some() {
            return Err(Error::Engage {
                cluster: name,
                source: "engaging a cluster by hand is refused on a sharded manager (another \
                         replica may come to own it, and a cluster the table did not start \
                         cannot be handed over): want it with `Engagements::want` and \
                         `Source::Cluster`, which coordinates it like every other member"
                    .into(),
            });
        }
        let full = self.full(&name);
        if self.record(&token, &full, &cluster) {
            // Known by the engaged name in the cache's logs and errors, and its informers'.
            cluster.cache().engaged_as(&full);
            self.notify(&token, &full, &cluster);
        }
        Ok(())
    }
}
