//! [`StatusBook`]: what a provider made of each object of its source of truth.

use std::collections::BTreeMap;

use parking_lot::{Mutex, MutexGuard};

use super::Members;
use crate::ClusterName;

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

    /// Records `value` for `key` when `still` holds, checked under the lock (e.g. "the member
    /// still belongs to this object": a status written after ownership moved would overwrite
    /// the new owner's). Whether it was recorded.
    ///
    /// ```
    /// let book: mcr_core::members::StatusBook<&str, u32> = Default::default();
    /// assert!(book.insert_if("a", 1, || true));
    /// assert!(!book.insert_if("a", 2, || false));
    /// assert_eq!(book.lock().get("a"), Some(&1));
    /// ```
    pub fn insert_if(&self, key: K, value: V, still: impl FnOnce() -> bool) -> bool {
        let mut map = self.lock();
        let insert = still();
        if insert {
            map.insert(key, value);
        }
        insert
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

/// A provider whose state is a [`ProviderShared`] of options `O` and a status `V` per source
/// object `K`: implementing [`shared`](Self::shared) gives its accessors — the options it runs
/// with, the names of its engaged members and what it made of each object of its source of
/// truth. The providers re-export it; bring it into scope to call them.
///
/// ```
/// use std::sync::Arc;
/// use mcr_core::members::{Members, ProviderShared, StatusProvider};
///
/// type Shared = ProviderShared<(), String, &'static str>;
///
/// /// Statuses by Secret name.
/// struct SecretsProvider { shared: Arc<Shared> }
/// impl StatusProvider<(), String, &'static str> for SecretsProvider {
///     fn shared(&self) -> &Shared { &self.shared }
/// }
///
/// # async fn f() -> Result<(), kube::Error> {
/// let host = kube::Client::try_default().await?;
/// let shared = ProviderShared::new(host, (), Members::new(Default::default()));
/// shared.statuses.lock().insert("fleet/a".into(), "engaged");
/// let provider = SecretsProvider { shared: Arc::new(shared) };
/// assert_eq!(provider.status(&"fleet/a".to_string()), Some("engaged"));
/// assert!(provider.names().is_empty());
/// # Ok(()) }
/// ```
pub trait StatusProvider<O: 'static, K: Ord + Clone + 'static, V: Clone + 'static> {
    /// The provider's shared state.
    fn shared(&self) -> &ProviderShared<O, K, V>;

    /// The options the provider runs with.
    fn options(&self) -> &O {
        &self.shared().opts
    }

    /// Names of the currently engaged clusters, sorted.
    fn names(&self) -> Vec<ClusterName> {
        self.shared().members.names()
    }

    /// What the provider made of one object of its source of truth (engaged, pending, failed
    /// and retrying, refused, ...); `None` for objects it does not watch or that are gone.
    fn status(&self, key: &K) -> Option<V> {
        self.shared().statuses.get(key)
    }

    /// The status of every object it watches.
    fn statuses(&self) -> BTreeMap<K, V> {
        self.shared().statuses.all()
    }
}
