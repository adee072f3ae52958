//! The field index state of one informer, kept consistent through relists.
//!
//! kube-runtime stores have no secondary indexes, so each informer keeps its own. Live events
//! (`Apply`/`Delete`) update the live index; a relist (`Init`, `InitApply`*, `InitDone`) builds a
//! fresh index in a buffer that replaces the live one at `InitDone`, exactly when the reflector
//! store swaps its own buffer in. An index registered in the middle of a relist cannot have seen
//! the objects listed so far, so it is rebuilt from the store at `InitDone` instead.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use kube::{Resource, runtime::reflector::Store};

/// Computes the index values of an object.
pub(crate) type Extractor<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// `(namespace, name)` of an object: small, independent of the dynamic type.
pub(crate) type ObjKey = (Option<String>, String);

pub(crate) fn obj_key<K: Resource>(obj: &K) -> ObjKey {
    let meta = obj.meta();
    (
        meta.namespace.clone(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// value -> objects, and object -> values (to remove an object's old values in O(values)).
#[derive(Default)]
struct IndexMap {
    by_value: HashMap<String, HashSet<ObjKey>>,
    by_obj: HashMap<ObjKey, Vec<String>>,
}

impl IndexMap {
    fn insert(&mut self, key: ObjKey, mut values: Vec<String>) {
        self.remove(&key);
        if values.is_empty() {
            return;
        }
        values.sort_unstable();
        values.dedup();
        for v in &values {
            self.by_value
                .entry(v.clone())
                .or_default()
                .insert(key.clone());
        }
        self.by_obj.insert(key, values);
    }

    fn remove(&mut self, key: &ObjKey) {
        let Some(values) = self.by_obj.remove(key) else {
            return;
        };
        for v in values {
            if let Some(set) = self.by_value.get_mut(&v) {
                set.remove(key);
                if set.is_empty() {
                    self.by_value.remove(&v);
                }
            }
        }
    }

    fn build<K: Resource>(extract: &Extractor<K>, objects: &[Arc<K>]) -> Self {
        let mut map = IndexMap::default();
        for obj in objects {
            map.insert(obj_key(&**obj), extract(obj));
        }
        map
    }
}

enum Pending {
    /// No relist in progress.
    Idle,
    /// Relist in progress: the index being built from `InitApply` events.
    Building(IndexMap),
    /// Registered during a relist: rebuild from the store at `InitDone`.
    Rebuild,
}

struct Index<K> {
    extract: Extractor<K>,
    live: IndexMap,
    pending: Pending,
}

/// All field indexes of one informer.
pub(crate) struct IndexSet<K> {
    relisting: bool,
    /// A `BTreeMap`: half the bytes of an empty `HashMap`, in every informer (most have no
    /// index).
    indexes: BTreeMap<String, Index<K>>,
}

impl<K> Default for IndexSet<K> {
    fn default() -> Self {
        Self {
            relisting: false,
            indexes: BTreeMap::new(),
        }
    }
}

impl<K> IndexSet<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    /// Adds an index built from the store's current content. False if the name exists (no-op).
    pub(crate) fn add(&mut self, name: &str, extract: Extractor<K>, store: &Store<K>) -> bool {
        if self.indexes.contains_key(name) {
            return false;
        }
        let live = IndexMap::build(&extract, &store.state());
        let pending = if self.relisting {
            Pending::Rebuild
        } else {
            Pending::Idle
        };
        self.indexes.insert(
            name.to_owned(),
            Index {
                extract,
                live,
                pending,
            },
        );
        true
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.indexes.is_empty()
    }

    pub(crate) fn apply(&mut self, obj: &K) {
        for index in self.indexes.values_mut() {
            index.live.insert(obj_key(obj), (index.extract)(obj));
        }
    }

    pub(crate) fn delete(&mut self, obj: &K) {
        let key = obj_key(obj);
        for index in self.indexes.values_mut() {
            index.live.remove(&key);
        }
    }

    pub(crate) fn init(&mut self) {
        self.relisting = true;
        for index in self.indexes.values_mut() {
            index.pending = Pending::Building(IndexMap::default());
        }
    }

    pub(crate) fn init_apply(&mut self, obj: &K) {
        for index in self.indexes.values_mut() {
            if let Pending::Building(map) = &mut index.pending {
                map.insert(obj_key(obj), (index.extract)(obj));
            }
        }
    }

    /// Swaps the buffers in. Call right after the store swapped its own buffer in.
    pub(crate) fn init_done(&mut self, store: &Store<K>) {
        self.relisting = false;
        let mut current: Option<Vec<Arc<K>>> = None;
        for index in self.indexes.values_mut() {
            match std::mem::replace(&mut index.pending, Pending::Idle) {
                Pending::Building(map) => index.live = map,
                Pending::Rebuild => {
                    let objects = current.get_or_insert_with(|| store.state());
                    index.live = IndexMap::build(&index.extract, objects);
                }
                // `InitDone` without `Init` never happens; keep the live index.
                Pending::Idle => {}
            }
        }
    }

    /// The keys indexed under `value` (sorted) and the extractor, or `None` if no such index.
    pub(crate) fn lookup(&self, name: &str, value: &str) -> Option<(Vec<ObjKey>, Extractor<K>)> {
        let index = self.indexes.get(name)?;
        let mut keys: Vec<ObjKey> = index
            .live
            .by_value
            .get(value)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        keys.sort_unstable();
        Some((keys, index.extract.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{api::ObjectMeta, runtime::reflector::store, runtime::watcher::Event};

    fn cm(name: &str, app: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn by_app() -> Extractor<ConfigMap> {
        Arc::new(|cm: &ConfigMap| {
            cm.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app").cloned())
                .into_iter()
                .collect()
        })
    }

    fn names(set: &IndexSet<ConfigMap>, value: &str) -> Vec<String> {
        set.lookup("app", value)
            .unwrap()
            .0
            .into_iter()
            .map(|k| k.1)
            .collect()
    }

    #[test]
    fn live_events_update_the_index() {
        let (reader, _writer) = store::<ConfigMap>();
        let mut set = IndexSet::default();
        assert!(set.add("app", by_app(), &reader));
        set.apply(&cm("a", "x"));
        set.apply(&cm("b", "x"));
        assert_eq!(names(&set, "x"), ["a", "b"]);
        set.apply(&cm("a", "y"));
        assert_eq!(names(&set, "x"), ["b"]);
        assert_eq!(names(&set, "y"), ["a"]);
        set.delete(&cm("b", "x"));
        assert!(names(&set, "x").is_empty());
        assert!(set.lookup("nope", "x").is_none());
    }

    #[test]
    fn second_add_of_same_name_is_a_noop() {
        let (reader, _writer) = store::<ConfigMap>();
        let mut set = IndexSet::default();
        assert!(set.add("app", by_app(), &reader));
        set.apply(&cm("a", "x"));
        assert!(!set.add("app", Arc::new(|_: &ConfigMap| vec!["z".into()]), &reader));
        assert_eq!(names(&set, "x"), ["a"]);
        assert!(names(&set, "z").is_empty());
    }

    #[test]
    fn relist_swaps_at_init_done() {
        let (reader, mut writer) = store::<ConfigMap>();
        let mut set = IndexSet::default();
        set.add("app", by_app(), &reader);
        writer.apply_watcher_event(&Event::Apply(cm("old", "x")));
        set.apply(&cm("old", "x"));

        set.init();
        set.init_apply(&cm("new", "x"));
        // During the relist the live index still answers with the old state.
        assert_eq!(names(&set, "x"), ["old"]);
        set.init_done(&reader);
        assert_eq!(names(&set, "x"), ["new"]);
    }

    #[test]
    fn index_added_during_relist_is_rebuilt_from_the_store() {
        let (reader, mut writer) = store::<ConfigMap>();
        let mut set = IndexSet::default();
        writer.apply_watcher_event(&Event::Init);
        set.init();
        writer.apply_watcher_event(&Event::InitApply(cm("a", "x")));
        set.init_apply(&cm("a", "x"));
        set.add("app", by_app(), &reader); // store still empty: live index empty
        writer.apply_watcher_event(&Event::InitApply(cm("b", "x")));
        set.init_apply(&cm("b", "x"));
        writer.apply_watcher_event(&Event::InitDone);
        set.init_done(&reader);
        assert_eq!(names(&set, "x"), ["a", "b"]);
    }

    #[test]
    fn duplicate_and_empty_values() {
        let (reader, _writer) = store::<ConfigMap>();
        let mut set = IndexSet::default();
        set.add(
            "app",
            Arc::new(|_: &ConfigMap| vec!["v".into(), "v".into()]),
            &reader,
        );
        set.apply(&cm("a", "x"));
        assert_eq!(names(&set, "v"), ["a"]);
        let mut set = IndexSet::default();
        set.add("app", Arc::new(|_: &ConfigMap| Vec::new()), &reader);
        set.apply(&cm("a", "x"));
        assert!(set.lookup("app", "").unwrap().0.is_empty());
    }
}
