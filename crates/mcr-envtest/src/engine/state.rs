//! The shared state of one cluster: objects, indexes, the event history and the wake-up channels.
//!
//! Every write goes through [`Store::put`] or [`Store::remove`], which bump the global
//! resourceVersion, keep the indexes right and append exactly one [`Change`] to the history.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use serde_json::Value;

use super::meta::{meta_mut, namespace_of, owner_uids, uid_of};
use super::packed::{pack, unpacked_arc};
use super::registry::Registry;
use super::{WatchEvent, WatchEventType};

/// Storage key of a resource (`plural.group`), shared by all its versions.
pub(crate) type ResKey = Arc<str>;
/// Key of an object within its resource: (namespace or `""`, name). Sorts as lists must.
pub(crate) type ObjKey = (String, String);

/// How many events the history keeps before older ones are compacted.
pub(crate) const MAX_HISTORY: usize = 10_000;

/// One entry of the history: a single write at a single resourceVersion.
#[derive(Debug)]
pub(crate) struct Change {
    /// The resourceVersion of this write.
    pub rv: u64,
    /// The resource written.
    pub res: ResKey,
    /// Namespace of the object (`""` when cluster-scoped).
    pub namespace: String,
    /// The object before the write (`None` on create).
    pub old: Option<Arc<Value>>,
    /// The object after the write (`None` on delete).
    pub new: Option<Arc<Value>>,
    /// The event every unfiltered watcher receives.
    pub event: WatchEvent,
}

/// Objects, indexes and history of one cluster. Guarded by [`State::store`].
#[derive(Debug, Default)]
pub(crate) struct Store {
    /// The current (last written) resourceVersion.
    pub rv: u64,
    /// Events with an rv at or below this are gone: watching or reading from them gives 410.
    pub compacted: u64,
    /// Served types.
    pub registry: Registry,
    /// Objects by resource, then (namespace, name).
    pub objects: HashMap<ResKey, BTreeMap<ObjKey, Arc<Value>>>,
    /// Recent writes, oldest first, rv strictly increasing.
    pub history: VecDeque<Change>,
    /// uid -> where the object lives.
    pub uids: HashMap<String, (ResKey, ObjKey)>,
    /// owner uid -> dependents naming it in `ownerReferences`.
    pub dependents: HashMap<String, HashSet<(ResKey, ObjKey)>>,
    /// namespace -> number of namespaced objects in it.
    pub ns_counts: HashMap<String, usize>,
    /// Objects of the kinds kube-apiserver writes again on their first no-op write (see
    /// `update::STORED_AGAIN`) that have not been written since their create.
    pub untouched: HashSet<(ResKey, ObjKey)>,
}

impl Store {
    /// The stored object as it was written (`managedFields` unpacked), if any.
    pub(crate) fn get(&self, res: &str, key: &ObjKey) -> Option<Arc<Value>> {
        self.peek(res, key).map(unpacked_arc)
    }

    /// The stored object as the store keeps it, with `managedFields` packed (see `packed`):
    /// for reads of anything else, and for answers made with `registry::present`.
    pub(crate) fn peek(&self, res: &str, key: &ObjKey) -> Option<&Arc<Value>> {
        self.objects.get(res)?.get(key)
    }

    /// Creates or replaces an object: stamps a new resourceVersion, records the change.
    /// Returns the object as stored (`managedFields` packed).
    pub(crate) fn put(&mut self, res: &ResKey, mut obj: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        meta_mut(&mut obj).insert("resourceVersion".into(), Value::String(rv.to_string()));
        pack(&mut obj);
        let key = key_of(&obj);
        let new = Arc::new(obj);
        let old = self
            .objects
            .entry(res.clone())
            .or_default()
            .insert(key.clone(), new.clone());
        if let Some(old) = &old {
            self.unindex(res, &key, old);
            if !self.untouched.is_empty() {
                self.untouched.remove(&(res.clone(), key.clone()));
            }
        } else if !key.0.is_empty() {
            *self.ns_counts.entry(key.0.clone()).or_default() += 1;
        }
        self.index(res, &key, &new);
        let kind = if old.is_some() {
            WatchEventType::Modified
        } else {
            WatchEventType::Added
        };
        let event = WatchEvent::new(kind, new.clone());
        self.record(Change {
            rv,
            res: res.clone(),
            namespace: key.0,
            old,
            new: Some(new.clone()),
            event,
        });
        new
    }

