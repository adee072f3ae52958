//! [`Engagements`]: the one table of engaged clusters, and the one place where a member's
//! lifecycle is implemented (start, index, engage, sync, activate; stop; park and bring back
//! under a [`Coordinator`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

mod engage;
mod lookup;
mod ownership;

use crate::coordinator::Coordinator;
use crate::{Aware, Cluster, ClusterName, Error, FieldIndex};

/// What [`Engagements::add_or_replace`] did.
///
/// ```
/// use mcr_core::AddOutcome;
/// assert_ne!(AddOutcome::Added, AddOutcome::Unchanged);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddOutcome {
    /// No cluster of that name was running; the new one was added.
    Added,
    /// A cluster of that name was running with a different connection; it was replaced.
    Replaced,
    /// A cluster of that name is running with the same connection hash; nothing was done.
    Unchanged,
}

/// Where a member is in its life, as [`Engagements::phase`] reports it.
///
/// ```
/// use mcr_core::Phase;
/// assert_ne!(Phase::Starting, Phase::Active);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Another replica owns it: kept (its cache not started) until this replica does.
    Parked,
    /// Being brought up: informers opening or listing. Not yet visible to
    /// [`get`](Engagements::get).
    Starting,
    /// Engaged and synced: [`get`](Engagements::get) returns it.
    Active,
}

/// One engaged (or starting) instance.
struct Instance {
    cluster: Cluster,
    token: CancellationToken,
    /// Tells this instance from a later one of the same name (the token's watcher removes
    /// only its own).
    generation: u64,
    /// The prefix of the narrowed view that added it (`None`: the manager's own handle).
    origin: Option<Arc<str>>,
}

/// A cluster another replica owns, kept until this replica owns it.
struct Parked {
    parent: CancellationToken,
    cluster: Cluster,
    /// The handle that added it, to add it again.
    view: View,
}

impl Parked {
    fn origin(&self) -> Option<Arc<str>> {
        (!self.view.everything).then(|| self.view.prefix.clone())
    }
}

/// The table's state, under one lock: a name is in at most one phase, except that a
/// replacement is `starting` while the instance it replaces is still `active`.
#[derive(Default)]
struct State {
    active: HashMap<ClusterName, Instance>,
    starting: HashMap<ClusterName, Instance>,
    parked: HashMap<ClusterName, Parked>,
    /// The parent token each member was added under, and the handle settings it was added
    /// with, to park it and bring it back after a release.
    parents: HashMap<ClusterName, (CancellationToken, View)>,
    indexes: Vec<FieldIndex>,
    subscribers: Vec<Arc<dyn Aware>>,
    next_generation: u64,
    /// Whether a task follows the coordinator's changes.
    following: bool,
    /// The instances stopped because another replica came to own them, while they may still
    /// be alive (their tasks, contexts or in-flight reconciles not dropped yet): what
    /// [`Engagements::release_unowned`] hands back to wait on.
    stopped: Vec<(ClusterName, crate::Released)>,
}

struct Table {
    state: Mutex<State>,
    coordinator: OnceLock<Arc<dyn Coordinator>>,
    /// Permits to open a member's informers and wait for them to list: at most
    /// [`max_syncing`](Engagements::with_max_syncing) members at a time.
    syncing: tokio::sync::Semaphore,
    /// The limit `syncing` was set to.
    max_syncing: AtomicUsize,
    /// Signalled whenever a member becomes active: what [`Engagements::until_active`] waits on.
    activated: tokio::sync::Notify,
}

/// What a view does with a cluster another replica owns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Gate {
    /// Park it and engage it when this replica owns it (callers that hand over ready
    /// clusters).
    #[default]
    Park,
    /// Refuse it with [`Error::NotOwned`]: the caller ([`Workers`](crate::members::Workers))
    /// builds it again when this replica owns it, so a non-owned member costs no client.
    Refuse,
}

/// The per-caller settings of a handle: under which prefix its names live, how long it waits
/// for a member to sync, and what happens to a cluster another replica owns.
#[derive(Clone)]
struct View {
    prefix: Arc<str>,
    /// Sees every member, whoever added it (the manager's handle); otherwise only what was
    /// added through a view of the same prefix.
    everything: bool,
    sync_timeout: Duration,
    gate: Gate,
}

/// The engaged clusters of a process, kept once. Cheap to clone (an `Arc` inside); every
/// clone and every [`prefixed`](Engagements::prefixed) handle reads and writes the same table.
///
/// The manager creates the table, [subscribes](Engagements::subscribe) its controllers and
/// runnables, sets the [`Coordinator`] when sharded, and hands the table to its provider when
/// it starts ([`ProviderRunnable::start`](crate::ProviderRunnable::start)). The provider brings
/// members in with [`add`](Engagements::add) or [`add_or_replace`](Engagements::add_or_replace)
/// and out with [`remove`](Engagements::remove); the manager's `Fleet`, the provider's
/// [`get`](crate::Provider::get) and a reconcile's cluster all read this table, so they agree
/// at every phase of a member's life.
///
/// [`add`](Engagements::add) starts the member's cache with a child token of the provider's
/// token, engages it with every subscriber (controllers open their informers), applies every
/// registered field index, waits for the caches to sync and activates it. On any failure it
/// cancels the child token (no task keeps running), forgets the member and returns an error
/// naming it. A member whose token is cancelled (removed, or the provider stopped) is
/// forgotten automatically.
///
/// A [`Cluster`] instance is added at most once in its life: its cache is bound to the first
/// token. To re-add a removed cluster, build a new instance.
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

