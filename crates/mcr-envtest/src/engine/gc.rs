//! Garbage collection by `ownerReferences`: when an owner goes away, dependents whose last live
//! owner it was are deleted (background); dependents with other live owners, and orphaned
//! dependents, lose the reference instead.

use serde_json::Value;

use super::meta::meta_mut;
use super::state::Store;

/// The dependents currently naming `owner_uid`.
fn dependents_of(
    store: &Store,
    owner_uid: &str,
) -> Vec<(super::state::ResKey, super::state::ObjKey)> {
    store
        .dependents
        .get(owner_uid)
        .map(|set| {
            let mut deps: Vec<_> = set.iter().cloned().collect();
            deps.sort();
            deps
        })
        .unwrap_or_default()
}

/// `obj` without owner references to `owner_uid` (the field is dropped when it becomes empty).
fn without_owner(obj: &Value, owner_uid: &str) -> Value {
    let mut out = obj.clone();
    let meta = meta_mut(&mut out);
    let keep: Vec<Value> = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    if keep.is_empty() {
        meta.remove("ownerReferences");
    } else {
        meta.insert("ownerReferences".into(), Value::Array(keep));
    }
    out
}

/// The owner `owner_uid` was removed: delete dependents it was the last live owner of, and drop
/// the dangling reference from the others.
pub(crate) fn collect_dependents(store: &mut Store, owner_uid: &str) {
    if owner_uid.is_empty() {
        return;
    }
    for (res, key) in dependents_of(store, owner_uid) {
        let Some(dep) = store.get(&res, &key).cloned() else {
            continue;
        };
        let other_live_owner = super::meta::owner_uids(&dep)
            .iter()
            .any(|uid| uid != owner_uid && store.uids.contains_key(uid));
        if other_live_owner {
            let updated = without_owner(&dep, owner_uid);
            store.put(&res, updated);
        } else {
            super::delete::delete_object(store, &res, &key, None);
        }
    }
}

/// The owner `owner_uid` was deleted with `propagationPolicy=Orphan`: its dependents stay and
/// lose the reference.
pub(crate) fn orphan_dependents(store: &mut Store, owner_uid: &str) {
    for (res, key) in dependents_of(store, owner_uid) {
        let Some(dep) = store.get(&res, &key).cloned() else {
            continue;
        };
        let updated = without_owner(&dep, owner_uid);
        store.put(&res, updated);
    }
}
