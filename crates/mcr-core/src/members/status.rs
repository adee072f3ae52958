//! [`StatusBook`]: what a provider made of each object of its source of truth.

use std::collections::BTreeMap;

use parking_lot::{Mutex, MutexGuard};

use super::Members;
use crate::{ClusterId, ClusterName, MemberState};

/// A provider's status per source object (a Secret, a file, a `Cluster`), for its `status` and
/// `statuses` accessors.
///
/// ```
/// use mcr_core::members::StatusBook;
/// let book: StatusBook<String, &str> = StatusBook::default();
/// book.lock().insert("fleet/a".into(), "engaged");
/// assert_eq!(book.lock().get("fleet/a"), Some(&"engaged"));
/// assert_eq!(book.lock().len(), 1);
/// ```
#[derive(Debug)]
pub struct StatusBook<K, V> {
    map: Mutex<BTreeMap<K, V>>,
}

impl<K, V> Default for StatusBook<K, V> {
    fn default() -> Self {
        StatusBook {
            map: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<K: Ord + Clone, V: Clone> StatusBook<K, V> {
    /// The status of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        self.lock().get(key).cloned()
    }

    /// Every status.
    pub(crate) fn all(&self) -> BTreeMap<K, V> {
        self.lock().clone()
    }

    /// The map, locked (to check a condition and write under one lock).
    pub fn lock(&self) -> MutexGuard<'_, BTreeMap<K, V>> {
        self.map.lock()
    }
}

/// What a provider reading its source of truth from a host cluster shares between its handle,
/// its dispatcher and its [`Workers`](super::Workers): the host client, the provider's
/// options `O`, its [`Members`] and its [`StatusBook`] of `V` per source object `K`.
///
/// ```
/// # async fn f() -> Result<(), kube::Error> {
/// use mcr_core::members::{Members, ProviderShared};
/// let host = kube::Client::try_default().await?;
/// let shared: ProviderShared<(), String, &str> =
///     ProviderShared::new(host, (), Members::new(Default::default()));
/// assert!(shared.statuses.lock().is_empty());
/// # Ok(()) }
/// ```
pub struct ProviderShared<O, K, V> {
    /// The host cluster's client (where the source of truth lives).
    pub host: kube::Client,
    /// The provider's options.
    pub opts: O,
    /// The provider's members.
    pub members: Members,
    /// The provider's status per source object.
    pub statuses: StatusBook<K, V>,
}

impl<O, K, V> ProviderShared<O, K, V> {
    /// The shared state of a provider with no statuses yet.
    pub fn new(host: kube::Client, opts: O, members: Members) -> Self {
        ProviderShared {
            host,
            opts,
            members,
            statuses: StatusBook::default(),
        }
    }
}

impl<O: std::fmt::Debug, K, V> std::fmt::Debug for ProviderShared<O, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderShared")
            .field("opts", &self.opts)
            .field("members", &self.members)
            .finish_non_exhaustive()
    }
}

/// A per-object status that follows a member: the dispatcher records what it decided about
/// the object (wanted under a name, in conflict, refused, ...), and where the member it wants
/// stands is read from the table when the status is read, never copied
/// ([`track`](Tracked::track)).
///
/// ```
/// use mcr_core::members::{Members, Tracked};
/// use mcr_core::{ClusterId, MemberState};
///
/// #[derive(Clone, Debug, PartialEq)]
/// enum Status { Wanted(String), Engaged(ClusterId), Failed(String), Ignored }
///
/// impl Tracked for Status {
///     fn track(self, members: &Members) -> Self {
///         let Status::Wanted(name) = &self else { return self };
///         match members.member(&name.as_str().into()) {
///             Some((MemberState::Engaged, Some(id))) => Status::Engaged(id),
///             Some((MemberState::Failed { reason, .. }, _)) => Status::Failed(reason),
///             _ => self,
///         }
///     }
/// }
/// let members = Members::new(Default::default());
/// assert_eq!(Status::Ignored.track(&members), Status::Ignored);
/// ```
pub trait Tracked: Clone {
    /// This status with the state of the member it follows read from `members` (a status
    /// that follows none is returned as it is).
    fn track(self, members: &Members) -> Self;
}

impl Members {
    /// Where the member `name` stands and the id of its engaged instance, if this provider
    /// wants it: what a [`Tracked`] status reads.
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// assert!(members.member(&"a".into()).is_none());
    /// ```
    pub fn member(&self, name: &ClusterName) -> Option<(MemberState, Option<ClusterId>)> {
        let engagements = self.engagements();
        let state = engagements.member_state(name)?;
        let id = engagements.get(name).ok().map(|c| c.id());
        Some((state, id))
    }
}

/// A provider whose state is a [`ProviderShared`] of options `O` and a status `V` per source
/// object `K`: implementing [`shared`](Self::shared) gives its accessors — the options it runs
/// with, the names of its engaged members and what it made of each object of its source of
/// truth. The providers re-export it; bring it into scope to call them.
///
/// ```
/// use std::sync::Arc;
/// use mcr_core::members::{Members, ProviderShared, StatusProvider, Tracked};
///
/// /// What the provider made of a Secret (follows no member here).
/// #[derive(Clone, Debug, PartialEq)]
/// struct Seen(&'static str);
/// impl Tracked for Seen {
///     fn track(self, _: &Members) -> Self { self }
/// }
///
/// type Shared = ProviderShared<(), String, Seen>;
///
/// /// Statuses by Secret name.
/// struct SecretsProvider { shared: Arc<Shared> }
/// impl StatusProvider<(), String, Seen> for SecretsProvider {
///     fn shared(&self) -> &Shared { &self.shared }
/// }
///
/// # async fn f() -> Result<(), kube::Error> {
/// let host = kube::Client::try_default().await?;
/// let shared = ProviderShared::new(host, (), Members::new(Default::default()));
/// shared.statuses.lock().insert("fleet/a".into(), Seen("engaged"));
/// let provider = SecretsProvider { shared: Arc::new(shared) };
/// assert_eq!(provider.status(&"fleet/a".to_string()), Some(Seen("engaged")));
/// assert!(provider.names().is_empty());
/// # Ok(()) }
/// ```
pub trait StatusProvider<O: 'static, K: Ord + Clone + 'static, V: Tracked + 'static> {
    /// The provider's shared state.
    fn shared(&self) -> &ProviderShared<O, K, V>;

    /// The options the provider runs with.
    fn options(&self) -> &O {
        &self.shared().opts
    }

    /// Names of the currently engaged clusters, sorted.
    fn names(&self) -> Vec<ClusterName> {
        self.shared().members.engagements().names()
    }

    /// What the provider made of one object of its source of truth (engaged, pending, failed
    /// and retrying, refused, ...); `None` for objects it does not watch or that are gone.
    fn status(&self, key: &K) -> Option<V> {
        let shared = self.shared();
        shared.statuses.get(key).map(|v| v.track(&shared.members))
    }

    /// The status of every object it watches.
    fn statuses(&self) -> BTreeMap<K, V> {
        let shared = self.shared();
        shared
            .statuses
            .all()
            .into_iter()
            .map(|(k, v)| (k, v.track(&shared.members)))
            .collect()
    }
}
