//! [`StatusBook`]: what a provider made of each object of its source of truth.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// A provider's status per source object (a Secret, a file, a `Cluster`), for its `status` and
/// `statuses` accessors. Locks recover from poisoning (each operation keeps the map
/// consistent).
///
/// ```
/// use mcr_core::members::StatusBook;
/// let book: StatusBook<String, &str> = StatusBook::default();
/// book.lock().insert("fleet/a".into(), "engaged");
/// assert_eq!(book.get(&"fleet/a".to_string()), Some("engaged"));
/// assert_eq!(book.all().len(), 1);
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
    pub fn get(&self, key: &K) -> Option<V> {
        self.lock().get(key).cloned()
    }

    /// Every status.
    pub fn all(&self) -> BTreeMap<K, V> {
        self.lock().clone()
    }

    /// The map, locked (to check a condition and write under one lock).
    pub fn lock(&self) -> MutexGuard<'_, BTreeMap<K, V>> {
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