/// The default of [`Engagements::with_sync_timeout`]: 30 s.
pub(crate) const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// The default of [`Engagements::with_max_syncing`]: 64 members at a time.
pub(crate) const DEFAULT_MAX_SYNCING: usize = 64;

impl Engagements {
    /// An empty table, with no subscriber and no coordinator (this replica owns every
    /// cluster).
    ///
    /// ```
    /// assert!(mcr_core::Engagements::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Engagements {
            table: Arc::new(Table {
                state: Mutex::new(State::default()),
                coordinator: OnceLock::new(),
                syncing: tokio::sync::Semaphore::new(DEFAULT_MAX_SYNCING),
                max_syncing: AtomicUsize::new(DEFAULT_MAX_SYNCING),
                activated: tokio::sync::Notify::new(),
            }),
            view: View {
                prefix: Arc::from(""),
                everything: true,
                sync_timeout: DEFAULT_SYNC_TIMEOUT,
                gate: Gate::Park,
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
        self.view.sync_timeout = timeout;
        self
    }

    /// This table, on which at most `max` members open their informers and wait for them to
    /// list at a time (default 64; `0` counts as 1). The others wait their
    /// turn in [`Phase::Starting`], in the order they came, and that wait does not count
    /// against the [sync timeout](Engagements::with_sync_timeout): a provider that discovers
    /// 10,000 members at once then lists them a few dozen at a time instead of opening
    /// 10,000 sets of watches together, which on a loaded machine made every one of them miss
    /// its sync timeout. A replacement (new credentials) takes a turn too.
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

    /// A handle on the same table whose names live under `prefix`: its `add("a")` engages
    /// `"{prefix}a"`, its `get("a")` and `names()` see only what was added through a handle of
    /// the same prefix, without the prefix. The multi provider hands one to each child
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

    /// This handle, refusing a cluster another replica owns with [`Error::NotOwned`] instead of
    /// parking it: the caller builds it again once this replica owns it (see
    /// [`owner`](Engagements::owner) and [`ownership_changes`](Engagements::ownership_changes)).
    pub(crate) fn refusing(mut self) -> Self {
        self.view.gate = Gate::Refuse;
        self
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

    /// `full` without this view's prefix, if it has it.
    fn local(&self, full: &ClusterName) -> Option<ClusterName> {
        full.as_str()
            .strip_prefix(&*self.view.prefix)
            .map(ClusterName::from)
    }

    /// Whether an instance added with `origin` belongs to this view.
    fn owns(&self, origin: Option<&Arc<str>>) -> bool {
        self.view.everything || origin.is_some_and(|o| *o == self.view.prefix)
    }

    /// The origin recorded for what this view adds or engages.
    fn origin(&self) -> Option<Arc<str>> {
        (!self.view.everything).then(|| self.view.prefix.clone())
    }

    /// Adds a subscriber: it is engaged with every member starting or active now, and with
    /// every member from here on (at the start of its bring-up, so that the informers it opens
    /// are waited for before the member is active). Its engagement of a member lasts until the
    /// member's token fires. A member whose bring-up began as the subscriber was added may be
    /// engaged with it twice, which [`Aware::engage`]'s contract makes a no-op.
    pub fn subscribe(&self, subscriber: Arc<dyn Aware>) {
        let active: Vec<(ClusterName, Cluster, CancellationToken)> = {
            let mut state = self.table.state.lock();
            state.subscribers.push(subscriber.clone());
            state
                .active
                .iter()
                .chain(state.starting.iter())
                .filter(|(_, i)| !i.token.is_cancelled())
                .map(|(n, i)| (n.clone(), i.cluster.clone(), i.token.clone()))
                .collect()
        };
        for (name, cluster, token) in active {
            if let Err(err) = subscriber.engage(token, name.clone(), cluster) {
                tracing::warn!(cluster = %name, error = %crate::ErrorChain(&err),
                    "a subscriber refused an engaged cluster");
            }
        }
    }

    /// Registers a field index: applied now to every starting and active member and
    /// remembered for every future one. The same index again is a no-op; the same name on
    /// another type is [`Error::Index`].
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
            let starting = state.starting.values().map(|i| i.cluster.clone());
            let active = state.active.values().map(|i| i.cluster.clone());
            starting.chain(active).collect()
        };
        for cluster in &clusters {
            // The cache's errors name the cluster already.
            cluster.cache().index_field(index)?;
        }
        Ok(())
    }

    /// This handle's settings (sync timeout, gate) on `table`, narrowed with
    /// [`prefixed("")`](Engagements::prefixed): what a provider started with `table` keeps.
    /// The field indexes registered on this handle's table carry over.
    pub(crate) fn rebind(&self, table: &Engagements) -> Result<Engagements, Error> {
        let mut bound = table.prefixed("");
        bound.view.sync_timeout = self.view.sync_timeout;
        bound.view.gate = self.view.gate;
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
/// outside any provider) is admitted, recorded active and handed to every subscriber, without
/// waiting for sync. The same instance again is a no-op; a new instance of the same name
/// replaces the active one (whose token is not cancelled: its engager owns it).
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
        let full = self.full(&name);
        let recorded = self.record(&token, &full, &cluster, self.origin())?;
        if recorded {
            // Known by the engaged name in the cache's logs and errors, and its informers'.
            cluster.cache().engaged_as(&full);
            self.notify(&token, &full, &cluster);
        }
        Ok(())
    }
}