    /// Removes an object; returns its last state stamped with the deletion's resourceVersion.
    pub(crate) fn remove(&mut self, res: &ResKey, key: &ObjKey) -> Option<Arc<Value>> {
        let old = self.objects.get_mut(res)?.remove(key)?;
        if !self.untouched.is_empty() {
            self.untouched.remove(&(res.clone(), key.clone()));
        }
        self.rv += 1;
        let rv = self.rv;
        self.unindex(res, key, &old);
        if !key.0.is_empty()
            && let Some(count) = self.ns_counts.get_mut(&key.0)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.ns_counts.remove(&key.0);
            }
        }
        let mut last = (*old).clone();
        meta_mut(&mut last).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let last = Arc::new(last);
        let event = WatchEvent::new(WatchEventType::Deleted, last.clone());
        self.record(Change {
            rv,
            res: res.clone(),
            namespace: key.0.clone(),
            old: Some(old),
            new: None,
            event,
        });
        Some(last)
    }

    fn index(&mut self, res: &ResKey, key: &ObjKey, obj: &Value) {
        let uid = uid_of(obj);
        if !uid.is_empty() {
            self.uids
                .insert(uid.to_string(), (res.clone(), key.clone()));
        }
        for owner in owner_uids(obj) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert((res.clone(), key.clone()));
        }
    }

    fn unindex(&mut self, res: &ResKey, key: &ObjKey, obj: &Value) {
        let uid = uid_of(obj);
        if !uid.is_empty() {
            self.uids.remove(uid);
        }
        for owner in owner_uids(obj) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(&(res.clone(), key.clone()));
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
    }

    fn record(&mut self, change: Change) {
        self.history.push_back(change);
        while self.history.len() > MAX_HISTORY {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
    }

    /// Forgets all history up to now.
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    /// The history entries written after `rv` (oldest first).
    pub(crate) fn changes_after(&self, rv: u64) -> impl Iterator<Item = &Change> {
        let start = self.history.partition_point(|c| c.rv <= rv);
        self.history.range(start..)
    }

    /// The objects of `res` (in `namespace`, if given) as they were at resourceVersion `at`
    /// (at or before now), rebuilt by undoing later history; `None` if `at` was compacted.
    pub(crate) fn snapshot(
        &self,
        res: &str,
        namespace: Option<&str>,
        at: u64,
    ) -> Option<BTreeMap<ObjKey, Arc<Value>>> {
        let mut out: BTreeMap<ObjKey, Arc<Value>> = match self.objects.get(res) {
            Some(all) => match namespace {
                Some(ns) => all
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                None => all.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            },
            None => BTreeMap::new(),
        };
        if at >= self.rv {
            return Some(out);
        }
        if at < self.compacted {
            return None;
        }
        for change in self.history.iter().rev().take_while(|c| c.rv > at) {
            if &*change.res != res || namespace.is_some_and(|ns| ns != change.namespace) {
                continue;
            }
            let Some(any) = change.new.as_deref().or(change.old.as_deref()) else {
                continue;
            };
            let key = key_of(any);
            match &change.old {
                Some(old) => out.insert(key, old.clone()),
                None => out.remove(&key),
            };
        }
        Some(out)
    }
}

/// The (namespace, name) key of an object.
pub(crate) fn key_of(obj: &Value) -> ObjKey {
    (
        namespace_of(obj).to_string(),
        super::meta::name_of(obj).to_string(),
    )
}

/// A cluster's state plus the channels that wake watchers.
#[derive(Debug)]
pub(crate) struct State {
    /// Objects, indexes, history.
    pub store: RwLock<Store>,
    /// Carries the latest resourceVersion; every write notifies it.
    pub notify: tokio::sync::watch::Sender<u64>,
    /// Bumped by `Engine::shutdown`: every open watch ends.
    pub shutdown: tokio::sync::watch::Sender<u64>,
    /// Which bootstrap sets have been written (see `bootstrap`); set under the write lock.
    pub seeded: std::sync::atomic::AtomicU32,
}

impl State {
    /// A state with the given registry and no objects.
    pub(crate) fn new(registry: Registry) -> Self {
        Self {
            store: RwLock::new(Store {
                registry,
                ..Store::default()
            }),
            notify: tokio::sync::watch::Sender::new(0),
            shutdown: tokio::sync::watch::Sender::new(0),
            seeded: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Read access.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Store> {
        self.store.read()
    }

    /// Write access.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Store> {
        self.store.write()
    }

    /// Wakes every watcher after a write (call with the lock released).
    pub(crate) fn wake(&self, rv: u64) {
        self.notify.send_if_modified(|current| {
            if *current == rv {
                false
            } else {
                *current = rv;
                true
            }
        });
    }
}
